"""How wide a map's features will be, known before any data is read.

The memory a solver needs grows with the width D of the features (ridge's Gram
pass as D^2, :mod:`rfstream.solvers.memory`), and a fit should be refused for it
before its first pass, not after the standardizer's moments, ``gamma="auto"``'s
sample or a data-driven map's own passes.  :func:`planned_features` gives D from
the parameters alone:

* a data-independent map (``makes_data_pass`` False) draws its parameters without
  data (:meth:`rfstream.features.FeatureMap.for_columns`, at gamma = 1 and seed 0:
  the width depends on neither), so its width is exact;
* a data-driven map keeps ``n_components`` features, times
  ``columns_per_component`` (SES: a cosine and a sine per frequency); Nystroem's
  ``min(n_components, n_rows)`` is planned as ``n_components``;
* a map with neither says nothing (None) and is checked by the solver itself,
  just before its own passes.
"""
from __future__ import annotations

from .grid import gamma_items, is_gamma_grid


def planned_features(fmap, n_features):
    """``(width, n_groups, sparse)`` of ``fmap`` fitted on ``n_features`` input columns:
    the width of one gamma's features (None when only the data tell), the number of
    gammas a solver's pass makes from the same rows (a grid on a map that scales one
    draw, :mod:`rfstream.features.grid`; else 1) and whether the features are sparse."""
    n_groups = 1
    gamma = fmap.get_params().get("gamma")
    if fmap.shares_draw_across_gamma and is_gamma_grid(gamma):
        n_groups = len(gamma_items(gamma)[0])
    return _width(fmap, int(n_features)), n_groups, bool(getattr(fmap, "_sparse_output", False))


def _width(fmap, n_features):
    if not fmap.makes_data_pass:  # data-independent: draw without data
        params = fmap.get_params(deep=False)
        params["random_state"] = 0  # the width depends on no draw; a Generator stays untouched
        if "gamma" in params:
            params["gamma"] = 1.0
        return int(type(fmap).for_columns(n_features, **params)._n_features_out)
    k = fmap.get_params().get("n_components")
    return None if k is None else int(k) * int(fmap.columns_per_component)
