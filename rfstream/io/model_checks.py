"""What :mod:`rfstream.io.model_files` checks before it trusts a model directory.

A model directory may come from someone else, so its names, sizes (:data:`MAX_JSON_BYTES`,
:data:`MAX_DEPTH`, :data:`MAX_ARRAY_ELEMENTS`, :data:`MAX_MODEL_BYTES`), structure and each
estimator's fitted state (the class's ``_fitted_rule(view)``, walked by :func:`check_fitted`)
are checked before use, then :func:`probe` runs the model on two rows.  Every failure is one
:class:`ModelFileError` (a ``ValueError``); a missing array and a damaged one get the same
message.  Narrative: docs/robustness.md.
"""
from __future__ import annotations

import math
import re
from typing import Callable, NamedTuple

import numpy as np

from .. import sizes

#: the largest ``model.json`` read (bytes)
MAX_JSON_BYTES = 64 * 2**20
#: the deepest nesting of lists and objects in ``model.json``
MAX_DEPTH = 64
#: the most elements one array may have
MAX_ARRAY_ELEMENTS = 2**31
#: the most bytes the arrays of one model may hold together
MAX_MODEL_BYTES = 2**35
#: the longest ``.npy`` header read
MAX_HEADER_BYTES = 10_000
#: an array's name, as ``save_model`` writes it
ARRAY_NAME = re.compile(r"arrays/a[0-9]{3,9}\.npy")
#: a fitted attribute's name (public, trailing underscore)
FITTED_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}_")
#: a constructor parameter's or a pipeline step's name
PARAM_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: dtype kinds an array may have: bool, integers, floats, fixed-width strings
ARRAY_KINDS = "biufUS"
SHA256 = re.compile(r"[0-9a-f]{64}")


class ModelFileError(ValueError):
    """A model directory that is missing, tampered with, truncated, malformed or too new."""


def damaged(where: str) -> ModelFileError:
    """The one message of an array that is missing, unlisted or does not match its entry."""
    return ModelFileError(f"model array {where} is missing or damaged (its size, header or sha256 "
                          "does not match model.json); re-save the model.")


# ------------------------------------------------------------------ the document
def check_depth(doc, where: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (iteratively: no recursion here)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                raise ModelFileError(f"{where} is nested more than {MAX_DEPTH} levels deep; it is not "
                                     "a model save_model writes.")
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))


def check_document(doc: dict, where: str) -> None:
    """The shape of a parsed ``model.json``: metadata, manifest and estimator tree."""
    check_depth(doc, where)
    meta = doc.get("metadata", {})
    if not isinstance(meta, dict) or not isinstance(meta.get("dataset", {}), dict):
        raise ModelFileError(f"{where}: 'metadata' (and its 'dataset') must be JSON objects.")
    manifest = doc.get("arrays", {})
    if not isinstance(manifest, dict):
        raise ModelFileError(f"{where}: 'arrays' must be a JSON object.")
    total = 0
    for name, entry in manifest.items():
        total += entry_nbytes(name, entry, where)
    if total > MAX_MODEL_BYTES:
        raise ModelFileError(f"{where} lists {total} bytes of arrays, more than the {MAX_MODEL_BYTES} "
                             "a model may hold.")
    check_estimator_node(doc.get("estimator"), "estimator", where)


def entry_nbytes(name, entry, where: str) -> int:
    """The data bytes of a manifest entry; refuses a bad name, hash, shape or dtype."""
    ok = (isinstance(name, str) and ARRAY_NAME.fullmatch(name) and isinstance(entry, dict)
          and isinstance(entry.get("sha256"), str) and SHA256.fullmatch(entry["sha256"])
          and isinstance(entry.get("shape"), list) and len(entry["shape"]) <= 32
          and all(type(n) is int and 0 <= n <= MAX_ARRAY_ELEMENTS for n in entry["shape"])
          and isinstance(entry.get("dtype"), str) and len(entry["dtype"]) <= 16)
    if not ok:
        raise ModelFileError(f"{where}: the manifest entry {str(name)[:80]!r} is malformed.")
    dtype = array_dtype(entry["dtype"], f"{where}: {name}")
    count = math.prod(entry["shape"])
    if count > MAX_ARRAY_ELEMENTS:
        raise ModelFileError(f"{where}: {name} declares {count} elements, more than the "
                             f"{MAX_ARRAY_ELEMENTS} an array may have.")
    return count * dtype.itemsize


def array_dtype(text, where: str) -> np.dtype:
    """A dtype a model array may have (no object, structured or void dtype)."""
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError, SyntaxError):
        dtype = None
    if dtype is None or dtype.kind not in ARRAY_KINDS or dtype.fields is not None or dtype.shape:
        raise ModelFileError(f"{where} has dtype {str(text)[:40]!r}, which a model array may not have.")
    return dtype


def check_value_node(spec, path: str, where: str) -> None:
    """A value as ``save_model`` writes it: a scalar, a list, an array, a dict or an estimator."""
    if spec is None or isinstance(spec, (bool, int, float, str)):
        return
    if isinstance(spec, list):
        for i, item in enumerate(spec):
            check_value_node(item, f"{path}[{i}]", where)
        return
    if isinstance(spec, dict):
        if "$array" in spec:
            if set(spec) != {"$array"} or not isinstance(spec["$array"], str) \
                    or not ARRAY_NAME.fullmatch(spec["$array"]):
                raise ModelFileError(f"{where}: {path} names an array {str(spec['$array'])[:80]!r} "
                                     "that is not one save_model writes (arrays/aNNN.npy).")
            return
        if "$estimator" in spec:
            check_estimator_node(spec, path, where)
            return
        if "$dict" in spec and set(spec) == {"$dict"} and isinstance(spec["$dict"], dict):
            for key, item in spec["$dict"].items():
                check_value_node(item, f"{path}.{key}", where)
            return
    raise ModelFileError(f"{where}: {path} is malformed (an unexpected {type(spec).__name__}).")


def check_estimator_node(spec, path: str, where: str) -> None:
    if not (isinstance(spec, dict) and isinstance(spec.get("$estimator"), str)):
        raise ModelFileError(f"{where}: {path} is not an estimator entry.")
    if "steps" in spec:
        steps = spec["steps"]
        if set(spec) != {"$estimator", "steps"} or not isinstance(steps, list) or not steps:
            raise ModelFileError(f"{where}: {path} has malformed pipeline steps.")
        for step in steps:
            if not (isinstance(step, list) and len(step) == 2 and isinstance(step[0], str)
                    and PARAM_NAME.fullmatch(step[0]) and "__" not in step[0]):
                raise ModelFileError(f"{where}: {path} has a malformed pipeline step.")
            check_estimator_node(step[1], f"{path}.{step[0]}", where)
        return
    params, fitted = spec.get("params", {}), spec.get("fitted", {})
    if not set(spec) <= {"$estimator", "params", "fitted"} or not isinstance(params, dict) \
            or not isinstance(fitted, dict):
        raise ModelFileError(f"{where}: {path} is a malformed estimator entry.")
    for names, pattern, what in ((params, PARAM_NAME, "parameter"), (fitted, FITTED_NAME, "fitted attribute")):
        for name, item in names.items():
            if not pattern.fullmatch(name):
                raise ModelFileError(f"{where}: {path} has a {what} named {name[:80]!r}, which no "
                                     "rfstream estimator has.")
            check_value_node(item, f"{path}.{name}", where)


# ------------------------------------------------------------------ the fitted state
class ValueRule(NamedTuple):
    """An invariant between fitted values, checked once they are read: ``test(*values of
    names)`` must be true, else the model is refused saying ``text``."""

    text: str
    test: Callable
    names: tuple


class FittedView:
    """The fitted entries of one estimator before its arrays are read: scalars as they are,
    arrays as their manifest entry (shape, dtype); :meth:`check` adds invariants between the
    values, tested once read."""

    def __init__(self, fitted: dict, params: dict, manifest: dict, where: str):
        self.fitted = fitted
        self.params = params
        self.manifest = manifest
        self.where = where
        self.finite = []  # (name, lowest allowed value or None), checked once read
        self.rules = []  # ValueRule, checked once read (after finiteness)

    def fail(self, text):
        raise ModelFileError(f"{self.where}: {text}; the fitted state is inconsistent.")

    def int(self, name, *, param=False, low=1):
        value = (self.params if param else self.fitted).get(name)
        if type(value) is not int or not low <= value <= MAX_ARRAY_ELEMENTS:
            self.fail(f"{name} is {str(value)[:40]}, not an integer >= {low}")
        return value

    def number(self, name, *, positive=False, nonnegative=False):
        value = self.fitted.get(name)
        if type(value) not in (int, float) or not math.isfinite(value) or (positive and value <= 0) \
                or (nonnegative and value < 0):
            sign = " positive" if positive else " non-negative" if nonnegative else ""
            self.fail(f"{name} is {str(value)[:40]}, not a finite{sign} number")
        return value

    def array(self, name, shape=None, *, kinds="f", finite=True, optional=False, nonnegative=False):
        spec = self.fitted.get(name)
        if spec is None and optional:
            return None
        entry = self.manifest.get(spec["$array"]) if isinstance(spec, dict) and "$array" in spec else None
        if entry is None:
            self.fail(f"{name} is not an array listed in the manifest")
        if np.dtype(entry["dtype"]).kind not in kinds:
            self.fail(f"{name} has dtype {entry['dtype']}")
        if shape is not None and tuple(entry["shape"]) != tuple(shape):
            self.fail(f"{name} has shape {tuple(entry['shape'])}, not {tuple(shape)}")
        if finite:
            self.finite.append((name, 0 if nonnegative else None))
        return tuple(entry["shape"])

    def arrays(self, *names):
        """Require ``names`` to be numeric arrays of the manifest (no shapes, values not checked)."""
        for name in names:
            self.array(name, kinds="biuf", finite=False)

    def text(self, name, choices):
        """A fitted string that must be one of ``choices``."""
        value = self.fitted.get(name)
        if value not in choices:
            self.fail(f"{name} is {str(value)[:40]!r}, not one of {', '.join(choices)}")
        return value

    def at_most(self, name, value, limit, limit_name):
        """Require ``value`` (of ``name``, already checked) to be at most ``limit``."""
        if value > limit:
            self.fail(f"{name} is {value}, more than {limit_name} = {limit}")

    def check(self, text, test, *names):
        """Once ``names`` are read, refuse the model with ``text`` unless ``test(*values)``."""
        self.rules.append(ValueRule(text, test, names))

    def distinct_sorted(self, name):
        """``name`` (a 1-d array) holds distinct values in increasing order (``np.unique``'s)."""
        self.check(f"{name} must hold distinct values in increasing order",
                   lambda a: a.ndim == 1 and bool(np.all(a[1:] > a[:-1])), name)

    def within(self, name, low, high):
        """Every value of ``name`` lies in ``[low, high)`` (indices, hash buckets)."""
        self.check(f"{name} must hold values in [{low}, {high})",
                   lambda a: a.size == 0 or bool(a.min() >= low and a.max() < high), name)

    def one_of(self, name, values):
        """Every value of ``name`` is one of ``values`` (signs: -1 and 1)."""
        self.check(f"{name} must hold only {', '.join(map(str, values))}",
                   lambda a: bool(np.all(np.isin(a, values))), name)


def check_fitted(cls, view: FittedView) -> list:
    """Check ``view`` against the rule ``cls`` declares for its own fitted state, its
    ``_fitted_rule(view)`` (not inherited: a subclass states its own), before any array is
    read; every rfstream estimator gets the generic check (a positive ``n_features_in_``,
    one ``feature_names_in_`` per input column) and the probe.  Returns what to check once the arrays are read, for
    :func:`check_finite`: ``(name, lowest)`` of each array whose values must be finite (and,
    unless ``lowest`` is None, at least ``lowest``), then the rule's :class:`ValueRule` items."""
    if "n_features_in_" in view.fitted:
        view.int("n_features_in_")
        if "feature_names_in_" in view.fitted:  # one name per input column, as sklearn checks them
            view.array("feature_names_in_", (view.int("n_features_in_"),), kinds="US", finite=False)
    declared = cls.__module__.startswith("rfstream.") and "_fitted_rule" in vars(cls)
    rule = cls._fitted_rule if declared else None
    if rule is not None:
        if not view.fitted:
            view.fail("it has no fitted state")
        rule(view)
    return view.finite + view.rules


def check_finite(est, names, where: str) -> None:
    """Refuse a read array of ``names`` (:func:`check_fitted`'s list) with a value that is not
    finite, or below its lowest allowed value, and a fitted state that breaks a
    :class:`ValueRule`."""
    for item in names:
        if isinstance(item, ValueRule):
            _check_rule(est, item, where)
            continue
        name, lowest = item
        value = getattr(est, name)
        if not np.all(np.isfinite(value)):
            raise ModelFileError(f"{where}: {name} has values that are not finite.")
        if lowest is not None and np.any(value < lowest):
            raise ModelFileError(f"{where}: {name} has values below {lowest}; it holds counts or variances.")


def _check_rule(est, rule: ValueRule, where: str) -> None:
    try:
        with np.errstate(all="ignore"):
            held = bool(rule.test(*(getattr(est, name) for name in rule.names)))
    except Exception:  # values a rule cannot even compare break it
        held = False
    if not held:
        raise ModelFileError(f"{where}: {rule.text}; the fitted state is inconsistent.")


def check_width(est, where: str) -> None:
    """Refuse an estimator whose input width (``n_features_in_``) is over
    :data:`rfstream.sizes.MAX_FEATURES` or whose output width (``_n_features_out``, from its
    parameters and fitted scalars) is over :func:`rfstream.sizes.check_model_width`'s bound,
    before the model is probed; a width it cannot say is left to the probe."""
    try:
        width = getattr(est, "_n_features_out", None)
    except Exception:  # a fitted state too broken to say: the probe refuses it
        width = None
    n_in = getattr(est, "n_features_in_", None)
    try:
        if isinstance(n_in, (int, np.integer)) and not isinstance(n_in, bool):
            sizes.check_size(f"{where}: n_features_in_", int(n_in), sizes.MAX_FEATURES,
                             "no dataset rfstream reads is that wide")
        if isinstance(width, (int, np.integer)) and not isinstance(width, bool):
            sizes.check_model_width(width, where)
    except sizes.SizeError as exc:
        raise ModelFileError(str(exc)) from None


# ------------------------------------------------------------------ the probe
def probe(model, where: str) -> None:
    """Run the loaded model on a fixed two-row input; refuse what raises or looks wrong."""
    n = getattr(model, "n_features_in_", None)
    if type(n) is not int or n < 1:
        raise ModelFileError(f"{where}: the model has no valid n_features_in_.")
    low = _input_floor(model)  # histogram maps refuse negative input
    X = np.linspace(low, low + 2.0, 2 * n).reshape(2, n)
    outputs = []
    for method in ("decision_function", "predict", "transform"):
        if hasattr(model, method):
            outputs.append((method, getattr(model, method)(X)))
    if not outputs:
        raise ModelFileError(f"{where}: the model can neither predict nor transform.")
    outputs += _calibrated_outputs(model, X, where)
    classes = getattr(model, "classes_", None)
    for method, out in outputs:
        data = out.data if hasattr(out, "tocsr") else np.asarray(out)
        rows = out.shape[0] if hasattr(out, "shape") and len(out.shape) else None
        labels = method == "predict" and classes is not None
        if rows != 2 or len(out.shape) > 2 or (not labels and not (
                data.dtype.kind in "biuf" and np.all(np.isfinite(data)))):
            raise ModelFileError(f"{where}: the loaded model's {method} gives a malformed or "
                                 "non-finite output.")
        if labels and not np.all(np.isin(np.asarray(out), classes)):
            raise ModelFileError(f"{where}: the loaded model predicts labels outside classes_.")


def _input_floor(model) -> float:
    """The lowest value of the probe's rows: -1, or the first step's declared ``input_floor``
    (0 for the chi-squared maps, whose input is a histogram)."""
    steps = getattr(model, "steps", None)
    first = steps[0][1] if steps else model
    floor = getattr(first, "input_floor", -1.0)
    return float(floor) if isinstance(floor, (int, float)) else -1.0


def _calibrated_outputs(model, X, where: str):
    """``(method, output)`` of what a calibrated model adds on the probe's rows: its class
    probabilities (``predict_proba``, refused outside [0, 1] here), its posterior std (a
    regressor with a posterior)."""
    outputs = []
    if hasattr(model, "predict_proba"):
        proba = np.asarray(model.predict_proba(X))
        if proba.dtype.kind == "f" and np.any((proba < 0) | (proba > 1)):
            raise ModelFileError(f"{where}: the loaded model's predict_proba gives values outside [0, 1].")
        outputs.append(("predict_proba", proba))
    steps = getattr(model, "steps", None)
    final = steps[-1][1] if steps else model
    if hasattr(final, "predict_interval"):  # available with a posterior only
        Z = X
        for _, step in (steps or [])[:-1]:
            Z = step.transform(Z)
        outputs.append(("predict(return_std=True)", final.predict(Z, return_std=True)[1]))
    return outputs
