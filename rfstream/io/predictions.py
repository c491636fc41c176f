"""Writing predictions to Zarr block by block (temporary path, renamed when complete)."""
from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np
import zarr

from ..cluster import compute
from .staging import staging


def write_predictions(pred, path, *, attrs=None, overwrite=False):
    """Store ``pred`` (numpy or lazy dask, rows first) as array ``y_pred`` of a Zarr group."""
    with staging(Path(path), overwrite) as store:
        group = zarr.open_group(str(store), mode="w")
        group.attrs.update({k: v for k, v in (attrs or {}).items()})
        pred = pred if isinstance(pred, da.Array) else da.from_array(np.asarray(pred))
        # regular chunks, so that no two tasks write into the same Zarr chunk
        pred = pred.rechunk({0: max(pred.chunks[0][0], 1)})
        target = group.create_array("y_pred", shape=pred.shape, dtype=pred.dtype,
                                    chunks=tuple(c[0] for c in pred.chunks))
        compute(da.store(pred, target, lock=False, compute=False))
    return Path(path)
