"""Ridge's passes on a device: the products of the Gram, scoring and calibration passes in the
rows' array namespace (rfstream.devices), their partials back on the host in float64.

The Gram pass's partials are those of :func:`rfstream.solvers.ridge.gram.gram_chunk` (the same
layout: count, weight sum, Z'1, Y'1, Z'Z, Z'Y, Y'Y per fold): each sub-block of
:data:`~rfstream.solvers.ridge.gram.SUB_BLOCK` rows makes its features on the device (in the
map's dtype, float32 by default), its products ``[Z, 1]' [Z, Y, 1]`` in that dtype (FP32, or
TF32 where ``precision="tf32"``), accumulated across sub-blocks in float64 on the device, and
copied to the host once per fold of the task.  Labels, weights and folds stay on the host
(they are a few numbers per row) and travel to the device as the sub-block's ``[Y, 1]``.
The scoring and calibration passes make their decision values and leverages on the device and
bin them on the host.  docs/gpu.md.
"""
from __future__ import annotations

import numpy as np

from ...devices import array_namespace, like, numpy_dtype, on_device_once, products_in, take_rows, to_host, xp_dtype
from ...features.fused import even_sub_blocks
from ..passes import device_features


def device_gram_chunk(x, *rows, offset, spec, label_sums, sub_block):
    """:func:`rfstream.solvers.ridge.gram.gram_chunk` of rows ``x`` on a device (``label_sums``
    and ``sub_block`` are that module's, passed in to keep one definition of each)."""
    layout, n_folds = spec.layout, spec.n_folds
    out = layout.empty()
    if x.shape[0] == 0:
        return out
    xp = array_namespace(x)
    Y = np.asarray(spec.targets(spec.take(rows)["y"]), dtype=np.float64)
    c = spec.row_weights(rows, offset)
    folds = spec.row_folds(x.shape[0], rows, offset)
    features = device_features(spec)
    dtype = np.dtype(spec.dtype)
    parts = layout.unpack(out)
    every = n_folds == 1 and "folds" not in spec.columns
    with products_in(spec.precision, xp):
        for k in range(n_folds):
            index = None if every else np.flatnonzero(folds == k)
            yk = Y if every else Y[index]
            ck = None if c is None else (c if every else c[index])
            label_sums(parts, k, yk, ck)
            if yk.shape[0] == 0:
                continue
            xk = x if every else take_rows(x, index)
            total = to_host(fold_products(xp, xk, yk, ck, features, dtype, sub_block))  # one copy per fold
            D = total.shape[0]
            parts["G"][k] += total[:, :D]
            parts["C"][k] += total[:, D:-1]
            parts["s"][k] += total[:, -1]
    return out


def fold_products(xp, x, Y, c, features, dtype, sub_block):
    """``[Z'Z, Z'Y, Z'1]`` (D x (D + T + 1)) of one fold's rows, in float64 on the device: per
    sub-block, the features ``Z_s`` (scaled by ``sqrt(c)`` with row weights) and one product
    ``Z_s' [Z_s, Y_s, 1]`` in ``dtype``, added in float64."""
    f64 = xp.float64
    y1 = np.ones((Y.shape[0], Y.shape[1] + 1), dtype=dtype)
    y1[:, :-1] = Y
    root = None if c is None else np.sqrt(c).astype(dtype)
    if root is not None:
        y1 *= root[:, None]
    total = None
    for start, stop in even_sub_blocks(x.shape[0], sub_block):
        zs = x[start:stop, :] if features is None else features(x[start:stop, :])
        zs = xp.astype(zs, xp_dtype(xp, dtype))
        if root is not None:
            zs = zs * like(root[start:stop, None], xp)
        zy = xp.concat([zs, like(y1[start:stop], xp)], axis=1)
        product = xp.astype(xp.matmul(xp.matrix_transpose(zs), zy), f64)
        total = product if total is None else total + product
    return total


def device_held_out_decisions(z, folds, W, b):
    """:func:`rfstream.solvers.ridge.cv.held_out_decisions` of device features ``z``: the
    products on the device, the (m, P) decisions back on the host in float64."""
    xp = array_namespace(z)
    Wd = on_device_once(W, xp, numpy_dtype(z))  # all folds' weights, moved once (not a view a call)
    out = np.full((z.shape[0], W.shape[2]), np.nan)
    for k in range(W.shape[0]):
        index = np.flatnonzero(folds == k)
        if index.size:
            zk = take_rows(z, index)
            out[index] = to_host(xp.astype(xp.matmul(zk, Wd[k, ...]), xp.float64)) + b[k]
    return out


def device_leverage_and_decisions(zs, spec):
    """:func:`rfstream.solvers.ridge.calibration.leverage_and_decisions` of device features:
    ``||(z - mu) L||^2`` and ``(z - mu) W + intercept`` made on the device in the features'
    dtype, back on the host in float64."""
    xp = array_namespace(zs)
    dtype = np.dtype(spec.L.dtype)
    centred = zs - on_device_once(spec.mu, xp, dtype)
    decisions = to_host(xp.astype(xp.matmul(centred, on_device_once(spec.W, xp, dtype)), xp.float64))
    a = xp.matmul(centred, on_device_once(spec.L, xp, dtype))
    return to_host(xp.sum(xp.astype(a * a, xp.float64), axis=1)), decisions + spec.intercept


def device_rotation(zs, U):
    """``zs U`` of device features in float64, on the host (the leave-one-out pass's
    :func:`rfstream.solvers.ridge.loo.loo_chunk`)."""
    xp = array_namespace(zs)
    return to_host(xp.matmul(xp.astype(zs, xp.float64), on_device_once(U, xp, np.float64)))


def device_stats(z, G, Fc=None):
    """The statistics pass's products of device features (:func:`rfstream.solvers.ridge.cg.stats_chunk`):
    ``G' z`` and, given ``Fc``, ``Fc' (z * z)``, made in float64 on the device, on the host."""
    xp = array_namespace(z)
    z = xp.astype(z, xp.float64)
    sums = to_host(xp.matmul(xp.matrix_transpose(like(G, xp, np.float64)), z))
    squares = None if Fc is None else to_host(xp.matmul(xp.matrix_transpose(like(Fc, xp, np.float64)), z * z))
    return sums, squares


def device_normal_product(z, V, c=None, keep=None):
    """``Z'(C (Z V))`` of device features, flat, float64 on the host
    (:func:`rfstream.solvers.ridge.cg.product_chunk`): in ``V``'s dtype, rows weighted by ``c``
    and column j zero on the rows ``keep[:, j]`` is False (the fold its system leaves out)."""
    xp = array_namespace(z)
    dtype = np.dtype(V.dtype)
    z = xp.astype(z, xp_dtype(xp, dtype))
    zv = xp.matmul(z, on_device_once(V, xp, dtype))
    if c is not None:
        zv = zv * like(c[:, None], xp, dtype)
    if keep is not None:
        zv = zv * like(keep, xp, dtype)
    return to_host(xp.astype(xp.matmul(xp.matrix_transpose(z), zv), xp.float64)).ravel()
