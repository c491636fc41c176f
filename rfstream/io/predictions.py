"""Writing predictions to Zarr block by block, staged (:mod:`rfstream.io.staging`)."""
from __future__ import annotations

import dask.array as da
import numpy as np

from ..cluster import compute
from .dataset import writable_group
from .location import as_location
from .staging import staging
from .zarr_source import lazy_array, open_source


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


def read_predictions(path, *, storage_options=None):
    """The ``y_pred`` array of a predictions group (local or a URL), as a lazy dask array."""
    source = open_source(path, storage_options)
    return lazy_array(source, "y_pred")
