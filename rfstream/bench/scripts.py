"""What the scripts under benchmarks/ share: the folder their datasets are converted into
once, how they write their JSON results, and the synthetic rows of the PCG benchmarks."""
from __future__ import annotations

import json
import os
from pathlib import Path


def cache_dir() -> Path:
    """Where the benchmarks convert their datasets once: ``$RFSTREAM_BENCH_CACHE`` or /tmp/rfstream-bench."""
    return Path(os.environ.get("RFSTREAM_BENCH_CACHE", "/tmp/rfstream-bench"))


def cached_dataset(name):
    """``(X, y)`` dask arrays of a registered dataset's training file, converted to Zarr
    once into :func:`cache_dir`."""
    from ..datasets import prepare
    from ..io import open_dataset

    return open_dataset(prepare(name, cache_dir(), test=False)[0])


def write_json(path, data, indent=1):
    """Write ``data`` as JSON to ``path`` (its folder made if missing), with a final newline;
    return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n")
    return path


def pcg_rows(n_rows, seed, chunk=65536):
    """``(X, y)``, lazily: 8 Gaussian float32 columns drawn from ``seed`` inside the tasks,
    and the label ``sin(x0) + x1 x2 > 0`` (int8)."""
    import dask.array as da
    import numpy as np

    X = da.random.default_rng(seed).standard_normal((n_rows, 8), chunks=(chunk, 8), dtype=np.float32)
    y = (da.sin(X[:, 0]) + X[:, 1] * X[:, 2] > 0).astype("int8")
    return X, y
