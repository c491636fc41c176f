"""rfstream/io/model_metadata.py: the metadata a model directory records of its training data
must have the types rfstream writes and agree with the model, else one line, exit 2."""
import json

import numpy as np
import pytest
from helpers.cli import one_error_line, run
from sklearn.pipeline import make_pipeline

from rfstream import (
    RandomFourierFeatures,
    StreamingRidge,
    StreamingRidgeClassifier,
    save_model,
)
from rfstream.io import write_dataset
from rfstream.io.model_checks import ModelFileError
from rfstream.pipeline import load_fitted

X = np.random.default_rng(0).standard_normal((60, 3))
LABELS = (X[:, 0] > 0).astype(int)
GOOD = {"path": "train.zarr", "n_rows": 60, "n_features": 3, "feature_names": ["x0", "x1", "x2"],
        "categorical": None}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("meta")
    write_dataset(str(work / "clf.zarr"), X, LABELS, attrs={"task": "classification", "classes": ["no", "yes"]})
    write_dataset(str(work / "reg.zarr"), X, X[:, 0], attrs={"task": "regression"})
    return work


def _save(work, name, kind, dataset, **meta):
    final = StreamingRidgeClassifier() if kind == "clf" else StreamingRidge()
    model = make_pipeline(RandomFourierFeatures(n_components=8, random_state=0), final)
    model.fit(X, LABELS if kind == "clf" else X[:, 0])
    path = work / name
    save_model(model, str(path), metadata={"dataset": dataset, **meta}, overwrite=True)
    return path


CASES = {
    "classes as a mapping": ("clf", {"task": "classification", "classes": {"0": "no", "1": "yes"}}),
    "classes as a number": ("clf", {"task": "classification", "classes": 5}),
    "classes of lists": ("clf", {"task": "classification", "classes": [[1], [2]]}),
    "a regressor marked a classifier": ("reg", {"task": "classification", "classes": ["no", "yes"]}),
    "a classifier marked a regressor": ("clf", {"task": "regression"}),
    "an unknown task": ("clf", {"task": {"x": 1}}),
    "n_features of another model": ("clf", {"task": "classification", "n_features": 7}),
    "n_features as text": ("clf", {"task": "classification", "n_features": "3"}),
    "feature names of another width": ("clf", {"task": "classification", "feature_names": ["a"]}),
    "feature names that are not text": ("clf", {"task": "classification", "feature_names": [1, 2, 3]}),
    "categorical as a list": ("clf", {"task": "classification", "categorical": [1]}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_metadata_of_the_wrong_type_or_model_is_refused_in_one_line(work, case, capsys):
    kind, dataset = CASES[case]
    path = _save(work, case.replace(" ", "-"), kind, {**GOOD, **dataset})
    with pytest.raises(ModelFileError, match="model.json"):
        load_fitted(path)
    data = work / ("clf.zarr" if kind == "clf" else "reg.zarr")
    for argv in (["evaluate", path, data], ["predict", path, data, "--out", work / "p.zarr", "--overwrite"]):
        assert run([*argv, "--scheduler", "threads", "--quiet"]) == 2
        assert "model.json" in one_error_line(capsys)


@pytest.mark.parametrize("meta", [{"fit_seconds": "long"}, {"selection": []}, {"holdout": 3}])
def test_other_metadata_of_the_wrong_type_is_refused(work, meta):
    path = _save(work, "other", "clf", {**GOOD, "task": "classification", "classes": ["no", "yes"]}, **meta)
    with pytest.raises(ModelFileError, match="model.json"):
        load_fitted(path)


def test_metadata_as_rfstream_writes_it_loads(work, capsys):
    path = _save(work, "good", "clf", {**GOOD, "task": "classification", "classes": ["no", "yes"]},
                 fit_seconds=0.5, passes=2, passes_reused=0)
    model, meta = load_fitted(path)
    assert meta["dataset"]["classes"] == ["no", "yes"]
    assert run(["evaluate", path, work / "clf.zarr", "--scheduler", "threads", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["classes"] == ["no", "yes"]
    bare = work / "bare"
    save_model(model, str(bare), overwrite=True)  # save_model without metadata: nothing to check
    assert load_fitted(bare)[1] == {}
