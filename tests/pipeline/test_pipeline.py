"""rfstream.pipeline: the registries, make_model, route, and fit / evaluate /
predict on a dataset, on threads and on a real distributed cluster (2 worker processes).

Every pass is a reduction with a fixed tree and per-row randomness from
(seed, row), so the cluster must reproduce the threads result: the partials
are the same float64 numbers summed in the same tree.
"""
from functools import partial

import distributed
import numpy as np
import pytest
import zarr
from sklearn.pipeline import Pipeline

from rfstream import (
    TEFM,
    CompactNonlinearMap,
    Standardizer,
    StreamingRidgeClassifier,
    pipeline,
)
from rfstream.catalog import (
    FEATURES,
    FIT_DEFAULTS,
    SOLVERS,
    check_model,
    feature_map_class,
    make_model,
    route,
    solver_class,
)
from rfstream.cluster import compute, connect
from rfstream.io import dataset_info, open_dataset, write_dataset


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    rng = np.random.default_rng(0)
    n = 6000
    X = rng.normal(size=(n, 6)) * [1.0, 2.0, 0.5, 1.0, 3.0, 1.0] + 10.0
    r2 = ((X[:, :2] - 10.0) ** 2 / [1.0, 4.0]).sum(axis=1)
    y = (r2 + 0.3 * rng.normal(size=n) > 1.4).astype(np.int64)
    path = tmp_path_factory.mktemp("dist") / "data.zarr"
    write_dataset(path, X, y, attrs={"classes": ["in", "out"]}, rows_per_chunk=1000)
    return path


# Rows whose label the noise flipped across the ellipse r2 = 1.4 (6.65% of
# them): no classifier of X beats that by much; RFF + ridge lands ~4 points
# above it (10.5%), chance is 50%.
BAYES = 0.0665


def _fit(path):
    X, y = open_dataset(path)
    assert X.numblocks[0] == 6
    model = make_model(
        "classification",
        feature_params={"n_components": 128, "gamma": "auto", "random_state": 1},
        solver_params={"alpha": [0.1, 1.0, 10.0], "random_state": 1},
    )
    return model.fit(X, y), X


def test_cluster_equals_threads(client, dataset):
    with connect("threads") as none:
        assert none is None  # local schedulers: no distributed client
        ref, X = _fit(dataset)
        ref_pred = compute(ref.predict(X))
    assert distributed.get_client() is client
    model, _ = _fit(dataset)  # runs on the two worker processes
    assert len(client.scheduler_info()["workers"]) == 2
    for step in ("standardize", "features"):
        for attr in ("mean_", "scale_", "gamma_", "random_weights_", "random_offset_"):
            if hasattr(ref.named_steps[step], attr):
                np.testing.assert_array_equal(getattr(model.named_steps[step], attr),
                                              getattr(ref.named_steps[step], attr))
    a, b = model.named_steps["solver"], ref.named_steps["solver"]
    assert a.alpha_ == b.alpha_
    # same partials, same reduction tree: equal up to float64 rounding (the
    # partials are float64 sums; 1e-10 allows for BLAS threading differences)
    np.testing.assert_allclose(a.cv_mse_, b.cv_mse_, rtol=1e-10)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10 * np.abs(b.coef_).max())
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-8, atol=1e-10)
    pred = model.predict(X)
    np.testing.assert_array_equal(compute(pred), ref_pred)
    # an ellipse in 2 of 6 dimensions with label noise: well learned
    y = compute(open_dataset(dataset)[1])
    assert np.mean(ref_pred != y) < BAYES + 0.06


def test_fit_and_evaluate_dataset_under_client(client, dataset, tmp_path):
    model, meta = pipeline.fit_dataset(dataset, n_components=128, alpha=1.0, out=tmp_path / "model")
    assert meta["dataset"]["n_rows"] == 6000
    result = pipeline.evaluate_dataset(model, meta, dataset)
    with connect("threads"):
        loaded, loaded_meta = pipeline.load_fitted(tmp_path / "model")
        ref = pipeline.evaluate_dataset(loaded, loaded_meta, dataset)
    assert result["metric"] == "error_rate" and result["rows"] == 6000
    assert result["value"] == ref["value"]  # the same predictions, counted the same
    assert result["value"] < BAYES + 0.06
    # every metric of the pass: the same counts and histograms on the workers as on threads
    for key in ("error_rate", "balanced_error", "confusion_matrix", "auc", "auc_error_bound"):
        assert result[key] == ref[key], key
    assert 0.5 < result["auc"] <= 1 and result["classes"] == ["in", "out"]


# ------------------------------------------------------------------ registries
def test_registries_name_classes():
    assert feature_map_class("tefm-s") is TEFM and FEATURES["tefm-s"]().method == "srht"
    assert FEATURES["tefm-g"]().method == "gaussian" and isinstance(FEATURES["tefm-g"], partial)
    assert feature_map_class("cnm") is CompactNonlinearMap
    assert solver_class("ridge", "classification") is StreamingRidgeClassifier
    for name in FEATURES:  # every entry makes a feature map with the common parameters
        params = FEATURES[name]().get_params()  # (the additive chi2 map draws nothing: no seed)
        assert {"dtype"} <= set(params) and ("random_state" in params or name == "chi2"), name
    assert {t for s in SOLVERS.values() if isinstance(s, dict) for t in s} == {"classification", "regression"}
    with pytest.raises(ValueError, match=r"features must be one of \[.*'rff'.*\]; got 'rbf'"):
        feature_map_class("rbf")
    with pytest.raises(ValueError, match=r"solver must be one of \['kpca', 'ridge', 'sgd'\]; got 'svm'"):
        solver_class("svm", "classification")
    with pytest.raises(ValueError, match=r"task must be 'classification' or 'regression'; got None"):
        solver_class("ridge", None)


def test_make_model_steps_and_parameters():
    model = make_model("regression", features="tefm-g", solver="sgd", passthrough=[2],
                       feature_params={"n_components": 7}, solver_params={"alpha": 0.5})
    assert isinstance(model, Pipeline) and [n for n, _ in model.steps] == ["standardize", "features", "solver"]
    assert model.named_steps["standardize"].passthrough == [2]
    f, s = model.named_steps["features"], model.named_steps["solver"]
    assert (type(f).__name__, f.method, f.n_components) == ("TEFM", "gaussian", 7)
    assert (type(s).__name__, s.alpha) == ("StreamingSGDRegressor", 0.5)
    bare = make_model("classification", standardize=False)
    assert [n for n, _ in bare.steps] == ["features", "solver"]
    assert isinstance(make_model("classification").named_steps["standardize"], Standardizer)
    with pytest.raises(ValueError, match="features must be one of"):
        make_model("classification", features="rbf")
    with pytest.raises(ValueError, match="task must be 'classification' or 'regression'"):
        make_model("clustering")


@pytest.mark.parametrize("features", sorted(FEATURES))
def test_check_model_accepts_every_default_and_refuses_bad_values(features):
    # the checks fit makes, made without data: every registered map and solver at its
    # defaults passes, a bad value of either is refused before any pass
    histogram = features == "chi2"  # refused after the standardizer (its own test)
    for solver in SOLVERS:
        for task in ("classification", "regression"):
            check_model(make_model(task, features=features, solver=solver, standardize=not histogram), 5)
    bad = ("dtype", "float16") if histogram else ("random_state", "seed")
    bad_map = make_model("classification", features=features, feature_params=dict([bad]),
                         standardize=not histogram)
    with pytest.raises(ValueError, match=f"'{bad[0]}' parameter"):
        check_model(bad_map, 5)
    bad_solver = make_model("regression", features=features, solver_params={"alpha": -1.0},
                            standardize=not histogram)
    with pytest.raises(ValueError, match="'alpha' parameter"):
        check_model(bad_solver, 5)


def test_route_params_sends_each_name_to_who_takes_it():
    to_map, to_solver = route("rff", "ridge", "classification",
                              {"n_components": 50, "alpha": [1.0, 2.0], "kernel": "laplacian", "cv": None})
    # FIT_DEFAULTS fill what is not given; random_state goes to both; None is dropped
    assert to_map == {"n_components": 50, "gamma": "auto", "random_state": 0, "kernel": "laplacian"}
    assert to_solver == {"alpha": [1.0, 2.0], "random_state": 0}
    assert "gamma" not in route("rff", "ridge", "regression", {"gamma": None})[0]
    assert FIT_DEFAULTS == {"n_components": 1000, "gamma": "auto", "random_state": 0}
    # a name both take goes to the solver (CNM's own alpha is set through feature_params)
    to_map, to_solver = route("cnm", "sgd", "classification", {"alpha": 1e-3, "max_iter": 4})
    assert "alpha" not in to_map and to_solver["alpha"] == 1e-3 and to_solver["max_iter"] == 4
    # binning has no n_components: the default is not forced on it
    to_map, _ = route("binning", "ridge", "regression", {"n_grids": 8})
    assert to_map == {"n_grids": 8, "gamma": "auto", "random_state": 0}
    with pytest.raises(ValueError, match=r"'rho' is a parameter of neither features='rff' nor "
                                         r"solver='ridge' \(classification\)"):
        route("rff", "ridge", "classification", {"rho": 1.0})


# ------------------------------------------------------------------ on a dataset
def test_fit_predict_evaluate_dataset_on_threads(dataset, tmp_path):
    with connect("threads"):
        model, meta = pipeline.fit_dataset(dataset, n_components=64, alpha=1.0, out=tmp_path / "m")
        assert meta["dataset"] == {"path": str(dataset), "n_rows": 6000, "n_features": 6,
                                   "task": "classification", "classes": ["in", "out"],
                                   "feature_names": dataset_info(dataset)["attrs"].get("feature_names"),
                                   "categorical": None}
        loaded, loaded_meta = pipeline.load_fitted(tmp_path / "m")
        assert loaded_meta["dataset"] == meta["dataset"]
        assert pipeline.predict_dataset(tmp_path / "m", dataset, tmp_path / "p.zarr") == 6000
        X, y = open_dataset(dataset)
        expected = compute(model.predict(X))
        stored = zarr.open_group(str(tmp_path / "p.zarr"), mode="r")
        np.testing.assert_array_equal(stored["y_pred"][:], expected)
        assert stored.attrs["task"] == "classification" and stored.attrs["classes"] == ["in", "out"]
        result = pipeline.evaluate_dataset(loaded, loaded_meta, dataset)
        assert result["value"] == pytest.approx(np.mean(expected != compute(y)))
        with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
            pipeline.fit_dataset(dataset, n_components=8, out=tmp_path / "m")


@pytest.mark.parametrize("solver_params", [{}, {"loss": "log_loss", "max_iter": 3}])
def test_evaluate_reads_and_features_each_block_once(dataset, monkeypatch, solver_params):
    # labels, decision values (AUC) and probabilities (log-loss) of the same rows: one read of
    # each Zarr chunk and one computation of its features, whatever is derived from them
    from rfstream.io.zarr_source import CheckedReader
    from rfstream.solvers import linear

    solver = "sgd" if solver_params else "ridge"
    with connect("threads"):
        model, meta = pipeline.fit_dataset(dataset, solver=solver, solver_params=solver_params,
                                           n_components=32, alpha=1e-3 if solver_params else 1.0)
        reads, features = [], []
        read, make = CheckedReader.__getitem__, linear.feature_sub_blocks
        monkeypatch.setattr(CheckedReader, "__getitem__",
                            lambda self, key: reads.append((self.array.basename, key[0].start)) or read(self, key))
        monkeypatch.setattr(linear, "feature_sub_blocks", lambda x, *a: features.append(len(x)) or make(x, *a))
        result = pipeline.evaluate_dataset(model, meta, dataset)
    assert sorted(reads) == [(name, start) for name in ("X", "y") for start in range(0, 6000, 1000)]
    assert features == [1000] * 6
    assert result["auc"] > 0.5 and (result["log_loss"] is not None) == hasattr(model, "predict_proba")


def test_dataset_errors(dataset, tmp_path):
    X = np.random.default_rng(0).normal(size=(50, 6))
    write_dataset(tmp_path / "nolabels.zarr", X)
    write_dataset(tmp_path / "narrow.zarr", X[:, :4], np.zeros(50, np.int64))
    model, meta = pipeline.fit_dataset(dataset, n_components=16, alpha=1.0)
    with connect("threads"):
        with pytest.raises(ValueError, match="has no labels .*fit needs a labelled dataset"):
            pipeline.fit_dataset(tmp_path / "nolabels.zarr")
        with pytest.raises(ValueError, match="has no labels; use `rfstream predict` instead"):
            pipeline.evaluate_dataset(model, meta, tmp_path / "nolabels.zarr")
        with pytest.raises(ValueError, match=r"has 4 features but the model was trained on 6; convert it "
                                             r"with `rfstream convert SRC DST --like TRAIN.zarr`"):
            pipeline.evaluate_dataset(model, meta, tmp_path / "narrow.zarr")
