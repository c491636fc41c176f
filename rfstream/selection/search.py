"""What a fit searches, and which route the search takes.

A fit searches a list of alphas (CV in the solver's passes) or of gammas
(:func:`rfstream.param_lists.is_listed`, the one predicate).  A gamma grid runs in the
ridge solver's two passes for a map that ``shares_draw_across_gamma``, else one fit per
gamma (:func:`rfstream.selection.gamma_loop.fit_gamma_loop`); either way the solver must
``searches_gamma``.  docs/selection.md.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import clone
from sklearn.pipeline import Pipeline

from ..options import ParameterError
from ..param_lists import gamma_items, is_listed, item_value
from ..solvers.ridge.cg import check_iterative_search
from .gamma_loop import fit_gamma_loop


def has_gamma_grid(fmap):
    """Whether the map ``fmap`` (or None) is given a grid of gammas."""
    return fmap is not None and is_listed(fmap.get_params().get("gamma"))


def loops_over_gamma(fmap):
    """Whether a gamma grid on ``fmap`` is searched by one fit per gamma (docs/selection.md)."""
    return has_gamma_grid(fmap) and not getattr(fmap, "shares_draw_across_gamma", False)


def check_search(fmap, solver):
    """Refuse, before any pass, a search the solver cannot make: a gamma grid with a solver
    that does not search gammas (or with none), a list of alphas with one that does not search
    alphas (declared: ``searches_alpha``, ``searches_gamma``), a list of candidates for an iterative
    ridge solver (:func:`rfstream.solvers.ridge.cg.check_iterative_search`)."""
    grid = has_gamma_grid(fmap)
    alphas = solver is not None and np.ndim(solver.get_params().get("alpha", 0.0)) > 0
    if alphas and not getattr(solver, "searches_alpha", False):
        raise ParameterError("the {'alpha'} parameter of " f"{type(solver).__name__} is one value, got "
                             f"{solver.get_params()['alpha']!r}: a list of alphas is searched by cross-validation "
                             "of the ridge solver; give one alpha, or use {solver='ridge'}.", alpha=None, solver=None)
    if grid and not getattr(solver, "searches_gamma", False):
        raise ParameterError("a gamma grid ({gamma=}) is searched by cross-validation of the ridge "
                             "solver; use {solver='ridge'}, or give one {gamma}.", gamma=fmap.gamma, solver=None)
    if getattr(solver, "solves_by_gram", False):
        check_iterative_search(solver, grid=grid)


def gamma_candidates(fmap):
    """The map of each gamma of a grid searched by one fit per gamma (each checked alone),
    else an empty list."""
    if not loops_over_gamma(fmap):
        return []
    items, _ = gamma_items(fmap.gamma)
    return [clone(fmap).set_params(gamma=item_value(item)) for item in items]


def fit_model(model, X, y=None, **fit_params):
    """Fit ``model`` (a Pipeline, or one estimator) on ``X, y``, searching what it is given
    to search by the route its map declares (docs/selection.md); returns the fitted model
    (for a loop over gammas, the Pipeline of the chosen gamma)."""
    fmap = model.named_steps.get("features") if isinstance(model, Pipeline) else None
    if loops_over_gamma(fmap):
        return fit_gamma_loop(model, X, y, **fit_params)
    return model.fit(X, y, **fit_params)
