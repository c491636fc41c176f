"""Model directories someone else may have written (the trust-boundary issue, items 5-7).

Each crafted model is refused by ``load_model`` with a :class:`ModelFileError` and by the CLI
(``rfstream predict``, ``rfstream info``) with exit status 2 and one line on stderr, no
traceback; files outside the model directory are neither read nor changed, nothing is written.
"""
import hashlib
import io
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.watch import recording_opens

from rfstream import StreamingRidgeClassifier, load_model, save_model
from rfstream.cli import main
from rfstream.io import write_dataset
from rfstream.io import model_files
from rfstream.io.model_checks import MAX_DEPTH
from rfstream.io.model_files import ModelFileError
from rfstream.pipeline import make_model

N_FEATURES = 4


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, N_FEATURES)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int)
    model = make_model("classification", feature_params={"n_components": 16, "random_state": 0},
                       solver_params={"alpha": 1.0})
    return model.fit(X, y), X


@pytest.fixture
def env(tmp_path, fitted):
    """``(model dir, data, outside dir)``; the model sits two levels below tmp_path."""
    model, X = fitted
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not for the model\n")
    path = save_model(model, tmp_path / "a" / "b" / "model")
    data = tmp_path / "data.zarr"
    write_dataset(data, X)
    return Path(path), data, outside


def _doc(path):
    return json.loads((path / "model.json").read_text())


def _write_doc(path, doc):
    (path / "model.json").write_text(json.dumps(doc))


def _solver(doc):
    return doc["estimator"]["steps"][-1][1]


def _features(doc):
    return doc["estimator"]["steps"][1][1]


def _npy(value):
    buffer = io.BytesIO()
    np.save(buffer, value, allow_pickle=False)
    return buffer.getvalue()


def _entry(data, value):
    return {"sha256": hashlib.sha256(data).hexdigest(), "shape": list(value.shape), "dtype": value.dtype.str}


def _replace_array(path, node, attribute, value):
    """Set ``node['fitted'][attribute]`` to ``value``, with a consistent file and manifest entry."""
    doc = _doc(path)
    node = node(doc)
    name = node["fitted"][attribute]["$array"]
    data = _npy(value)
    (path / name).write_bytes(data)
    doc["arrays"][name] = _entry(data, value)
    _write_doc(path, doc)


def _tree(root):
    return {p: (p.stat().st_mtime_ns, p.stat().st_size,
                p.read_bytes() if p.is_file() and p.stat().st_size < 2**20 else None)
            for p in sorted(Path(root).rglob("*")) if not p.is_symlink()}


@pytest.fixture
def opened():
    """Every path opened through builtins.open, io.open or os.open while the test runs."""
    with recording_opens() as seen:
        yield seen


def _refused(env, capsys, opened, match=None):
    """load_model and ``rfstream predict`` refuse the model; nothing outside read, nothing written."""
    path, data, outside = env
    before = _tree(path.parents[2])
    opened.clear()  # what the test itself wrote is not the loader's doing
    with pytest.raises(ModelFileError, match=match) as info:
        load_model(path)
    assert "\n" not in str(info.value)
    capsys.readouterr()
    out = path.parents[2] / "pred.zarr"
    assert main(["predict", str(path), str(data), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rfstream: error:") and "Traceback" not in err, err
    read = list(opened)
    assert not out.exists()
    assert _tree(path.parents[2]) == before  # nothing written, nothing changed
    assert not [p for p in read if p.startswith(os.path.realpath(outside))]
    return str(info.value)


# --------------------------------------------------------------------- 5. names and paths
def test_array_name_outside_the_model_refused(env, capsys, opened):
    path, _, outside = env
    value = np.zeros((1, 16))
    data = _npy(value)
    (outside / "evil.npy").write_bytes(data)
    doc = _doc(path)
    name = "../../outside/evil.npy"
    _solver(doc)["fitted"]["coef_"] = {"$array": name}
    doc["arrays"][name] = _entry(data, value)
    _write_doc(path, doc)
    _refused(env, capsys, opened, match="arrays/aNNN.npy|malformed")


@pytest.mark.parametrize("name", ["../../../../etc/passwd", "/etc/passwd", "arrays/../model.json",
                                  "arrays/a001.npy/..", "arrays\\a001.npy", "arrays/a1.npy"])
def test_path_like_array_names_refused(env, capsys, opened, name):
    path, _, _ = env
    doc = _doc(path)
    _solver(doc)["fitted"]["coef_"] = {"$array": name}
    _write_doc(path, doc)
    _refused(env, capsys, opened)
    assert "/etc/passwd" not in opened


def test_symlinked_array_refused(env, capsys, opened):
    path, _, outside = env
    doc = _doc(path)
    name = _solver(doc)["fitted"]["coef_"]["$array"]
    target = outside / "coef.npy"
    target.write_bytes((path / name).read_bytes())  # the same bytes: the hash would match
    (path / name).unlink()
    (path / name).symlink_to(target)
    _refused(env, capsys, opened, match="symbolic link")


def test_symlinked_arrays_directory_refused(env, capsys, opened):
    path, _, outside = env
    os.replace(path / "arrays", outside / "arrays")
    (path / "arrays").symlink_to(outside / "arrays")
    _refused(env, capsys, opened, match="symbolic link")


def test_symlinked_model_json_refused(env, capsys, opened):
    path, _, outside = env
    os.replace(path / "model.json", outside / "model.json")
    (path / "model.json").symlink_to(outside / "model.json")
    _refused(env, capsys, opened, match="symbolic link")


@pytest.mark.parametrize("current", ["../../other_model/m", "/tmp", "v-../x", "v-", 5, ["v-ab"]])
def test_commit_pointing_out_refused(tmp_path, fitted, capsys, current):
    model, X = fitted
    other = save_model(model, tmp_path / "other_model" / "m")
    victim = tmp_path / "a" / "b"
    victim.mkdir(parents=True)
    (victim / "rfstream-commit.json").write_text(json.dumps({"format": "rfstream-commit", "current": current}))
    with pytest.raises(ValueError, match="damaged"):
        load_model(victim)
    assert main(["info", str(victim)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert Path(other).exists()


def test_a_committed_version_that_is_a_link_is_refused_by_every_loader(tmp_path, fitted, capsys):
    # the version name is valid (v-<hex>) but a symbolic link to a model elsewhere
    from rfstream.pipeline import load_fitted

    model, X = fitted
    other = save_model(model, tmp_path / "other_model" / "m")
    victim = tmp_path / "a"
    victim.mkdir()
    (victim / "v-ab").symlink_to(Path(other).resolve(), target_is_directory=True)
    (victim / "rfstream-commit.json").write_text(json.dumps({"format": "rfstream-commit", "current": "v-ab"}))
    for load in (load_model, load_fitted):
        with pytest.raises(ValueError, match="symbolic link"):
            load(victim)
    assert main(["info", str(victim)]) == 2 and capsys.readouterr().err.count("\n") == 1


def test_missing_and_damaged_arrays_read_alike(env):
    path, _, _ = env
    doc = _doc(path)
    name = _solver(doc)["fitted"]["coef_"]["$array"]
    messages = []
    raw = (path / name).read_bytes()
    (path / name).write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # a wrong guess of the content
    with pytest.raises(ModelFileError) as damaged:
        load_model(path)
    messages.append(str(damaged.value))
    (path / name).unlink()
    with pytest.raises(ModelFileError) as missing:
        load_model(path)
    messages.append(str(missing.value))
    assert len(set(messages)) == 1, messages
    doc["arrays"].pop(name)
    _write_doc(path, doc)
    with pytest.raises(ModelFileError, match="not an array listed"):
        load_model(path)


# --------------------------------------------------------------------- 6. costs and malformed files
def test_many_references_read_once(env, monkeypatch):
    path, _, _ = env
    opened = []
    real = model_files._Dir.open
    monkeypatch.setattr(model_files._Dir, "open", lambda self, name: opened.append(name) or real(self, name))
    doc = _doc(path)
    name = _solver(doc)["fitted"]["coef_"]["$array"]
    _solver(doc)["fitted"]["copies_"] = [{"$array": name}] * 128
    _write_doc(path, doc)
    model = load_model(path)
    assert len(model.named_steps["solver"].copies_) == 128
    assert opened.count(name) == 1


def test_sparse_oversized_file_refused_before_reading(env, capsys, opened):
    path, _, _ = env
    doc = _doc(path)
    name = _solver(doc)["fitted"]["coef_"]["$array"]
    with open(path / name, "r+b") as f:
        f.truncate(2**31)  # a 2 GB sparse file; the manifest says 128 bytes
    start = time.perf_counter()
    message = _refused(env, capsys, opened, match="missing or damaged")
    assert time.perf_counter() - start < 5
    assert name in message


def test_header_declaring_huge_array_refused(env, capsys, opened):
    path, _, _ = env
    doc = _doc(path)
    name = _solver(doc)["fitted"]["coef_"]["$array"]
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    (path / name).write_bytes(buffer.getvalue() + b"\0" * 64)
    _refused(env, capsys, opened, match="missing or damaged")
    doc["arrays"][name]["shape"] = [10**6, 10**6]  # the manifest agrees: still refused, by the bound
    _write_doc(path, doc)
    _refused(env, capsys, opened, match="elements")


def _deep(depth):
    node = 1
    for _ in range(depth):
        node = [node]
    return node


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 900, 5000])
def test_deep_nesting_refused(env, capsys, opened, depth):
    path, _, _ = env
    text = (path / "model.json").read_text()
    deep = "[" * depth + "1" + "]" * depth
    (path / "model.json").write_text(text.replace('"metadata": {}', f'"metadata": {{"x": {deep}}}'))
    _refused(env, capsys, opened, match="nested|not valid JSON")
    assert main(["info", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_oversized_json_refused(env, capsys, opened):
    path, _, _ = env
    with open(path / "model.json", "r+b") as f:
        f.truncate(65 * 2**20)
    _refused(env, capsys, opened, match="bytes")


MALFORMED = {
    "estimator is a number": lambda d: _solver(d).update({"$estimator": 5}),
    "dict is a list": lambda d: _solver(d)["params"].update(cv={"$dict": [1, 2]}),
    "passthrough solver": lambda d: d["estimator"]["steps"][-1].__setitem__(1, "passthrough"),
    "BaseEstimator": lambda d: _solver(d).update({"$estimator": "sklearn.base.BaseEstimator"}),
    "BaseEstimator via rfstream": lambda d: _solver(d).update({"$estimator": "rfstream.features.base.BaseEstimator"}),
    "abstract map": lambda d: _features(d).update({"$estimator": "rfstream.features.base.FeatureMap"}),
    "steps not a list": lambda d: d["estimator"].update(steps={"a": 1}),
    "no steps": lambda d: d["estimator"].update(steps=[]),
    "unknown parameter": lambda d: _solver(d)["params"].update(bogus=1),
    "bad parameter value": lambda d: _solver(d)["params"].update(alpha="../x.npy"),
    "private attribute": lambda d: _solver(d)["fitted"].update(_secret_=1),
    "n_features_in_ a string": lambda d: _solver(d)["fitted"].update(n_features_in_="x"),
    "huge n_features_in_": lambda d: _solver(d)["fitted"].update(n_features_in_=10**30),
    "manifest not a dict": lambda d: d.update(arrays=[1]),
    "manifest entry malformed": lambda d: d["arrays"][next(iter(d["arrays"]))].update(shape=[-1]),
    "object dtype": lambda d: d["arrays"][next(iter(d["arrays"]))].update(dtype="|O"),
    "structured dtype": lambda d: d["arrays"][next(iter(d["arrays"]))].update(dtype="i4,i4"),
    "metadata not a dict": lambda d: d.update(metadata=[1]),
    "format_version a float": lambda d: d.update(format_version=1.0),
    "class path with dunder": lambda d: _solver(d).update({"$estimator": "rfstream.__main__.X"}),
}


@pytest.mark.parametrize("edit", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_documents_refused(env, capsys, opened, edit):
    path, _, _ = env
    doc = _doc(path)
    MALFORMED[edit](doc)
    _write_doc(path, doc)
    _refused(env, capsys, opened)


def test_zero_d_random_weights_refused(env, capsys, opened):
    _replace_array(env[0], _features, "random_weights_", np.float32(1.0).reshape(()))
    _refused(env, capsys, opened, match="random_weights_")


def test_empty_classes_refused(env, capsys, opened):
    _replace_array(env[0], _solver, "classes_", np.array([], dtype=np.int64))
    _refused(env, capsys, opened, match="classes_")


# --------------------------------------------------------------------- 7. the fitted state
def test_coef_of_wrong_shape_refused(env, capsys, opened):
    _replace_array(env[0], _solver, "coef_", np.ones((8, 200)))
    _refused(env, capsys, opened, match="coef_")


def test_nan_coefficients_refused(env, capsys, opened):
    _replace_array(env[0], _solver, "coef_", np.full((1, 16), np.nan))
    _refused(env, capsys, opened, match="not finite")


def test_three_classes_on_a_binary_model_refused(env, capsys, opened):
    _replace_array(env[0], _solver, "classes_", np.array([0, 1, 2]))
    _refused(env, capsys, opened, match="coef_")


def test_inconsistent_pipeline_refused(env, capsys, opened):
    # every attribute consistent with its own estimator, but the map's output is not the solver's input
    path = env[0]
    doc = _doc(path)
    _solver(doc)["fitted"]["n_features_in_"] = 8
    _write_doc(path, doc)
    _replace_array(path, _solver, "coef_", np.ones((1, 8)))
    _refused(env, capsys, opened)


def test_bare_estimator_and_clean_model_still_load(tmp_path, fitted, opened):
    model, X = fitted
    est = StreamingRidgeClassifier(alpha=0.5).fit(X, (X[:, 0] > 0).astype(int))
    loaded = load_model(save_model(est, tmp_path / "bare"))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    loaded = load_model(save_model(model, tmp_path / "pipe"))
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
