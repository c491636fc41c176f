"""Everything that reads or writes bytes: Zarr datasets, source formats, model files, predictions.

The names below are imported plainly from their modules: :mod:`~rfstream.io.dataset`
(:func:`open_dataset`, :func:`write_dataset`), :mod:`~rfstream.io.convert`,
:mod:`~rfstream.io.model_files` (no pickle), :mod:`~rfstream.io.predictions`,
:mod:`~rfstream.io.split` and :mod:`~rfstream.io.location`.  Every function takes a local path or
an fsspec URL and ``storage_options``; every write is staged (:mod:`~rfstream.io.staging`).  This
layer knows no estimator class.  The modules: docs/io.md and docs/robustness.md.
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
