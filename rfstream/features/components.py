"""A list of ``n_components``: one draw of the largest map, every listed size searched from it.

A map whose features hold its smaller maps (``prefix_valid``, :mod:`rfstream.features.prefix`)
may be given ``n_components=[500, 1000, 2000]`` (``rfstream fit --n-components 500,1000,2000``):
``fit`` draws the largest map and records ``component_sizes_``; until a solver calls
:meth:`ComponentListMixin.select_components`, ``transform`` gives the largest map's features
with a :class:`~rfstream.features.source.FeatureSource` holding the sizes, searched in one
pass (:mod:`rfstream.solvers.ridge.gram`).  A map without prefixes refuses a list before
drawing.  Narrative: docs/rff.md.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import dask.array as da
import numpy as np
import scipy.sparse as sp

from ..options import ParameterError
from ..param_lists import component_sizes, is_listed
from .source import FeatureSource, PrefixSizes, attach_source, feature_source


def prefix_block(x, out=None, *, block, columns, scale):
    """The features of the map of one size, from the largest map's ``block``: its
    ``columns`` times ``scale`` (written into ``out`` when given)."""
    z = block(x)
    part = z[:, columns]
    part *= np.asarray(scale, dtype=part.dtype)
    if out is None:
        return part
    out[...] = part
    return out


class ComponentListMixin:
    """``n_components`` as a list on a :class:`rfstream.features.FeatureMap` (docs/rff.md)."""

    def _check_component_list(self):
        """Refuse a list on a map without prefixes, or a bad item; called by ``_validate_params``."""
        value = self.get_params(deep=False).get("n_components")
        if not is_listed(value):
            if isinstance(value, str):
                raise ValueError(f"n_components must be an int >= 1 or a list of them (e.g. [500, 1000] or "
                                 f"'500,1000'); got {value!r}.")
            return
        sizes = component_sizes(value)
        if not self.prefix_valid:
            raise ParameterError("{n_components=} needs a map whose features hold its smaller maps; "
                                 f"{type(self).__name__} has none ({self._prefix_refusal}).", n_components=list(sizes))

    def _fit_sizes(self):
        """The sorted sizes of a list ``n_components``, else None; ``fit`` draws the largest."""
        value = getattr(self, "n_components", None)
        return component_sizes(value) if is_listed(value) else None

    def select_components(self, n):
        """Make a map fitted with a list of ``n_components`` the ordinary fitted map of ``n``
        components (``n_components=n``; the solver calls this with its choice); returns ``self``."""
        chosen = self.with_components(int(n))
        for key, value in vars(chosen).items():
            if key not in ("component_sizes_",):
                setattr(self, key, value)
        self.__dict__.pop("component_sizes_", None)
        return self

    def _with_sizes(self, Z, X):
        """``Z`` with the sizes in its source when the map holds a list of sizes (the
        features of numpy ``X`` wrapped as dask, so that the source can travel)."""
        sizes = getattr(self, "component_sizes_", None)
        if sizes is None:
            return Z
        if not isinstance(Z, da.Array):
            X = da.from_array(X, chunks=(65536, -1), asarray=not sp.issparse(X))
            Z = self._transform_checked(X)
        frozen = copy.deepcopy(self)  # the largest map, untouched by select_components
        frozen.__dict__.pop("component_sizes_", None)
        listed = PrefixSizes(tuple(sizes), tuple(frozen.prefix_columns(n) for n in sizes),
                             tuple(frozen.prefix_scale(n) for n in sizes), self.select_components,
                             frozen._block_into)
        source = feature_source(Z) or FeatureSource(None, X)  # sparse features have no block
        return attach_source(Z, replace(source, sizes=listed))

