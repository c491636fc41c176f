"""Model selection in one room: what a fit searches, how, and what it chose.

* :mod:`~rfstream.selection.search`: the one predicate of a gamma search, the checks
  of a search before any pass, and the route (one pass for maps that scale one draw,
  one fit per gamma for the others);
* :mod:`~rfstream.selection.gamma_loop`: one fit per gamma;
* :mod:`~rfstream.selection.summary`: the choice and the CV table, for the fit's
  summary and the model's metadata;
* :mod:`~rfstream.selection.heatmap`: the CV table as a heat map (``report=True``).

The alphas and folds of a search are the ridge solver's (:mod:`rfstream.solvers.ridge.cv`,
:mod:`rfstream.solvers.ridge.loo`, :mod:`rfstream.solvers.ridge.cv`): they run inside its
passes, which this room only chooses and reads.
"""
from .gamma_loop import fit_gamma_loop
from .heatmap import HEATMAP_FILE, cv_heatmap_png, have_matplotlib
from .search import check_search, fit_model, gamma_candidates, has_gamma_grid, loops_over_gamma
from .summary import selection_summary

__all__ = ["HEATMAP_FILE", "check_search", "cv_heatmap_png", "fit_gamma_loop", "fit_model",
           "gamma_candidates", "has_gamma_grid", "have_matplotlib", "loops_over_gamma",
           "selection_summary"]
