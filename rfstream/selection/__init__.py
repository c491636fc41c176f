"""Model selection in one room: what a fit searches, by which route, and what it chose.

:mod:`~rfstream.selection.search` (the predicate of a gamma search, its checks and its route),
:mod:`~rfstream.selection.gamma_loop` (one fit per gamma), :mod:`~rfstream.selection.summary`
(the choice and the CV table), :mod:`~rfstream.selection.heatmap` and
:mod:`~rfstream.selection.curves` (the report).  The alphas and folds are the ridge solver's
(:mod:`rfstream.solvers.ridge.cv`): this room chooses and reads them.  docs/selection.md.
"""
from .gamma_loop import fit_gamma_loop
from .heatmap import HEATMAP_FILE, cv_heatmap_png, have_matplotlib
from .search import check_search, fit_model, gamma_candidates, has_gamma_grid, loops_over_gamma
from .summary import selection_summary

__all__ = ["HEATMAP_FILE", "check_search", "cv_heatmap_png", "fit_gamma_loop", "fit_model",
           "gamma_candidates", "has_gamma_grid", "have_matplotlib", "loops_over_gamma",
           "selection_summary"]
