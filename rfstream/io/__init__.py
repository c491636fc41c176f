"""Everything that reads or writes bytes: Zarr datasets, source formats, model files, predictions.

* :mod:`~rfstream.io.dataset` -- the Zarr dataset layout: :func:`write_dataset`,
  :func:`open_dataset` (lazy dask arrays), :func:`dataset_info`.
* :mod:`~rfstream.io.convert` -- :func:`convert` a source file, directory or glob into a
  dataset, with one reader module per format (:mod:`~rfstream.io.csv`,
  :mod:`~rfstream.io.libsvm`, :mod:`~rfstream.io.parquet`, :mod:`~rfstream.io.npy`), the
  label rules they share (:mod:`~rfstream.io.ingest`) and, for many files, the
  conversion as Dask tasks (:mod:`~rfstream.io.convert_tasks`).
* :mod:`~rfstream.io.model_files` -- :func:`save_model` / :func:`load_model`, no pickle.
* :mod:`~rfstream.io.predictions` -- predictions written to Zarr block by block.
* :mod:`~rfstream.io.split` -- :func:`split_dataset`: a training and a test dataset from
  one, the rows of :func:`rfstream.train_test_split`, selected and written by the workers.
* :mod:`~rfstream.io.location` -- a local path or an fsspec URL (``s3://``, ``gs://``,
  ``abfs://``, ``memory://``, ``file://``, ``https://``) behind one interface;
  every function here takes either, plus ``storage_options``.
* :mod:`~rfstream.io.staging` -- writes seen whole or not at all: renamed when
  complete on a local disk, made visible by a commit object on an object store.
* :mod:`~rfstream.io.zarr_source` -- any Zarr v2/v3 group, store or xarray Dataset
  as rows, arrays chosen by name.

This layer knows no estimator class: it imports only the core numerics.
"""
from __future__ import annotations

import importlib
import sys
import types

#: each public name and the module it is imported from, on first use (PEP 562): a command
#: that reads a dataset's metadata or a model file imports no source reader, and none of
#: scikit-learn (model files) until it needs it
_PUBLIC = {
    "convert": "convert", "source_files": "convert",
    "dataset_info": "dataset", "iter_row_chunks": "dataset", "onehot_columns": "dataset",
    "open_dataset": "dataset", "write_dataset": "dataset",
    "Location": "location", "StorageError": "location", "as_location": "location",
    "load_model": "model_files", "model_root": "model_files", "read_model_json": "model_files",
    "save_model": "model_files",
    "read_predictions": "predictions", "write_predictions": "predictions",
    "DatasetSplit": "split", "split_dataset": "split",
}

__all__ = ["DatasetSplit", "Location", "StorageError", "as_location", "convert", "dataset_info", "iter_row_chunks",
           "load_model", "model_root", "onehot_columns", "open_dataset", "read_model_json", "read_predictions",
           "save_model", "source_files", "split_dataset", "write_dataset", "write_predictions"]


def __getattr__(name):
    """A public name, imported from its module once, then an attribute."""
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Facade(types.ModuleType):
    """``rfstream.io`` itself: importing a submodule sets it as an attribute of its package,
    which would hide the public function of the same name (``rfstream.io.convert``, the
    function, vs the module ``rfstream.io.convert``); a public name stays the function."""

    def __setattr__(self, name, value):
        if name in _PUBLIC and isinstance(value, types.ModuleType):
            return  # the submodule stays in sys.modules; the name is loaded from it on first use
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade
