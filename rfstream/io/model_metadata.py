"""What a model's metadata may hold: the types rfstream writes, in agreement with the model.

``model.json``'s ``metadata`` (written by :func:`rfstream.pipeline.fit_dataset`: the training
dataset's task, classes, width and column names, the search's summary, timings) is read by
``predict``, ``evaluate`` and ``info``.  :func:`check_metadata` refuses, in one
:class:`ModelFileError` line, a value of another type (classes as a mapping) or one that
contradicts the model (a regressor marked as a classifier), before anything uses it.
Narrative: docs/robustness.md, "rfstream/io/model_metadata.py".
"""
from __future__ import annotations

from .model_checks import ModelFileError

TASKS = ("classification", "regression")
#: the longest text a class name or a column name may be
MAX_TEXT = 4096


def _count(value):
    return type(value) is int and value >= 0


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(value):
    return isinstance(value, (int, float, bool)) or isinstance(value, str) and len(value) <= MAX_TEXT


def _texts(value):
    return isinstance(value, list) and all(isinstance(v, str) and len(v) <= MAX_TEXT for v in value)


#: each top-level entry rfstream writes, and what its value must be
TOP = {"dataset": lambda v: isinstance(v, dict), "fit_seconds": _number, "passes": _count,
       "passes_reused": _count, "selection": lambda v: isinstance(v, dict),
       "calibration": lambda v: isinstance(v, dict), "holdout": lambda v: isinstance(v, dict),
       "sample_weight": lambda v: isinstance(v, str)}
#: each entry of ``metadata["dataset"]`` (None allowed for all), and what its value must be
DATASET = {"path": lambda v: isinstance(v, str), "n_rows": _count, "n_features": _count,
           "task": lambda v: v in TASKS, "classes": lambda v: isinstance(v, list) and all(map(_scalar, v)),
           "feature_names": _texts,
           "categorical": lambda v: isinstance(v, dict) and all(isinstance(c, list) for c in v.values())}


def check_metadata(model, meta, where: str) -> None:
    """Refuse ``meta`` (a model.json's metadata) unless each entry rfstream reads has the type
    rfstream writes and agrees with ``model``: its task with the model's kind, its width and
    column names with ``n_features_in_``."""
    for name, ok in TOP.items():
        if name in meta and not ok(meta[name]):
            raise ModelFileError(f"{where}: metadata {name!r} is not what rfstream writes "
                                 f"(a {type(meta[name]).__name__}); re-save the model.")
    dataset = meta.get("dataset", {})
    for name, ok in DATASET.items():
        value = dataset.get(name)
        if value is not None and not ok(value):
            raise ModelFileError(f"{where}: metadata dataset {name!r} is not what rfstream writes "
                                 f"(a {type(value).__name__}); re-save the model.")
    width = getattr(model, "n_features_in_", None)
    names = dataset.get("feature_names")
    if dataset.get("n_features") not in (None, width) or names is not None and len(names) != width:
        raise ModelFileError(f"{where}: the metadata's columns disagree with the model's "
                             f"{width} input features; re-save the model.")
    task = dataset.get("task")
    if task is not None and hasattr(model, "predict"):
        kind = "classification" if getattr(model, "classes_", None) is not None else "regression"
        if task != kind:
            raise ModelFileError(f"{where}: the metadata says the model is a {task} model, but it is a "
                                 f"{kind} model; re-save the model.")
