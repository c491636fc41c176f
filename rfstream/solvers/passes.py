"""The one shape of a solver pass's chunk function: ``chunk(x, *rows, offset, spec)``.

Every pass of the solvers is a sum over row blocks (:func:`rfstream.reductions.sum_rows`) of
such a function: ``x`` the block's rows (input rows or stored features), ``*rows`` the row
arrays that travel, in the order of :data:`COLUMNS`, ``offset`` the block's first global row,
and ``spec`` one frozen :class:`RowSpec`, whose ``columns`` are set from the arrays present,
never passed as a flag.  docs/design-notes.md, "Solvers' shared modules".
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import scipy.sparse as sp

from ..devices import CPU_FIX, DeviceError, array_namespace, is_numpy, to_host
from ..features.fused import (
    FUSED_SUB_BLOCK,
    even_sub_blocks,
    feature_sub_blocks,
    fused_buffer,
    fused_pass,
)
from ..features.on_device import device_block
from ..reductions import Layout, sum_rows
from .folds import row_folds
from .weights import row_weights

#: The row arrays a pass may read besides ``x``, in the order they travel.
COLUMNS = ("y", "w", "folds")


@dataclass(frozen=True, eq=False, kw_only=True)
class RowSpec:
    """What a pass needs from its rows, and the layout of its partials.

    Attributes
    ----------
    layout : Layout
        One block's partials (:class:`rfstream.reductions.Layout`).
    columns : tuple of str
        The names (of :data:`COLUMNS`) of the row arrays after ``x``, in order;
        set by :meth:`for_rows` from the arrays present.
    targets : callable ``(y) -> (m, T) array`` or None
        The targets of raw labels (ridge).
    classes, class_weight : ndarray or None
        The classifier's sorted classes and one weight per class
        (:func:`rfstream.solvers.weights.row_weights`).
    n_folds, seed : int
        A row's CV fold drawn from (``seed``, row index) when no ``folds`` array
        travels (:func:`rfstream.solvers.folds.row_folds`).
    features : callable ``(x, out=None)`` or None
        The feature map's block function when the task makes the features of its
        input rows ``x`` (:mod:`rfstream.features.fused`); None: ``x`` holds them.
    dtype : numpy dtype
        The features' dtype.
    precision : str
        The device's products (:data:`rfstream.devices.PRECISIONS`); the CPU ignores it.
    """

    layout: Layout
    columns: tuple = ("y",)
    targets: Callable | None = None
    classes: np.ndarray | None = None
    class_weight: np.ndarray | None = None
    n_folds: int = 1
    seed: int = 0
    features: Callable | None = None
    dtype: np.dtype = np.dtype(np.float32)
    precision: str = "fp32"

    def for_rows(self, **arrays):
        """This spec with ``columns`` naming the ``arrays`` (of :data:`COLUMNS`) that are not None."""
        return replace(self, columns=present(arrays))

    def take(self, rows):
        """``{name: block or None}`` of every name in :data:`COLUMNS`, from a chunk's ``rows``."""
        named = dict(zip(self.columns, rows))
        return {name: named.get(name) for name in COLUMNS}

    def row_weights(self, rows, offset):
        """Each row's weight ``c_i`` (sample weight x class weight), or None when every row counts once."""
        got = self.take(rows)
        return row_weights(got["y"], got["w"], offset=offset, classes=self.classes,
                           class_weight=self.class_weight)

    def row_folds(self, m, rows, offset):
        """The fold of each of the block's ``m`` rows: the given ones, or drawn from (seed, row)."""
        return row_folds(m, self.take(rows)["folds"], offset=offset, n_folds=self.n_folds, seed=self.seed)


def sub_blocks(z, spec, width):
    """``(start, stop, features)`` of the equal sub-blocks of at most ``FUSED_SUB_BLOCK`` rows
    of a block ``z``: made by ``spec.features`` into one buffer ``width`` wide
    (:func:`rfstream.features.fused.feature_sub_blocks`), or slices of the stored block; rows
    on a device: made there (:func:`device_sub_blocks`)."""
    if not is_numpy(z):
        return device_sub_blocks(z, spec)
    if spec.features is not None:
        return feature_sub_blocks(z, spec.features, fused_buffer(z.shape[0], width, np.dtype(spec.dtype)))
    z = sp.csr_matrix(z) if sp.issparse(z) else z
    return ((start, stop, z[start:stop]) for start, stop in even_sub_blocks(z.shape[0], FUSED_SUB_BLOCK))


def device_features(spec):
    """The device twin of ``spec.features`` (:func:`rfstream.features.on_device.device_block`;
    None: the rows are stored features), or the one-line refusal of a map without one."""
    if spec.features is None:
        return None
    features = device_block(spec.features)
    if features is None:
        raise DeviceError("these features do not run on a device; " f"{CPU_FIX}.", device="cuda")
    return features


def device_sub_blocks(z, spec):
    """:func:`sub_blocks` of rows ``z`` on a device, in their array namespace."""
    features = device_features(spec)
    for start, stop in even_sub_blocks(z.shape[0], FUSED_SUB_BLOCK):
        yield start, stop, z[start:stop, :] if features is None else features(z[start:stop, :])


def device_column_sums(z):
    """Float64 column sums of a block in its namespace, on the host."""
    xp = array_namespace(z)
    return to_host(xp.sum(xp.astype(z, xp.float64), axis=0))


def device_products(a, b):
    """``a' b`` of two blocks in their namespace (in their dtype), as float64 on the host."""
    xp = array_namespace(a)
    return to_host(xp.astype(xp.matmul(xp.matrix_transpose(a), b), xp.float64))


def present(arrays):
    """The names of the ``arrays`` that are not None, in :data:`COLUMNS` order."""
    return tuple(name for name in COLUMNS if arrays.get(name) is not None)


def weight_fields(weight_args):
    """The ``classes`` and ``class_weight`` entries of ``weight_args`` (a dict or None) as
    :class:`RowSpec` fields."""
    weight_args = weight_args or {}
    return {"classes": weight_args.get("classes"), "class_weight": weight_args.get("class_weight")}


def row_sum(chunk, size, X, spec, *, blocks=None, symmetric=None, **arrays):
    """:func:`rfstream.reductions.sum_rows` of ``chunk(x, *rows, offset, spec)`` over ``X``
    and the row ``arrays`` (``y=``, ``w=``, ``folds=``) that are not None; ``symmetric``:
    the spans of symmetric matrices in the partials, which travel as triangles."""
    names = present(arrays)
    return sum_rows(partial(chunk, spec=spec.for_rows(**arrays)), size, X,
                    *(arrays[name] for name in names), blocks=blocks, symmetric=symmetric)


def fused_row_sum(chunk, size, Z, spec, degrees=None, symmetric=None, **arrays):
    """:func:`row_sum` of an in-place ``chunk(z, *rows, offset, spec, out)`` over the rows of
    ``Z`` through :func:`rfstream.features.fused.fused_pass`: for ``Z = map.transform(X)``
    the tasks make the features of ``X``'s rows a sub-block at a time.  ``degrees``: each
    part of ``spec.layout`` that is homogeneous in the features, by name, with its degree
    (``{"ZV": 2}`` for ``Z'(Z V)``); given, a constant factor of the features (random
    Fourier features' ``sqrt(2/D)``) is applied to the task's partials instead of to every
    feature (:func:`rfstream.features.fused.fused_chunk`); ``symmetric`` as for :func:`row_sum`."""
    names = present(arrays)
    rescale = None if degrees is None else partial(spec.layout.scale_parts, **degrees)
    fn, rows = fused_pass(Z, partial(chunk, spec=spec.for_rows(**arrays)), size, rescale)
    return sum_rows(fn, size, rows, *(arrays[name] for name in names), symmetric=symmetric)
