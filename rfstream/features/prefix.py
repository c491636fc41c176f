"""Prefix maps: the smaller maps a fitted map holds among its own features.

A map that declares ``prefix_valid`` says which of its columns, times
:meth:`PrefixMixin.prefix_scale`, form the map of ``n`` components
(:meth:`PrefixMixin.prefix_columns`) and gives that map (:meth:`PrefixMixin.with_components`),
so that a list of ``n_components`` is fitted once at its largest.  Which maps have prefixes
and why: docs/rff.md, "rfstream/features/prefix.py".
"""
from __future__ import annotations

import copy
import math
from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted


class PrefixMixin:
    """The prefix maps of :class:`rfstream.features.FeatureMap` (docs/rff.md).

    A map with prefixes sets ``prefix_valid = True`` and defines ``_keep_prefix(n)``
    (slice a copy's drawn parameters to the first ``n`` components); it overrides
    ``_prefix_columns(n)`` when the map of ``n`` is not its first ``n`` columns (RFF
    "cossin": the first ``n/2`` cosines and the first ``n/2`` sines) and
    ``_prefix_step`` when only multiples of it are maps.
    """

    #: True for a map whose fitted features hold a valid smaller map of every size its
    #: ``prefix_columns`` accepts: a list of ``n_components`` is drawn once, at its largest
    prefix_valid = False
    #: the end of the one-line refusal of a map without prefixes (``prefix_valid`` False)
    _prefix_refusal = ("no prefix of its fitted features is declared a valid smaller map "
                       "(prefix_valid is False); fit one map per n_components")
    #: a prefix's number of columns is a multiple of this (RFF "cossin": 2)
    _prefix_step = 1

    def prefix_columns(self, n):
        """The sorted columns that are, times :meth:`prefix_scale`, the map of ``n`` components
        (:meth:`with_components`); ``ValueError`` for a map or a size without one."""
        return self._prefix_columns(self._check_prefix(n))

    def prefix_scale(self, n):
        """``sqrt(width / n)``: from this map's columns ``prefix_columns(n)`` to the map of
        ``n`` components (each normalized by ``1/sqrt`` of its own width)."""
        n = self._check_prefix(n)
        return math.sqrt(self._n_features_out / self._prefix_columns(n).size)

    def with_components(self, n):
        """A new fitted map of ``n`` components (``self`` unchanged) whose ``transform(X)`` is
        ``prefix_scale(n) * transform(X)[:, prefix_columns(n)]`` up to rounding; a gamma
        grid's maps are all sliced."""
        n = self._check_prefix(n)
        twin = copy.deepcopy(self)
        for fmap in (twin, *(getattr(twin, "_grid_maps", None) or ())):
            fmap._keep_prefix(n)
            fmap.n_components = n
        return twin

    def _prefix_columns(self, n):
        return np.arange(n)

    def _keep_prefix(self, n):  # pragma: no cover - every map with prefix_valid defines it
        raise NotImplementedError

    def _check_prefix(self, n) -> int:
        """``n`` as an int, or the one-line refusal (before the fitted state is read)."""
        name = type(self).__name__
        if not self.prefix_valid:
            raise ValueError(f"{name} cannot give a prefix of its features as a smaller map "
                             f"(n={n!r}): {self._prefix_refusal}.")
        check_is_fitted(self)
        width, step = self._n_features_out, self._prefix_step
        if isinstance(n, bool) or not isinstance(n, Integral) or n % step or not step <= n <= width:
            every = f"multiples of {step} from " if step > 1 else ""
            raise ValueError(f"{name} fitted with {width} columns gives prefix maps of {every}"
                             f"{step} to {width} columns; got n={n!r}.")
        return int(n)
