"""A bandwidth grid: one draw of a map's random parameters, scaled to every gamma.

The frequency laws of the shift-invariant kernels are scale families
(:mod:`rfstream.kernels`): a frequency drawn for ``gamma = 1`` and multiplied
by :func:`rfstream.kernels.frequency_scale` (``sqrt(gamma)`` for the Gaussian
and Cauchy kernels, ``gamma`` for the Laplacian) has the law of a frequency
drawn for ``gamma``, for every sampler (i.i.d., the inverse-CDF quasi-Monte
Carlo points, the orthogonal blocks).  Random binning's pitches scale as
``1 / gamma`` and its shifts with them.  So a map given a list of gammas draws
its parameters once and makes the map of each gamma by scaling them
(``_at_gamma``): the features of gamma g are exactly those of a map fitted
with ``gamma=g`` and the same seed.  A pass over the data then computes, in
each task, the features of every gamma from the same rows: G bandwidths cost
one read of the data (:mod:`rfstream.solvers.grid_pass`).

A grid item is a number > 0, ``"auto"`` (the papers' nearest-neighbour rule,
:func:`rfstream.kernels.auto_gamma`, computed once for the whole grid) or
``"auto*F"`` (F times it), e.g. ``["auto*0.25", "auto", "auto*4", 0.5]``; at
the command line a comma list, ``--gamma auto*0.25,auto,auto*4``.

Until a solver has chosen, a map fitted with a grid is a search in progress:
its ``transform`` gives the stacked features of every gamma (G x D columns,
always a lazy dask array) carrying a :class:`GridSource`, which the ridge
solver reads to search the grid; it then calls ``select_gamma`` and the map is
an ordinary map of the chosen gamma.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real
from typing import NamedTuple

import dask.array as da
import numpy as np
import scipy.sparse as sp

_ATTRIBUTE = "_rfstream_gamma_grid"


def gamma_items(gamma):
    """``(items, is_grid)`` of a ``gamma`` parameter; each item a float > 0, ``"auto"``
    or ``("auto", factor)``.

    A number, ``"auto"`` or ``"auto*F"`` is one item (``is_grid`` False); a list,
    tuple or 1-d array is a grid, and so is a string with commas.  Raises a
    ``ValueError`` naming the first bad item.
    """
    if isinstance(gamma, str) and "," in gamma:
        gamma = gamma.split(",")
    if isinstance(gamma, (list, tuple, np.ndarray)):
        values = list(np.asarray(gamma, dtype=object).ravel()) if isinstance(gamma, np.ndarray) else list(gamma)
        if not values:
            raise ValueError("gamma is an empty grid; give at least one value (a number > 0, 'auto' "
                             "or 'auto*F').")
        return [_item(v, i + 1) for i, v in enumerate(values)], True
    return [_item(gamma, None)], False


def _item(value, position):
    where = "gamma" if position is None else f"gamma grid item {position}"
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError(f"{where} is empty; each item is a number > 0, 'auto' or 'auto*F'.")
        if text == "auto":
            return "auto"
        if text.startswith("auto*"):
            factor = _number(text[5:])
            if factor is None or not factor > 0 or not math.isfinite(factor):
                raise ValueError(f"{where} ({value!r}): 'auto*' needs a finite number > 0 after the "
                                 "'*', e.g. 'auto*0.5'.")
            return ("auto", factor)
        number = _number(text)
        if number is None:
            raise ValueError(f"{where} ({value!r}) is not a number, 'auto' or 'auto*F'.")
        value = number
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{where} ({value!r}) is not a number, 'auto' or 'auto*F'.")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where} ({value!r}): gamma must be a finite number > 0.")
    return float(value)


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


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


def item_label(item):
    """How a grid item is written: ``0.5``, ``auto``, ``auto*0.25``."""
    if isinstance(item, float):
        return f"{item:g}"
    return "auto" if item == "auto" else f"auto*{item[1]:g}"


class GridSource(NamedTuple):
    """Where the stacked features of a map fitted with a gamma grid came from.

    Attributes
    ----------
    blocks : tuple of callables ``(x, out=None) -> features``
        The block function of each gamma's map (pure numpy, picklable).
    sparse : bool
        Whether the blocks are CSR matrices (random binning): a pass makes each
        task's features whole, not a sub-block at a time.
    rows : dask array of shape (n_samples, n_features_in)
        The input rows.
    gammas : ndarray of shape (G,)
    labels : tuple of str
        The grid items as given (``auto*0.5``), for tables and reports.
    select : callable ``(index) -> None``
        Makes the map the ordinary map of ``gammas[index]``.
    """

    blocks: tuple
    sparse: bool
    rows: da.Array
    gammas: np.ndarray
    labels: tuple
    select: Callable


def stacked_block(x, blocks, stack=None):
    """The features of every gamma's map side by side (CSR when ``stack`` is given)."""
    parts = [block(x) for block in blocks]
    return sp.hstack(parts, format="csr") if stack is not None else np.hstack(parts)


def attach_grid(Z, source):
    """Record ``source`` on the dask array ``Z``; returns ``Z``."""
    setattr(Z, _ATTRIBUTE, source)
    return Z


def grid_source(Z):
    """The :class:`GridSource` of the stacked features of a map with a gamma grid, else None."""
    return getattr(Z, _ATTRIBUTE, None) if isinstance(Z, da.Array) else None
