"""Synthetic KDD99-shaped datasets of any size, written chunk by chunk.

:func:`write_kdd_like` writes a Zarr dataset with KDD99's shape after one-hot encoding (118
columns) and a binary label, one chunk at a time.  Row ``i`` comes from its virtual block of
:data:`rfstream.random.VIRTUAL_BLOCK` rows, drawn from ``[seed, STREAM_SYNTHETIC, block]``, so
it is the same whatever ``rows_per_chunk`` is.  What the columns and the label mimic:
docs/io.md, "rfstream/datasets/synthetic.py".
"""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np

from ..random import STREAM_SYNTHETIC, VIRTUAL_BLOCK

N_NUMERIC = 38
N_RATES = 8
CATEGORIES = {"protocol": 3, "service": 66, "flag": 11}
N_FEATURES = N_NUMERIC + sum(CATEGORIES.values())


def _virtual_block(seed, b):
    rng = np.random.default_rng([seed, STREAM_SYNTHETIC, b])
    n = VIRTUAL_BLOCK
    x = np.zeros((n, N_FEATURES), dtype=np.float32)
    counts = N_NUMERIC - N_RATES
    x[:, :counts] = rng.lognormal(1.0, 2.0, size=(n, counts)) * (rng.random((n, counts)) < 0.3)
    x[:, counts:N_NUMERIC] = rng.random((n, N_RATES)) * (rng.random((n, N_RATES)) < 0.5)
    start = N_NUMERIC
    codes = []
    for size in CATEGORIES.values():
        code = np.minimum(rng.geometric(min(1.0, 4.0 / size), size=n) - 1, size - 1)  # a few common values
        x[np.arange(n), start + code] = 1.0
        codes.append(code)
        start += size
    score = (np.log1p(x[:, 0]) - 0.7 * np.log1p(x[:, 1]) + 2.0 * x[:, counts] - 1.5 * x[:, counts + 1]
             + 1.2 * (codes[1] % 3 == 0) - 0.8 * (codes[0] == 1) + rng.normal(0, 0.7, n))
    y = (score > 0.3).astype(np.int32)
    return x, y


def kdd_like_rows(start, stop, seed=0):
    """Rows ``start:stop`` of the synthetic dataset: ``(X float32, y int32)``."""
    if stop <= start:
        return np.zeros((0, N_FEATURES), np.float32), np.zeros(0, np.int32)
    first, last = start // VIRTUAL_BLOCK, (stop - 1) // VIRTUAL_BLOCK
    parts = [_virtual_block(seed, b) for b in range(first, last + 1)]
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    lo = start - first * VIRTUAL_BLOCK
    return X[lo : lo + stop - start], y[lo : lo + stop - start]


def feature_names():
    names = [f"n{j}" for j in range(N_NUMERIC)]
    for col, size in CATEGORIES.items():
        names += [f"{col}={k}" for k in range(size)]
    return names


def make_kdd_like(n_rows, *, rows_per_chunk=65536, seed=0):
    """Lazy ``(X, y)`` dask arrays of the synthetic dataset; each chunk is one task."""
    if not isinstance(n_rows, (int, np.integer)) or n_rows < 1:
        raise ValueError(f"n_rows must be a positive int; got {n_rows!r}.")
    starts = range(0, n_rows, rows_per_chunk)
    pairs = [dask.delayed(kdd_like_rows, nout=2)(s, min(s + rows_per_chunk, n_rows), seed) for s in starts]
    sizes = [min(s + rows_per_chunk, n_rows) - s for s in starts]
    X = da.concatenate([da.from_delayed(p[0], (m, N_FEATURES), np.float32) for p, m in zip(pairs, sizes)])
    y = da.concatenate([da.from_delayed(p[1], (m,), np.int32) for p, m in zip(pairs, sizes)])
    return X, y


def write_kdd_like(path, n_rows, *, rows_per_chunk=65536, seed=0, overwrite=False):
    """Write the synthetic dataset to a Zarr group, chunk by chunk; returns its attrs."""
    from ..io import write_dataset

    X, y = make_kdd_like(n_rows, rows_per_chunk=rows_per_chunk, seed=seed)
    attrs = {
        "task": "classification",
        "classes": ["normal", "attack"],
        "feature_names": feature_names(),
        "categorical": {col: [str(k) for k in range(size)] for col, size in CATEGORIES.items()},
        "source": f"rfstream.synthetic.write_kdd_like(n_rows={n_rows}, seed={seed})",
    }
    return write_dataset(path, X, y, attrs=attrs, rows_per_chunk=rows_per_chunk, overwrite=overwrite)
