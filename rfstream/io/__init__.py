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

from .convert import convert, source_files
from .dataset import dataset_info, iter_row_chunks, onehot_columns, open_dataset, write_dataset
from .location import Location, StorageError, as_location
from .model_files import load_model, model_root, read_model_json, save_model
from .predictions import read_predictions, write_predictions
from .split import DatasetSplit, split_dataset

__all__ = ["DatasetSplit", "Location", "StorageError", "as_location", "convert", "dataset_info", "iter_row_chunks",
           "load_model", "model_root", "onehot_columns", "open_dataset", "read_model_json", "read_predictions",
           "save_model", "source_files", "split_dataset", "write_dataset", "write_predictions"]
