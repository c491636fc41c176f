"""Fitted attributes that disagree with each other (each estimator's ``_fitted_rule``).

Every attribute below is well formed on its own (a listed array, a finite value, a positive
integer) and consistent with the manifest, but breaks an invariant the estimator's ``fit``
always keeps; ``load_model`` refuses it with one ``ModelFileError`` line, and ``rfstream
predict`` / ``transform`` with exit status 2 and one line.  A model as saved still loads.
"""
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from rfstream import (KernelPCA, PolynomialCountSketch, RandomBinningFeatures, RandomFourierFeatures,
                      SkewedChi2Sampler, StreamingRidgeClassifier, StreamingSGDClassifier, load_model,
                      save_model)
from rfstream.cli import main
from rfstream.io import write_dataset
from rfstream.io.model_files import ModelFileError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 4))
Y3 = np.arange(60) % 3


def _set_array(path, node, name, value):
    """``node['fitted'][name]`` := ``value``, its file and manifest entry consistent."""
    doc = json.loads((path / "model.json").read_text())
    fitted = node(doc)["fitted"]
    ref = fitted[name]["$array"] if isinstance(fitted.get(name), dict) else f"arrays/a{900 + len(name)}.npy"
    buffer = io.BytesIO()
    np.save(buffer, value, allow_pickle=False)
    data = buffer.getvalue()
    (path / ref).write_bytes(data)
    doc["arrays"][ref] = {"sha256": hashlib.sha256(data).hexdigest(), "shape": list(value.shape),
                          "dtype": value.dtype.str}
    fitted[name] = {"$array": ref}
    (path / "model.json").write_text(json.dumps(doc))


def _set_value(path, node, name, value):
    doc = json.loads((path / "model.json").read_text())
    node(doc)["fitted"][name] = value
    (path / "model.json").write_text(json.dumps(doc))


def _top(doc):
    return doc["estimator"]


def _saved(tmp_path, est):
    return Path(save_model(est, tmp_path / "model"))


def _refused(path, match):
    with pytest.raises(ModelFileError, match=match) as info:
        load_model(path)
    assert "\n" not in str(info.value) and "inconsistent" in str(info.value)


@pytest.fixture(scope="module")
def kpca():
    return KernelPCA(3, features=RandomFourierFeatures(32, gamma=0.5, random_state=0)).fit(X)


@pytest.mark.parametrize("edit, match", [
    (lambda p: _set_value(p, _top, "n_components_", 2), "components_"),
    (lambda p: _set_value(p, _top, "n_components_", 5), "n_components_"),
    (lambda p: _set_array(p, _top, "mean_", np.zeros(31)), "components_"),
    (lambda p: _set_array(p, _top, "explained_variance_", np.array([1.0, 2.0, 0.5])), "decreasing"),
    (lambda p: _set_array(p, _top, "components_", np.ones((3, 32)) / np.sqrt(32)), "orthonormal"),
    (lambda p: _set_value(p, _top, "method_", "magic"), "method_"),
])
def test_kernel_pca_whose_attributes_disagree_is_refused(tmp_path, kpca, edit, match):
    path = _saved(tmp_path, kpca)
    edit(path)
    _refused(path, match)


@pytest.mark.parametrize("solver", [StreamingRidgeClassifier(alpha=1.0),
                                    StreamingSGDClassifier(max_iter=2, random_state=0)])
@pytest.mark.parametrize("classes", [[0, 0, 2], [2, 1, 0], [0, 2, 1]])
def test_duplicate_or_unsorted_classes_are_refused(tmp_path, solver, classes):
    path = _saved(tmp_path, solver.fit(X, Y3))
    _set_array(path, _top, "classes_", np.array(classes))
    _refused(path, "classes_ must hold distinct values in increasing order")


@pytest.mark.parametrize("coef0", [0.0, 1.0])
@pytest.mark.parametrize("edit, match", [
    (lambda p, c: (_set_array(p, _top, "index_hash_", np.zeros((2, 2), np.int64)),
                   _set_array(p, _top, "bit_hash_", np.ones((2, 2)))), "index_hash_"),
    (lambda p, c: _set_array(p, _top, "index_hash_", np.full((2, 4 + (c != 0)), 16, np.int64)), r"\[0, 16\)"),
    (lambda p, c: _set_array(p, _top, "bit_hash_", np.full((2, 4 + (c != 0)), 0.5)), "-1.0, 1.0"),
])
def test_polynomial_sketch_hashes_must_cover_the_input(tmp_path, coef0, edit, match):
    path = _saved(tmp_path, PolynomialCountSketch(n_components=16, coef0=coef0, random_state=0).fit(X))
    edit(path, coef0)
    _refused(path, match)


@pytest.mark.parametrize("est, name, value, match", [
    (SkewedChi2Sampler(n_components=8, random_state=0), "random_offset_", np.zeros(5, np.float32),
     "random_offset_"),
    (SkewedChi2Sampler(n_components=8, random_state=0), "random_weights_", np.zeros((3, 8), np.float32),
     "random_weights_"),
    (RandomBinningFeatures(8, random_state=0), "hash_salts_", np.zeros(3, np.uint64),
     "hash_salts_"),
    (RandomBinningFeatures(8, random_state=0), "offsets_", np.zeros((8, 3)), "offsets_"),
])
def test_maps_whose_arrays_disagree_are_refused(tmp_path, est, name, value, match):
    path = _saved(tmp_path, est.fit(np.abs(X)))
    _set_array(path, _top, name, value)
    _refused(path, match)


def test_the_cli_refuses_in_one_line_and_saved_models_still_load(tmp_path, kpca, capsys):
    data = tmp_path / "d.zarr"
    write_dataset(data, X)
    path = _saved(tmp_path, kpca)
    np.testing.assert_array_equal(load_model(path).transform(X), kpca.transform(X))
    _set_value(path, _top, "n_components_", 2)
    capsys.readouterr()
    assert main(["transform", str(path), str(data), "--out", str(tmp_path / "t.zarr"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rfstream: error:") and "Traceback" not in err, err
    assert not (tmp_path / "t.zarr").exists()


@pytest.mark.parametrize("est, name, value, match", [
    ("circulant", "random_offset_", np.zeros(30, np.float32), "circulant_"),
    ("circulant", "signs_", np.full(4, 0.5, np.float32), "signs_"),
    ("nystroem", "normalization_", np.eye(8)[:, :6], "normalization_"),
    ("nystroem", "normalization_", np.triu(np.ones((8, 8))), "symmetric"),
    ("standardizer", "scale_", -np.ones(4), "scale_"),
])
def test_more_maps_whose_arrays_disagree_are_refused(tmp_path, est, name, value, match):
    from rfstream import CirculantFeatures, Standardizer
    from rfstream.datadriven.nystroem import NystroemFeatures

    est = {"circulant": CirculantFeatures(16, random_state=0),
           "nystroem": NystroemFeatures(n_components=8, random_state=0), "standardizer": Standardizer()}[est]
    path = _saved(tmp_path, est.fit(X))
    _set_array(path, _top, name, value)
    _refused(path, match)


def _data_driven(name):
    from rfstream import TEFM, CompactNonlinearMap, EERFFeatures, LKRFFeatures, SESFeatures
    from rfstream.features.fastfood import FastfoodFeatures

    return {"cnm": CompactNonlinearMap(n_components=8, random_state=0, max_iter=2),
            "eerf": EERFFeatures(8, n_candidates=40, subsample=1.0, random_state=0),
            "lkrf": LKRFFeatures(8, n_candidates=40, subsample=1.0, random_state=0),
            "tefm": TEFM(n_components=4, random_state=0), "ses": SESFeatures(n_components=8, random_state=0),
            "fastfood": FastfoodFeatures(16, random_state=0)}[name]


@pytest.mark.parametrize("name, attribute, value, match", [
    ("cnm", "classes_", np.array([1, 0]), "classes_ must hold distinct"),
    ("cnm", "projection_", np.zeros((3, 8)), "projection_"),
    ("eerf", "selected_", np.arange(8) + 40, r"selected_ must hold values in \[0, 40\)"),
    ("lkrf", "weights_", np.ones(39), "weights_"),
    ("tefm", "components_", np.ones((16, 4)), "orthonormal"),
    ("ses", "weights_", np.ones(5), "weights_"),
    ("fastfood", "perm_", np.zeros((4, 4), np.int64), "permutation"),
])
def test_data_driven_maps_whose_attributes_disagree_are_refused(tmp_path, name, attribute, value, match):
    path = _saved(tmp_path, _data_driven(name).fit(X, Y3 % 2))
    _set_array(path, _top, attribute, value)
    _refused(path, match)


def test_feature_names_must_match_the_input_width(tmp_path):
    import pandas as pd

    from rfstream import Standardizer

    frame = pd.DataFrame(X, columns=list("abcd"))
    path = _saved(tmp_path, Standardizer().fit(frame))
    np.testing.assert_array_equal(load_model(path).transform(frame), Standardizer().fit(frame).transform(frame))
    _set_array(path, _top, "feature_names_in_", np.array(["a", "b", "c"]))
    _refused(path, "feature_names_in_")
