"""Datasets: the one registry of known datasets, the shipped demo data, synthetic data.

* :mod:`~rfstream.datasets.registry` -- every real dataset described once
  (:data:`DATASETS`), :func:`prepare` to convert one to Zarr once and reuse it.
* ``magic04.data.gz`` -- the MAGIC data shipped for ``rfstream demo`` (PROVENANCE.txt).
* :mod:`~rfstream.datasets.synthetic` -- KDD99-shaped data of any size, chunk by chunk.
"""
from .registry import DATASETS, Dataset, datasets_folder, get, prepare, source_paths, train_test

__all__ = ["DATASETS", "Dataset", "datasets_folder", "demo_path", "get", "prepare", "source_paths",
           "train_test"]


def demo_path():
    """Path of the shipped MAGIC gamma telescope CSV (gzip), used by ``rfstream demo``."""
    return source_paths("magic_demo")[0]
