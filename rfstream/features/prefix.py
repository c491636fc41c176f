"""Prefix maps: the smaller maps a fitted map holds among its own features.

A list of ``n_components`` (say 500, 1000, 2000) can be fitted as one map of the
largest size when the features of each smaller size are among its columns: the
map declares the capability ``prefix_valid`` and, fitted, says which of its
columns form the map of ``n`` components (:meth:`PrefixMixin.prefix_columns`)
and gives that map (:meth:`PrefixMixin.with_components`).  The columns are
never reordered: a seeded map gives the same features as before.

A map has prefixes when its features are independent draws (or independent
blocks of draws) each normalized by ``1/sqrt(width)``: the first ``n`` draws are
a map of ``n`` components whose features are the kept columns times
``sqrt(width / n)`` (:meth:`PrefixMixin.prefix_scale`; without it they estimate
``n / width`` times the kernel).  Random Fourier features (Monte Carlo, QMC,
orthogonal), circulant, Fastfood and arc-cosine features have them; the rest
refuse in one line, among them every data-driven map (its features are fitted
to the data as a whole) and Nystroem (``K_mm^{-1/2}`` mixes every landmark).
"""
from __future__ import annotations

import copy
import math
from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted


class PrefixMixin:
    """The prefix maps of :class:`rfstream.features.FeatureMap` (see the module docstring).

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
        """The sorted output columns (int ndarray) that are, times :meth:`prefix_scale`, the
        features of the map of ``n`` components made of this map's first draws (its
        :meth:`with_components`).  A one-line ``ValueError`` for a map without prefixes
        (``prefix_valid`` False) or a size it cannot give."""
        return self._prefix_columns(self._check_prefix(n))

    def prefix_scale(self, n):
        """``sqrt(width / n)``: from this map's columns ``prefix_columns(n)`` to the map of
        ``n`` components (each normalized by ``1/sqrt`` of its own width)."""
        n = self._check_prefix(n)
        return math.sqrt(self._n_features_out / self._prefix_columns(n).size)

    def with_components(self, n):
        """A new fitted map of ``n`` components; ``self`` is unchanged.

        A deep copy with its drawn parameters sliced to the first ``n`` components and
        ``n_components=n``, an ordinary fitted map (it saves, loads and refits as one).
        Its ``transform(X)`` is ``prefix_scale(n) * transform(X)[:, prefix_columns(n)]``
        up to rounding (the parameters are the same numbers; the scale is applied
        once, as the map of ``n`` does).  A map still holding a gamma grid (before
        ``select_gamma``) has every gamma's map sliced.
        """
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
