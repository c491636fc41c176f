"""How wide a map's features will be, known before any data is read.

The memory a solver needs grows with the width D of the features
(:mod:`rfstream.solvers.memory`), so a fit is refused for it before its first pass.
:func:`planned_features` gives D from the parameters alone: exact for a data-independent
map (drawn without data, :meth:`rfstream.features.FeatureMap.for_columns`),
``n_components x columns_per_component`` for a data-driven one, None when only the data
tell.  :func:`check_draw_size` refuses a draw too large to hold.  Narrative: docs/rff.md.
"""
from __future__ import annotations

import numpy as np

from ..options import ParameterError
from ..param_lists import component_sizes, gamma_items, is_listed


def planned_features(fmap, n_features):
    """``(width, n_groups, sparse)`` of ``fmap`` fitted on ``n_features`` input columns:
    the width of one gamma's features (None when only the data tell), the number of
    gammas a solver's pass makes from the same rows (a grid on a map that scales one
    draw, :mod:`rfstream.features.grid`; else 1) and whether the features are sparse."""
    n_groups = 1
    gamma = fmap.get_params().get("gamma")
    if fmap.shares_draw_across_gamma and is_listed(gamma):
        n_groups = len(gamma_items(gamma)[0])
    return _width(fmap, int(n_features)), n_groups, bool(getattr(fmap, "_sparse_output", False))


#: The share of this machine's available memory that the parameters drawn to plan a
#: map's width (and, in the fit, its own draw) may take; more is refused before drawing.
DRAW_SHARE = 0.25


def check_draw_size(fmap, n_features):
    """Refuse, before anything is drawn, a map whose random parameters could not be held:
    ``8 x k x (n_features + 2)`` bytes for the largest of its ``n_components``,
    ``n_random_features`` and ``n_candidates`` (a d x k float64 projection, offsets and
    scales: an upper bound for every map of the registry) against :data:`DRAW_SHARE` of
    the available memory.  ``n_components=10**12`` is refused here, before any allocation."""
    import psutil

    params = fmap.get_params(deep=False)
    sizes = [listed_width(v) for k, v in params.items() if k in ("n_components", "n_random_features", "n_candidates")]
    sizes = [k for k in sizes if k is not None]
    if not sizes:
        return
    k = max(sizes)
    need, limit = 8 * k * (int(n_features) + 2), int(DRAW_SHARE * psutil.virtual_memory().available)
    if need > limit:
        raise ParameterError(f"{type(fmap).__name__} with {k:,} features on {n_features} columns would draw "
                             f"{need / 2**30:,.1f} GiB of random parameters, more than {DRAW_SHARE:.0%} of this "
                             f"machine's available memory ({limit / 2**30:.1f} GiB); lower " "{n_components}.",
                             n_components=k)


def nominal_width(fmap):
    """``n_components x columns_per_component``, the width a map is asked for, known without
    drawing anything (None for a map without ``n_components``): what the memory checks use
    before :func:`planned_features` draws to learn the exact width."""
    k = listed_width(fmap.get_params(deep=False).get("n_components"))
    return None if k is None else k * int(fmap.columns_per_component)


def _width(fmap, n_features):
    check_draw_size(fmap, n_features)
    if not fmap.makes_data_pass:  # data-independent: draw without data
        params = fmap.get_params(deep=False)
        if "random_state" in params:  # the width depends on no draw; a Generator stays untouched
            params["random_state"] = 0
        if "gamma" in params:
            params["gamma"] = 1.0
        return int(type(fmap).for_columns(n_features, **params)._n_features_out)
    return nominal_width(fmap)


def listed_width(value):
    """The largest size of an ``n_components`` that may be a list (:func:`component_sizes`),
    the int itself, or None for anything else (a bad value is refused by the map's checks)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if is_listed(value):
        try:
            return max(component_sizes(value))
        except ValueError:
            return None
    return None
