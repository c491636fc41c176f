"""Writing predictions to Zarr block by block, staged (:mod:`rfstream.io.staging`)."""
from __future__ import annotations

import dask.array as da
import numpy as np

from ..cluster import compute
from .dataset import writable_group
from .location import as_location
from .staging import staging


def write_predictions(pred, path, *, attrs=None, overwrite=False, storage_options=None):
    """Store ``pred`` (numpy or lazy dask, rows first) as array ``y_pred`` of a Zarr group.

    ``path`` is a local directory or a URL; the workers write their own blocks.
    """
    with staging(as_location(path, storage_options), overwrite) as store:
        group = writable_group(store)
        group.attrs.update({k: v for k, v in (attrs or {}).items()})
        pred = pred if isinstance(pred, da.Array) else da.from_array(np.asarray(pred))
        # regular chunks, so that no two tasks write into the same Zarr chunk
        pred = pred.rechunk({0: max(pred.chunks[0][0], 1)})
        target = group.create_array("y_pred", shape=pred.shape, dtype=pred.dtype,
                                    chunks=tuple(c[0] for c in pred.chunks))
        compute(da.store(pred, target, lock=False, compute=False))
    return path
