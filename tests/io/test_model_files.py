"""Model files (rfstream.io.model_files): save_model / load_model, exact round trip, no pickle,
and refusal of bad files."""
import json
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from rfstream import StreamingRidge, StreamingRidgeClassifier, load_model, save_model
from rfstream.io.model_files import FORMAT_VERSION, ModelFileError, loadable_class
from rfstream.pipeline import make_model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4, "out", "in")
    return X, y


@pytest.fixture(scope="module")
def pipeline(data):
    X, y = data
    model = make_model(
        "classification",
        passthrough=[4],
        feature_params={"n_components": 64, "gamma": "auto", "random_state": 3},
        solver_params={"alpha": [0.1, 1.0, 10.0], "random_state": 3},
    )
    return model.fit(X, y)


def _arrays(path):
    return sorted(Path(path).rglob("*.npy"))


def _assert_no_pickle(path):
    files = [p for p in Path(path).rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".pkl", ".pickle", ".joblib")]
    for p in _arrays(path):
        np.load(p, allow_pickle=False)  # raises if an array needs pickle
    json.loads((Path(path) / "model.json").read_text())


def test_pipeline_round_trip(tmp_path, data, pipeline):
    X, _y = data
    path = save_model(pipeline, tmp_path / "model", metadata={"note": "test"})
    _assert_no_pickle(path)
    assert len(_arrays(path)) >= 5  # mean, scale, frequencies, coef, classes, ...
    loaded = load_model(path)
    assert [name for name, _ in loaded.steps] == [name for name, _ in pipeline.steps]
    # the fitted state is restored bit for bit, so predictions are identical
    np.testing.assert_array_equal(loaded.predict(X), pipeline.predict(X))
    np.testing.assert_array_equal(loaded.decision_function(X), pipeline.decision_function(X))
    Xd = da.from_array(X, chunks=(150, 5))
    np.testing.assert_array_equal(loaded.predict(Xd).compute(), pipeline.predict(X))
    solver, ref = loaded.named_steps["solver"], pipeline.named_steps["solver"]
    assert solver.alpha_ == ref.alpha_ and solver.get_params() == ref.get_params()
    np.testing.assert_array_equal(solver.cv_mse_, ref.cv_mse_)
    assert loaded.named_steps["features"].gamma_ == pipeline.named_steps["features"].gamma_
    assert loaded.named_steps["standardize"].passthrough == [4]
    doc = json.loads((path / "model.json").read_text())
    assert doc["metadata"] == {"note": "test"} and doc["format_version"] == FORMAT_VERSION


@pytest.mark.parametrize("labels", [None, ["no", "yes", "maybe"]])
def test_bare_classifier_round_trip(tmp_path, data, labels):
    X, _ = data
    y = np.argmax(X[:, :3], axis=1)
    if labels is not None:
        y = np.asarray(labels)[y]
    est = StreamingRidgeClassifier(alpha=0.5).fit(X, y)
    path = save_model(est, tmp_path / "clf")
    _assert_no_pickle(path)
    loaded = load_model(path)
    assert type(loaded) is StreamingRidgeClassifier
    np.testing.assert_array_equal(loaded.classes_, est.classes_)
    assert loaded.classes_.dtype == est.classes_.dtype
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded.coef_, est.coef_)
    assert loaded.n_features_in_ == est.n_features_in_


def test_regressor_round_trip_keeps_scalar_intercept(tmp_path, data):
    X, _ = data
    est = StreamingRidge(alpha=2.0).fit(X, X @ np.arange(5.0))
    loaded = load_model(save_model(est, tmp_path / "reg"))
    assert loaded.intercept_ == est.intercept_
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_classifier_with_object_labels_round_trip(tmp_path, data):
    # String labels often arrive with dtype=object (pandas columns); the fitted
    # classes_ then is an object array.  The model must still save without
    # pickle and predict the same labels after loading.
    X, y = data
    est = StreamingRidgeClassifier().fit(X, y.astype(object))
    loaded = load_model(save_model(est, tmp_path / "obj"))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


# --------------------------------------------------------------------- refusals
@pytest.fixture
def saved(tmp_path, pipeline):
    return save_model(pipeline, tmp_path / "model")


def test_tampered_array(saved):
    target = _arrays(saved)[-1]
    raw = bytearray(target.read_bytes())
    raw[-1] ^= 0x01  # flip one bit of the payload: still a valid .npy
    target.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="sha256"):
        load_model(saved)


def test_truncated_array(saved):
    target = _arrays(saved)[0]
    target.write_bytes(target.read_bytes()[:-8])
    with pytest.raises(ModelFileError, match="sha256"):
        load_model(saved)


def test_missing_array(saved):
    _arrays(saved)[0].unlink()
    with pytest.raises(ModelFileError, match="missing"):
        load_model(saved)


def test_truncated_json(saved):
    meta = saved / "model.json"
    meta.write_text(meta.read_text()[: len(meta.read_text()) // 2])
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load_model(saved)


def _edit_json(path, fn):
    meta = path / "model.json"
    doc = json.loads(meta.read_text())
    fn(doc)
    meta.write_text(json.dumps(doc))


@pytest.mark.parametrize("cls", ["os.system", "builtins.eval", "subprocess.Popen", "numpy.load"])
def test_foreign_class_refused(saved, cls, monkeypatch):
    called = []
    monkeypatch.setattr("os.system", lambda *a: called.append(a))

    def edit(doc):
        doc["estimator"]["steps"][0][1]["$estimator"] = cls

    _edit_json(saved, edit)
    with pytest.raises(ModelFileError, match="does not load"):
        load_model(saved)
    assert not called


def test_non_estimator_rfstream_name_refused(saved):
    _edit_json(saved, lambda doc: doc["estimator"].update({"$estimator": "rfstream.io.convert"}))
    with pytest.raises(ModelFileError, match="not an estimator"):
        load_model(saved)


def test_newer_format_version_refused(saved):
    _edit_json(saved, lambda doc: doc.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(ModelFileError, match="format_version"):
        load_model(saved)


def test_not_a_model(tmp_path):
    with pytest.raises(ModelFileError, match="not an rfstream model"):
        load_model(tmp_path)
    (tmp_path / "model.json").write_text('{"hello": 1}')
    with pytest.raises(ModelFileError, match="format"):
        load_model(tmp_path)


def test_overwrite(tmp_path, pipeline, data):
    X, y = data
    path = save_model(pipeline, tmp_path / "model")
    with pytest.raises(FileExistsError, match="overwrite"):
        save_model(pipeline, path)
    other = StreamingRidgeClassifier().fit(X, y)
    save_model(other, path, overwrite=True)
    assert type(load_model(path)) is StreamingRidgeClassifier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no leftovers


def test_failed_save_leaves_nothing(tmp_path, data, monkeypatch):
    X, y = data
    est = StreamingRidgeClassifier().fit(X, y)
    monkeypatch.setattr(est, "extra_", object(), raising=False)  # not saveable without pickle
    dst = tmp_path / "model"
    with pytest.raises(TypeError, match="extra_"):
        save_model(est, dst)
    assert not dst.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary directory left either


# --------------------------------------------------------------------- refused at save time
class _LocalRidge(StreamingRidgeClassifier):
    """An rfstream subclass defined outside rfstream: load_model would not find it."""


@pytest.mark.parametrize("make", [
    lambda: Pipeline([("scale", StandardScaler()), ("solver", StreamingRidgeClassifier())]),
    lambda: _LocalRidge(),
])
def test_save_refuses_what_load_would_refuse(tmp_path, data, make):
    X, y = data
    model = make().fit(X, y)
    dst = tmp_path / "model"
    with pytest.raises(TypeError) as info:
        save_model(model, dst)
    message = str(info.value)
    assert "\n" not in message and "load_model" in message
    name = type(model.steps[0][1] if isinstance(model, Pipeline) else model).__qualname__
    assert name in message  # the class is named
    assert not dst.exists() and list(tmp_path.iterdir()) == []  # nothing written


def test_save_and_load_apply_one_rule():
    # every class a save accepts is one load_model makes again, and the refused ones are refused
    # by both: the rule is one function
    assert loadable_class("rfstream.StreamingRidge") is StreamingRidge
    assert loadable_class("sklearn.pipeline.Pipeline") is Pipeline
    for path in ("sklearn.preprocessing.StandardScaler", "test_model_files._LocalRidge",
                 "rfstream.io.convert", "rfstream.NoSuchClass"):
        assert loadable_class(path) is None, path
