"""A fuzzer of model directories (hypothesis): whatever is changed in ``model.json``, in an
array's ``.npy`` header or in the files, ``load_model`` either raises :class:`ModelFileError`
or returns a model that predicts exactly as the saved one; it never reads a file outside the
model directory and never writes one.

One small model per registered map (``rfstream.catalog.FEATURES``) followed by ridge, and
one followed by SGD, each saved once; every example copies one of them into a fresh
directory and mutates the copy.  The number of examples is bounded so that the module runs
in well under 90 s on a loaded two-core machine.
"""
import hashlib
import io
import json
import os
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.watch import recording_opens

from rfstream import load_model, save_model
from rfstream.catalog import FEATURES, make_model
from rfstream.io.model_files import ModelFileError

pytestmark = pytest.mark.long_file(15)  # seconds in the suite: started first (tests/conftest.py)

#: RFSTREAM_FUZZ_SCALE=20 runs twenty times the examples, with fresh randomness (a longer hunt than CI's)
SCALE = max(1, int(os.environ.get("RFSTREAM_FUZZ_SCALE", "1")))
SETTINGS = dict(deadline=None, derandomize=SCALE == 1, suppress_health_check=list(HealthCheck))
ROWS, COLUMNS = 100, 4


def _fit(features, solver):
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(ROWS, COLUMNS))).astype(np.float32)  # histograms for the chi2 maps
    y = (X[:, 0] + X[:, 1] ** 2 > 1.0).astype(int)
    takes = FEATURES[features]().get_params()
    params = {k: v for k, v in {"n_components": 8, "random_state": 0}.items() if k in takes}
    histogram = hasattr(FEATURES[features](), "input_floor")  # the chi-squared maps: not standardized
    solver_params = {"alpha": 1.0} if solver == "ridge" else {"random_state": 0, "max_iter": 3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_model("classification", features=features, solver=solver, feature_params=params,
                          solver_params=solver_params, standardize=not histogram).fit(X, y)


PROBE = np.abs(np.random.default_rng(1).normal(size=(20, COLUMNS))).astype(np.float32)
CASES = [(name, "ridge") for name in FEATURES] + [("rff", "sgd")]


class _Saved(dict):
    def __repr__(self):  # hypothesis prints the fixtures of a failing example
        return f"<{len(self)} saved models>"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``{case: (model directory, decision values on PROBE)}``."""
    base = tmp_path_factory.mktemp("fuzz-models")
    out = _Saved()
    for features, solver in CASES:
        model = _fit(features, solver)
        path = save_model(model, base / f"{features}-{solver}".replace("+", "_"))
        out[(features, solver)] = (Path(path), model.decision_function(PROBE), model.predict(PROBE))
    return out


# ------------------------------------------------------------------ recording what is touched
def _tree(root):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes() if p.stat().st_size < 2**20 else None)
            for p in sorted(Path(root).rglob("*")) if p.is_file() and not p.is_symlink()}


@contextmanager
def _workdir(saved, case):
    """A fresh copy of a saved model at ``tmp/a/b/model``, with sentinels in ``tmp/outside``."""
    with tempfile.TemporaryDirectory(prefix="rfstream-fuzz-") as tmp:
        tmp = Path(tmp)
        (tmp / "outside").mkdir()
        (tmp / "outside" / "secret").write_text("sentinel\n")
        source = saved[case][0]
        shutil.copy(next((source / "arrays").iterdir()), tmp / "outside" / "x.npy")
        path = tmp / "a" / "b" / "model"
        shutil.copytree(source, path)
        yield tmp, path


def _check(saved, case, tmp, path):
    """The property: refused, or identical predictions; nothing outside read, nothing written."""
    before = _tree(tmp)
    with recording_opens() as seen:
        try:
            model = load_model(path)
        except ModelFileError as exc:
            assert "\n" not in str(exc)
            model = None
    real_tmp, real_model = os.path.realpath(tmp), os.path.realpath(path)
    strays = [p for p in seen if p.startswith(real_tmp + os.sep) and p != real_model
              and not p.startswith(real_model + os.sep)]
    assert not strays, strays
    assert _tree(tmp) == before
    if model is not None:
        _, decision, labels = saved[case]
        np.testing.assert_array_equal(model.decision_function(PROBE), decision)
        np.testing.assert_array_equal(model.predict(PROBE), labels)


# ------------------------------------------------------------------ mutations of model.json
def _nodes(doc):
    """Every ``(container, key)`` of the document, depth first."""
    out, stack = [], [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            out.append((node, key))
            stack.append(value)
    return out


PATHS = ["../x.npy", "../../outside/x.npy", "../../../outside/secret", "/etc/passwd",
         "arrays/../../../outside/x.npy", "arrays/a999.npy", "arrays/a000.npy", "arrays/", "",
         "v-../../outside", "rfstream.io.convert", "sklearn.base.BaseEstimator", "os.system"]


VALUES = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([-1, 0, 2**31, 2**63, -(2**63), 10**30, 10**400]),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 1e-308]),
    st.sampled_from(PATHS),
    st.sampled_from(PATHS).map(lambda p: {"$array": p}),
    st.sampled_from(PATHS + [5, None]).map(lambda p: {"$estimator": p}),
    st.sampled_from([[1, 2], "x", None, {"a": {"$array": "../x.npy"}}]).map(lambda v: {"$dict": v}),
    st.sampled_from([64, 65, 900, 3000]).map(lambda depth: ("deep", depth)),  # built in the test
    st.just([]), st.just({}), st.just("passthrough"),
)


@settings(max_examples=300 * SCALE, **SETTINGS)
@given(case=st.sampled_from(CASES), edits=st.lists(st.tuples(st.integers(0, 10**6), VALUES), min_size=1,
                                                   max_size=3))
def test_json_mutations(saved, case, edits):
    with _workdir(saved, case) as (tmp, path):
        meta = path / "model.json"
        doc = json.loads(meta.read_text())
        for index, value in edits:
            nodes = _nodes(doc)
            container, key = nodes[index % len(nodes)]
            if isinstance(value, bool) and isinstance(container[key], bool):
                continue  # True <-> False is another valid model (with_mean=False), not a malformed one
            container[key] = f"DEEP-{value[1]}" if isinstance(value, tuple) else value
        text = json.dumps(doc)
        for depth in (64, 65, 900, 3000):  # too deep for json.dumps: spliced into the text
            text = text.replace(f'"DEEP-{depth}"', "[" * depth + "0" + "]" * depth)
        meta.write_text(text)
        _check(saved, case, tmp, path)


@settings(max_examples=60 * SCALE, **SETTINGS)
@given(case=st.sampled_from(CASES), cut=st.integers(0, 2000), where=st.integers(0, 10**6))
def test_truncated_json(saved, case, cut, where):
    with _workdir(saved, case) as (tmp, path):
        meta = path / "model.json"
        text = meta.read_bytes()
        at = where % (len(text) + 1)
        meta.write_bytes(text[:at] + text[at + cut % 7:])  # a cut, or a few bytes dropped
        _check(saved, case, tmp, path)


# ------------------------------------------------------------------ mutations of the arrays
SHAPES = st.lists(st.sampled_from([0, 1, 2, 3, 8, 10**6, 10**12]), max_size=3).map(tuple)
DTYPES = st.sampled_from(["<f4", "<f8", ">f8", "<i8", "|b1", "<U3", "|O", "<c16", "|V8"])


def _rewrite_header(file, shape, dtype, fortran):
    raw = file.read_bytes()
    with open(file, "rb") as f:
        np.lib.format.read_magic(f)
        np.lib.format.read_array_header_1_0(f)
        payload = raw[f.tell():]
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": fortran, "shape": shape})
    file.write_bytes(buffer.getvalue() + payload)


@settings(max_examples=150 * SCALE, **SETTINGS)
@given(case=st.sampled_from(CASES), which=st.integers(0, 10**6), other=st.integers(0, 10**6),
       action=st.sampled_from(["header", "truncate", "swap", "delete", "grow", "manifest"]),
       shape=SHAPES, dtype=DTYPES, fortran=st.booleans(), size=st.integers(0, 400))
def test_array_mutations(saved, case, which, other, action, shape, dtype, fortran, size):
    with _workdir(saved, case) as (tmp, path):
        files = sorted((path / "arrays").iterdir())
        file, second = files[which % len(files)], files[other % len(files)]
        meta = path / "model.json"
        if action == "header":
            _rewrite_header(file, shape, dtype, fortran)
        elif action == "truncate":
            file.write_bytes(file.read_bytes()[: size % max(1, file.stat().st_size)])
        elif action == "swap":  # the files change places, the manifest does not
            a, b = file.read_bytes(), second.read_bytes()
            file.write_bytes(b)
            second.write_bytes(a)
        elif action == "delete":
            file.unlink()
        elif action == "grow":
            with open(file, "ab") as f:
                f.write(b"\0" * (size + 1))
        else:  # the manifest describes a header the file does not have, with its real hash
            doc = json.loads(meta.read_text())
            entry = doc["arrays"][f"arrays/{file.name}"]
            entry.update(shape=list(shape), dtype=dtype,
                         sha256=hashlib.sha256(file.read_bytes()).hexdigest())
            meta.write_text(json.dumps(doc))
        _check(saved, case, tmp, path)


def test_unchanged_models_load_identically(saved):
    for case in CASES:
        with _workdir(saved, case) as (tmp, path):
            _check(saved, case, tmp, path)
            assert load_model(path) is not None
