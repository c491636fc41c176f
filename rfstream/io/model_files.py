"""Saving and loading fitted models: JSON metadata + .npy arrays, no pickle.

A model directory (local or a URL) holds ``model.json`` (the format version, the estimator
tree of classes, constructor parameters and fitted attributes, each array's shape, dtype and
sha256) and ``arrays/*.npy``.  Loading refuses classes outside rfstream (and
``sklearn.pipeline.Pipeline``), verifies every checksum, reads nothing outside the directory
and checks the fitted state (:mod:`rfstream.io.model_checks`); a bad model is one
:class:`ModelFileError` line.  A new estimator needs no code here.
Narrative: docs/robustness.md, "rfstream/io/model_files.py".
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import io
import json
import os
import sys
import warnings

import numpy as np

from .._version import __version__
from . import model_checks as checks
from . import nofollow
from .location import Location, StorageError, as_location
from .model_checks import ModelFileError
from .model_metadata import check_metadata
from .staging import COMMIT, VERSION_NAME, resolve_committed, staging

FORMAT = "rfstream-model"
FORMAT_VERSION = 1
ALLOWED_CLASSES = {"sklearn.pipeline.Pipeline"}


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
        # a committed version (a store's layout on a local disk) is a part below the destination
        # the user named: opened without following a link too
        parent, version = os.path.split(root.path.rstrip("/")) if root.is_local else ("", "")
        committed = VERSION_NAME.fullmatch(version) and os.path.isfile(os.path.join(parent, COMMIT))
        self.base, self.prefix = (parent, f"{version}/") if committed else (root.path, "")
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
        from sklearn.base import BaseEstimator  # here: reading a model file's metadata needs no scikit-learn

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

    Parameters
    ----------
    model : estimator or sklearn.pipeline.Pipeline
        Fitted; every estimator in it one that :func:`load_model` loads.
    path : str, Path or URL
        A local directory or a URL (``s3://bucket/model``), written whole or not at all
        (:mod:`rfstream.io.staging`), ``model.json`` last.
    metadata : dict, optional
        JSON-serializable, kept alongside (the CLI stores the training dataset's schema).
    overwrite : bool, default=False
        Replace an existing model at ``path``; otherwise ``FileExistsError``.
    storage_options : dict, optional
        For a URL's filesystem.
    files : dict of str to bytes, optional
        Plain files written with the model (not checksummed, not read by :func:`load_model`).

    Returns
    -------
    path

    Raises
    ------
    TypeError
        For a class that :func:`load_model` would not load, or a value that needs pickle.
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
    """The :class:`Location` of the directory holding ``model.json`` (on a store: the committed version)."""
    return resolve_committed(as_location(path, storage_options))


class _Dir:
    """A model directory's files, read without leaving it: on a local disk each part below
    the directory is opened relative to its parent's descriptor without following a link
    (:mod:`rfstream.io.nofollow`), so ``arrays/`` swapped for a link mid-read leads nowhere."""

    def __init__(self, root: Location):
        self.root = root
        # a committed version (a store's layout on a local disk) is a part below the destination
        # the user named: opened without following a link too
        parent, version = os.path.split(root.path.rstrip("/")) if root.is_local else ("", "")
        committed = VERSION_NAME.fullmatch(version) and os.path.isfile(os.path.join(parent, COMMIT))
        self.base, self.prefix = (parent, f"{version}/") if committed else (root.path, "")

    def open(self, name: str):
        """``(file object, size)`` of the regular file ``name`` (a relative path); None if absent."""
        loc = self.root.child(name)
        if not self.root.is_local:
            try:
                info = loc.fs.info(loc.path)
            except FileNotFoundError:
                return None
            if info.get("type") != "file":
                return None
            return loc.open("rb"), int(info["size"])
        try:
            return nofollow.open_file(self.base, self.prefix + name)
        except nofollow.Refused as exc:
            if exc.kind == "link":
                raise ModelFileError(f"{loc} is (or is under) a symbolic link; a model directory "
                                     "holds its own files.") from None
            return None

    def read_json(self, name: str):
        opened = self.open(name)
        if opened is None:
            return None
        f, size = opened
        with f:
            if size > checks.MAX_JSON_BYTES:
                raise ModelFileError(f"{self.root.child(name)} is {size} bytes, more than the "
                                     f"{checks.MAX_JSON_BYTES} a model file may have.")
            return f.read(checks.MAX_JSON_BYTES + 1)


def read_model_json(path, *, storage_options=None) -> dict:
    """The parsed ``model.json`` of a model directory, format- and structure-checked.

    Raises :class:`ModelFileError` when it is missing, too large, not JSON, not rfstream's
    or of a newer format version.
    """
    root = model_root(path, storage_options)
    meta = root.child("model.json")
    data = _Dir(root).read_json("model.json")
    if data is None:
        raise ModelFileError(
            f"{path} is not an rfstream model: {meta} not found (models are directories "
            "written by save_model / rfstream fit --out)."
        )
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        text = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0]
        raise ModelFileError(f"{meta} is not valid JSON ({text}); the model is truncated or damaged.") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFileError(f"{meta} is not an rfstream model file (format field missing).")
    version = doc.get("format_version")
    if type(version) is not int or version > FORMAT_VERSION:
        raise ModelFileError(
            f"{meta} has format_version {str(version)[:40]!r}; this rfstream reads up to "
            f"{FORMAT_VERSION}. Upgrade rfstream to load it."
        )
    checks.check_document(doc, str(meta))
    return doc


class _Reader:
    def __init__(self, root: Location, manifest: dict):
        self.root = root
        self.dir = _Dir(root)
        self.manifest = manifest
        self.cache = {}

    def array(self, name: str) -> np.ndarray:
        if name not in self.cache:
            self.cache[name] = self._read(name)
        return self.cache[name]

    def _read(self, name: str) -> np.ndarray:
        where = self.root.child(name)
        entry = self.manifest.get(name)
        opened = None if entry is None else self.dir.open(name)
        if opened is None:
            raise checks.damaged(where)
        f, size = opened
        dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
        with f:
            try:
                major, _ = np.lib.format.read_magic(f)
                read_header = {1: np.lib.format.read_array_header_1_0,
                               2: np.lib.format.read_array_header_2_0}.get(major)
                header = read_header(f, max_header_size=checks.MAX_HEADER_BYTES) if read_header else None
            except (ValueError, OSError, SyntaxError, TypeError):
                header = None
            if header is None or header[0] != shape or header[2] != dtype:
                raise checks.damaged(where)
            offset = f.tell()
            if size != offset + dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise checks.damaged(where)
            f.seek(0)
            buffer = bytearray(size)
            if f.readinto(buffer) != size or f.read(1):
                raise checks.damaged(where)
        if _sha256(buffer) != entry["sha256"]:
            raise checks.damaged(where)
        value = np.frombuffer(buffer, dtype=dtype, count=int(np.prod(shape, dtype=np.int64)), offset=offset)
        return value.reshape(shape[::-1]).transpose() if header[1] else value.reshape(shape)

    def value(self, spec, param=False):
        """The value of ``spec``; ``param``: a constructor parameter, whose estimators are
        unfitted (``KernelPCA(features=RandomFourierFeatures())``)."""
        if isinstance(spec, list):
            return [self.value(v, param) for v in spec]
        if isinstance(spec, dict):
            if "$array" in spec:
                return self.array(spec["$array"])
            if "$estimator" in spec:
                return self.estimator(spec, unfitted=param)
            return {k: self.value(v, param) for k, v in spec["$dict"].items()}
        return spec

    def estimator(self, spec: dict, top: bool = False, unfitted: bool = False):
        """The estimator of ``spec``; ``top``: the model or a step of it, whose parameters are
        checked (an estimator held in a fitted attribute was built by its owner, unchecked);
        ``unfitted``: a constructor parameter, which may have no fitted state."""
        cls = _resolve_class(spec["$estimator"])
        if "steps" in spec:
            steps = [(name, self.estimator(step, top)) for name, step in spec["steps"]]
            return cls(steps)
        where = f"{self.root.child('model.json')}: {spec['$estimator']}"
        params, fitted = spec.get("params", {}), spec.get("fitted", {})
        for name in fitted:
            found = inspect.getattr_static(cls, name, None)
            if found is not None and (callable(found) or hasattr(found, "__get__")):
                raise ModelFileError(f"{where}: the fitted attribute {name!r} would replace a method "
                                     "or property of the class.")
        finite = [] if unfitted and not fitted else checks.check_fitted(
            cls, checks.FittedView(fitted, params, self.manifest, where))
        est = cls(**{k: self.value(v, param=True) for k, v in params.items()})
        if top and hasattr(est, "check_parameters"):
            est.check_parameters(fitted.get("n_features_in_", 1))
        for k, v in fitted.items():
            setattr(est, k, self.value(v))
        checks.check_finite(est, finite, where)
        checks.check_width(est, where)
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
    parts = module.split(".")
    if not (parts[0] == "rfstream" or path in ALLOWED_CLASSES) \
            or not all(checks.PARAM_NAME.fullmatch(p) and "__" not in p for p in parts[1:] + [name.lower()]):
        raise ModelFileError(f"model.json names class {path[:120]!r}, which rfstream does not load.")
    from sklearn.base import BaseEstimator

    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise ModelFileError(f"model.json names class {path!r}, which this rfstream does not have.") from None
    if not (isinstance(cls, type) and issubclass(cls, BaseEstimator)) or inspect.isabstract(cls) \
            or not (cls.__module__.startswith("rfstream.") or path in ALLOWED_CLASSES) \
            or cls.__qualname__ != name:
        raise ModelFileError(f"model.json names {path!r}, which is not an estimator rfstream loads.")
    return cls


def load_model(path, *, storage_options=None):
    """Load a model saved by :func:`save_model` (checksums verified, no pickle).

    Parameters
    ----------
    path : str, Path or URL
        The model directory.
    storage_options : dict, optional
        For a URL's filesystem.

    Returns
    -------
    estimator or sklearn.pipeline.Pipeline
        A model that predicts as it was saved.

    Raises
    ------
    ModelFileError
        One line naming the file or node, for anything missing, damaged or foreign.
    """
    return load_model_document(path, storage_options=storage_options)[0]


def load_model_document(path, *, storage_options=None):
    """``(model, document)``: :func:`load_model` and the model.json it was built from (its
    ``metadata``), the directory resolved and the document read and checked once."""
    root = model_root(path, storage_options)  # a committed version is a name inside it, never a link
    doc = read_model_json(root)
    meta = root.child("model.json")
    try:
        model = _Reader(root, doc.get("arrays", {})).estimator(doc["estimator"], top=True)
        with np.errstate(all="ignore"), warnings.catch_warnings():  # a refusal says it all, in one line
            warnings.simplefilter("ignore")
            checks.probe(model, str(meta))
        check_metadata(model, doc.get("metadata", {}), str(meta))
    except (ModelFileError, StorageError):
        raise
    except Exception as exc:  # whatever a malformed document makes the classes raise
        text = str(exc).splitlines()[0][:200] if str(exc).strip() else ""
        raise ModelFileError(f"{meta} is damaged: {type(exc).__name__} {text}".rstrip()) from None
    return model, doc
