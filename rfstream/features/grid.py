"""A bandwidth grid: one draw of a map's random parameters, scaled to every gamma.

The frequency laws of the shift-invariant kernels are scale families
(:func:`rfstream.kernels.frequency_scale`; random binning's pitches scale as ``1 / gamma``),
so a map given a list of gammas draws once and makes each gamma's map by scaling
(``at_gamma``, :class:`GammaGridMixin`): exactly the map fitted with that gamma and seed.
Until a solver calls ``select_gamma``, ``transform`` gives every gamma's features side by
side with a :class:`~rfstream.features.source.FeatureSource` holding the grid, so G gammas
cost one read of the data (:mod:`rfstream.solvers.ridge.gram`).  Narrative: docs/bandwidth.md.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.base import tokenize

from ..kernels import auto_gamma, auto_sample_indices
from ..random import check_seed
from ..param_lists import gamma_items, item_label
from .source import GRID_LAYER, FeatureSource, GammaGrid, attach_source


def check_gamma_param(fmap):
    """Refuse a bad ``gamma`` of the map ``fmap`` (``FeatureMap._validate_params``): a
    bad item (:func:`gamma_items`), or a grid on a map that cannot share its draw
    (``shares_draw_across_gamma``).  A word of ``fmap.gamma_words`` passes."""
    name = type(fmap).__name__
    gamma = fmap.gamma
    if is_gamma_word(fmap):
        return
    try:
        _, is_grid = gamma_items(gamma)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    if is_grid and not fmap.shares_draw_across_gamma:
        raise ValueError(
            f"{name} takes one gamma, not a grid (gamma={gamma!r}); a gamma "
            "grid is searched in one pass by rff and binning features with the ridge solver. "
            "Fit once per gamma, or use one of those."
        )


def is_gamma_word(fmap):
    """Whether ``fmap.gamma`` is a word the map resolves itself (``gamma_words``: CNM's "paper")."""
    return isinstance(fmap.gamma, str) and fmap.gamma in fmap.gamma_words


def resolve_gamma(X, kernel, rng, gamma):
    """One ``gamma`` (a float, ``"auto"`` or ``"auto*F"``) as a float, for ``kernel``."""
    items, _ = gamma_items(gamma)
    return float(resolve_items(items[:1], auto_value(X, kernel, rng, items))[0])


def auto_value(X, kernel, rng, items):
    """The value of ``"auto"`` (:func:`rfstream.kernels.auto_gamma` of ``kernel`` on rows
    of ``X``) when an item needs it, else None.  The child generator is spawned whatever the
    items, so that what ``rng`` draws next is the same for a number, ``"auto"`` or a grid."""
    (child,) = rng.spawn(1)
    if not needs_auto(items):
        return None
    return auto_gamma(X, kernel, random_state=child)


def auto_rows(fmap, n_rows):
    """The rows ``gamma="auto"`` (or a grid holding it) samples in ``fmap.fit`` on ``n_rows``
    rows, or None when its gamma needs no sample: the child :func:`auto_value` spawns from the
    fit's fresh generator, seeded by the map's ``random_state`` (a prefetch gathers them ahead,
    :func:`rfstream.jobs.first_look`)."""
    if not hasattr(fmap, "gamma") or is_gamma_word(fmap) or not needs_auto(gamma_items(fmap.gamma)[0]):
        return None
    (child,) = np.random.default_rng(check_seed(fmap.random_state)).spawn(1)
    return auto_sample_indices(n_rows, child)


def needs_auto(items):
    """Whether an item of the grid is ``"auto"`` or ``"auto*F"``."""
    return any(not isinstance(item, float) for item in items)


def resolve_items(items, auto):
    """The gammas of ``items`` (a float array), with ``auto`` the value of ``"auto"``."""
    out = []
    for item in items:
        if isinstance(item, float):
            out.append(item)
        else:
            out.append(auto * (1.0 if item == "auto" else item[1]))
    return np.asarray(out, dtype=np.float64)


def stacked_block(x, blocks, stack=None):
    """The features of every gamma's map side by side (CSR when ``stack`` is given)."""
    parts = [block(x) for block in blocks]
    return sp.hstack(parts, format="csr") if stack is not None else np.hstack(parts)


class GammaGridMixin:
    """What a :class:`rfstream.features.FeatureMap` that scales one draw to every gamma
    needs for a grid (put it before ``FeatureMap`` in the bases; the map defines
    ``at_gamma(gamma)``, a copy of the fitted map at bandwidth ``gamma``).

    ``fit`` with a grid ``gamma`` resolves it (``"auto"`` computed once) into
    ``gamma_grid_`` and keeps the map of each gamma; ``transform`` then gives the
    stacked features, their source holding the grid, until :meth:`select_gamma`.
    """

    shares_draw_across_gamma = True

    def at_gamma(self, gamma):  # pragma: no cover - every map with the mixin defines it
        """A copy of this fitted map with bandwidth ``gamma``: the same draw, scaled."""
        raise NotImplementedError

    def _fit_gamma(self, X, rng):
        self._pending_grid = None
        if is_gamma_word(self):
            return super()._fit_gamma(X, rng)
        items, is_grid = gamma_items(self.gamma)
        if not is_grid:
            return super()._fit_gamma(X, rng)
        auto = auto_value(X, getattr(self, "kernel", "gaussian"), rng, items)
        self._grid_labels = tuple(item_label(item) for item in items)
        self._pending_grid = resolve_items(items, auto)
        return float(self._pending_grid[0])

    def _fit_done(self):
        super()._fit_done()
        grid = self.__dict__.pop("_pending_grid", None)
        if grid is not None:
            self.gamma_grid_ = grid
            self._grid_maps = [self.at_gamma(g) for g in grid]
        elif hasattr(self, "_grid_maps"):  # refit with one gamma
            del self._grid_maps

    def select_gamma(self, index):
        """Make a map fitted with a gamma grid the ordinary map of ``gamma_grid_[index]``
        (the ridge solver calls this with its choice); returns ``self``."""
        chosen = self._grid_maps[int(index)]
        for key, value in vars(chosen).items():
            if key.endswith("_") and not key.startswith("_"):
                setattr(self, key, value)
        del self._grid_maps
        return self

    def _transform_checked(self, X):
        if getattr(self, "_grid_maps", None) is None:
            return super()._transform_checked(X)
        return self._grid_transform(X)

    def _grid_transform(self, X):
        """The stacked features of every gamma of the grid, lazy, their source holding the grid;
        numpy input is wrapped as a dask array."""
        if not isinstance(X, da.Array):
            X = da.from_array(X, chunks=(65536, -1), asarray=not sp.issparse(X))
        maps = self._grid_maps
        width = sum(m._n_features_out for m in maps)
        dtype = self._output_dtype()
        fmt = sp.csr_matrix if self._sparse_output else None
        Z = X.map_blocks(stacked_block, blocks=tuple(m._block for m in maps), stack=fmt, dtype=dtype,
                         chunks=(X.chunks[0], (width,)),
                         meta=(sp.csr_matrix((0, width), dtype=dtype) if fmt else np.empty((0, width), dtype)),
                         name=f"{GRID_LAYER}{type(self).__name__.lower()}-{tokenize(self, X)}")
        labels = getattr(self, "_grid_labels", tuple(f"{g:g}" for g in self.gamma_grid_))
        grid = GammaGrid(tuple(m._fused_block() for m in maps), self._sparse_output,
                         self.gamma_grid_.copy(), labels, self.select_gamma)
        return attach_source(Z, FeatureSource(None, X, grid=grid))
