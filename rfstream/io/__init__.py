"""Everything that reads or writes bytes: Zarr datasets, source formats, model files, predictions.

* :mod:`~rfstream.io.dataset` -- the Zarr dataset layout: :func:`write_dataset`,
  :func:`open_dataset` (lazy dask arrays), :func:`dataset_info`.
* :mod:`~rfstream.io.convert` -- :func:`convert` a source file into a dataset, with
  one reader module per format (:mod:`~rfstream.io.csv`, :mod:`~rfstream.io.libsvm`,
  :mod:`~rfstream.io.npy`) and the label rules they share (:mod:`~rfstream.io.ingest`).
* :mod:`~rfstream.io.model_files` -- :func:`save_model` / :func:`load_model`, no pickle.
* :mod:`~rfstream.io.predictions` -- predictions written to Zarr block by block.
* :mod:`~rfstream.io.staging` -- writes staged under a temporary name, renamed when complete.

This layer knows no estimator class: it imports only the core numerics.
"""
from .convert import convert
from .dataset import (
           dataset_info,
           iter_row_chunks,
           onehot_columns,
           open_dataset,
           write_dataset,
)
from .model_files import load_model, read_model_json, save_model
from .predictions import write_predictions

__all__ = ["convert", "dataset_info", "iter_row_chunks", "load_model", "onehot_columns", "open_dataset",
           "read_model_json", "save_model", "write_dataset", "write_predictions"]
