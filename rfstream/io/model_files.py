"""Saving and loading fitted models: JSON metadata + .npy arrays, no pickle.

A model directory (local, or a URL such as ``s3://bucket/model``) holds
``model.json`` and ``arrays/*.npy``.  The JSON records
the format version, the estimator tree (class, constructor parameters, fitted
attributes) and, for every array file, its shape, dtype and sha256.  Loading
checks the version, refuses classes outside rfstream (plus
``sklearn.pipeline.Pipeline``), verifies every checksum, and reads arrays with
``allow_pickle=False``: a tampered or truncated model is refused with an error
that names the file.  Saving applies the same rule to every estimator in the
tree (:func:`loadable_class`), so a model that could not be loaded (say a Pipeline
with scikit-learn's ``StandardScaler``, or a subclass defined in a script) is
refused when it is saved, with nothing written.  Arrays keep their memory layout
(C or Fortran order, as ``.npy`` records it), so a loaded model computes bit for bit
as the saved one did.

Estimators are described generically: ``get_params(deep=False)`` for the
constructor (nested estimators recursively) and the public attributes ending
in ``_`` for the fitted state, so a new rfstream estimator needs no code here
as long as its fitted state is arrays, numbers, strings or lists of them.
"""
from __future__ import annotations

import hashlib
import importlib
import io
import json
import sys

import numpy as np
from sklearn.base import BaseEstimator

from .._version import __version__
from .location import Location, as_location
from .staging import resolve_committed, staging

FORMAT = "rfstream-model"
FORMAT_VERSION = 1
ALLOWED_CLASSES = {"sklearn.pipeline.Pipeline"}


class ModelFileError(ValueError):
    """A model directory that is missing, tampered with, truncated or too new."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _class_path(obj) -> str:
    cls = type(obj)
    module = cls.__module__
    # record the public import path when the class is exported at top level; the
    # package is loaded whenever this module is (a lookup, not an upward import)
    if module.startswith("rfstream.") and getattr(sys.modules.get("rfstream"), cls.__name__, None) is cls:
        module = "rfstream"
    return f"{module}.{cls.__qualname__}"


class _Writer:
    def __init__(self, root: Location):
        self.root = root
        self.arrays = {}

    def array(self, value: np.ndarray, where: str) -> dict:
        if value.dtype.hasobject and all(isinstance(v, str) for v in value.flat):
            value = value.astype(str)  # e.g. class labels from pandas: fixed-width unicode
        if value.dtype.hasobject:
            raise TypeError(
                f"cannot save {where}: object arrays need pickle; convert it to a numeric "
                "or string array first."
            )
        name = f"arrays/a{len(self.arrays):03d}.npy"
        buffer = io.BytesIO()
        # keep the memory layout: .npy records fortran_order and np.load restores it.  A fitted
        # array in Fortran order (e.g. a Q from scipy.linalg.qr) loaded back in C order is the
        # same numbers, but BLAS then sums a product in another order and the loaded model's
        # output differs from the saved one's by float ulps.  An array that is neither C nor F
        # contiguous (a strided view) has no layout .npy can record: it is written in C order;
        # a fitted attribute should not be one.
        if not (value.flags.c_contiguous or value.flags.f_contiguous):
            value = np.ascontiguousarray(value)
        np.save(buffer, value, allow_pickle=False)
        data = buffer.getvalue()
        self.root.child(name).write_bytes(data)
        self.arrays[name] = {
            "sha256": _sha256(data),
            "shape": list(value.shape),
            "dtype": value.dtype.str,
        }
        return {"$array": name}

    def value(self, value, where: str):
        if isinstance(value, BaseEstimator):
            return self.estimator(value, where)
        if isinstance(value, np.ndarray):
            return self.array(value, where)
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (list, tuple)):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {"$dict": {k: self.value(v, f"{where}.{k}") for k, v in value.items()}}
        raise TypeError(f"cannot save {where} of type {type(value).__name__} without pickle.")

    def estimator(self, est, where: str) -> dict:
        from sklearn.pipeline import Pipeline

        spec = {"$estimator": _class_path(est)}
        if loadable_class(spec["$estimator"]) is not type(est):
            raise TypeError(
                f"cannot save {where}: {type(est).__module__}.{type(est).__qualname__} is not a class "
                "load_model loads (rfstream's estimators and sklearn.pipeline.Pipeline); build the model "
                "from rfstream's classes (rfstream.Standardizer for a scaler)."
            )
        if isinstance(est, Pipeline):
            spec["steps"] = [[name, self.value(step, f"{where}.{name}")] for name, step in est.steps]
            return spec
        spec["params"] = {
            k: self.value(v, f"{where}.{k}") for k, v in est.get_params(deep=False).items()
        }
        spec["fitted"] = {
            k: self.value(v, f"{where}.{k}")
            for k, v in vars(est).items()
            if k.endswith("_") and not k.startswith("_")
        }
        return spec


def save_model(model, path, *, metadata=None, overwrite=False, storage_options=None, files=None):
    """Save a fitted rfstream estimator or Pipeline to the directory ``path``.

    ``path`` is a local directory or a URL (``s3://bucket/model``); the model is
    written whole or not at all (:mod:`rfstream.io.staging`), ``model.json`` last.
    ``metadata`` is any JSON-serializable dict kept alongside (the CLI stores
    the training dataset's schema there).  ``files`` maps file names to bytes
    written into the directory with the model (the CLI's CV heat map; not
    checksummed, not read by :func:`load_model`).  Returns ``path``.
    """
    for name in files or {}:
        if "/" in name or name in ("model.json", "arrays") or name.startswith("."):
            raise ValueError(f"cannot save the extra file {name!r} in a model directory; give a plain "
                             "file name other than model.json.")
    with staging(as_location(path, storage_options), overwrite, marker="model.json") as root:
        for name, data in (files or {}).items():
            root.child(name).write_bytes(data)
        writer = _Writer(root)
        tree = writer.estimator(model, "model")
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "rfstream_version": __version__,
            "estimator": tree,
            "metadata": metadata or {},
            "arrays": writer.arrays,
        }
        root.child("model.json").write_bytes(json.dumps(doc, indent=1, sort_keys=False).encode())
    return path


def model_root(path, storage_options=None) -> Location:
    """The directory holding ``model.json`` (on a store: the committed version)."""
    return resolve_committed(as_location(path, storage_options))


def read_model_json(path, *, storage_options=None) -> dict:
    """The parsed ``model.json`` of a model directory, format-checked."""
    meta = model_root(path, storage_options).child("model.json")
    if not meta.isfile():
        raise ModelFileError(
            f"{path} is not an rfstream model: {meta} not found (models are directories "
            "written by save_model / rfstream fit --out)."
        )
    try:
        doc = json.loads(meta.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{meta} is not valid JSON ({exc}); the model is truncated or damaged.") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFileError(f"{meta} is not an rfstream model file (format field missing).")
    version = doc.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ModelFileError(
            f"{meta} has format_version {version!r}; this rfstream reads up to "
            f"{FORMAT_VERSION}. Upgrade rfstream to load it."
        )
    return doc


class _Reader:
    def __init__(self, root: Location, manifest: dict):
        self.root = root
        self.manifest = manifest

    def array(self, name: str) -> np.ndarray:
        entry = self.manifest.get(name)
        file = self.root.child(name)
        if entry is None or not file.isfile():
            raise ModelFileError(f"model array {file} is missing or not listed in model.json.")
        data = file.read_bytes()
        if _sha256(data) != entry["sha256"]:
            raise ModelFileError(
                f"model array {file} fails its sha256 check: the file was changed or "
                "truncated. Re-save the model."
            )
        try:
            value = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as exc:
            raise ModelFileError(f"model array {file} cannot be read without pickle ({exc}).") from None
        if list(value.shape) != entry["shape"] or value.dtype.str != entry["dtype"]:
            raise ModelFileError(f"model array {file} has the wrong shape or dtype.")
        return value

    def value(self, spec):
        if isinstance(spec, list):
            return [self.value(v) for v in spec]
        if isinstance(spec, dict):
            if "$array" in spec:
                return self.array(spec["$array"])
            if "$estimator" in spec:
                return self.estimator(spec)
            if "$dict" in spec:
                return {k: self.value(v) for k, v in spec["$dict"].items()}
            raise ModelFileError(f"unexpected entry in model.json: {sorted(spec)}")
        return spec

    def estimator(self, spec: dict):
        cls = _resolve_class(spec["$estimator"])
        if "steps" in spec:
            return cls([(name, self.value(step)) for name, step in spec["steps"]])
        params = {k: self.value(v) for k, v in spec.get("params", {}).items()}
        est = cls(**params)
        for k, v in spec.get("fitted", {}).items():
            setattr(est, k, self.value(v))
        return est


def loadable_class(path: str):
    """The estimator class ``load_model`` makes of ``path`` (as recorded in model.json), or
    None when it refuses it: the rule of :func:`save_model` and :func:`load_model` alike."""
    try:
        return _resolve_class(path)
    except ModelFileError:
        return None


def _resolve_class(path: str):
    module, _, name = path.rpartition(".")
    if not (module == "rfstream" or module.startswith("rfstream.") or path in ALLOWED_CLASSES):
        raise ModelFileError(f"model.json names class {path!r}, which rfstream does not load.")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise ModelFileError(f"model.json names class {path!r}, which this rfstream does not have.") from None
    if not (isinstance(cls, type) and issubclass(cls, BaseEstimator)):
        raise ModelFileError(f"model.json names {path!r}, which is not an estimator.")
    return cls


def load_model(path, *, storage_options=None):
    """Load a model saved by :func:`save_model` (checksums verified, no pickle)."""
    root = model_root(path, storage_options)
    doc = read_model_json(root)
    try:
        return _Reader(root, doc.get("arrays", {})).estimator(doc["estimator"])
    except (KeyError, TypeError) as exc:
        raise ModelFileError(f"{root.child('model.json')} is damaged ({exc!r}).") from None
