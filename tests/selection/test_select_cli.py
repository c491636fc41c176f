"""The evidence and the calibration at the command line: ``fit --select evidence --calibrate``,
``predict --std --interval``, ``evaluate``'s interval coverage, log-loss and reliability table,
the model files of a calibrated model, and the one-line refusals."""
import json

import numpy as np
import pytest
import zarr
from sklearn.metrics import log_loss

from rfstream import StreamingRidge, StreamingRidgeClassifier, cli, io, load_model, pipeline
from rfstream.cluster import set_progress
from rfstream.io.model_checks import ModelFileError
from rfstream.solvers.ridge.calibration import CONFORMAL_BINS
from rfstream.jobs import FitJob
from rfstream.metrics import classification_metrics, regression_metrics
from rfstream.selection import selection_summary
from rfstream.selection.heatmap import have_matplotlib, surface_title
from rfstream.solvers.ridge.calibration import SCORE_BINS

THREADS = ("--scheduler", "threads", "--progress", "never")


@pytest.fixture(autouse=True)
def _no_progress():
    yield
    set_progress(False)


def run(*argv):
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def one_line(capsys):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A regression and a classification dataset, and a model fitted by the evidence."""
    work = tmp_path_factory.mktemp("select")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    io.write_dataset(work / "reg.zarr", X, np.sin(X[:, 0]) + 0.2 * rng.normal(size=400),
                     attrs={"task": "regression"}, rows_per_chunk=128)
    Xc = rng.normal(size=(400, 3))
    io.write_dataset(work / "clf.zarr", Xc, (Xc[:, 0] ** 2 + Xc[:, 1] ** 2 > 1.4).astype(int),
                     attrs={"task": "classification", "classes": ["in", "out"]}, rows_per_chunk=128)
    assert run("fit", work / "reg.zarr", "--out", work / "ev", "--n-components", 40, "--alpha", "0.01,0.1,1",
               "--select", "evidence", "--quiet", *THREADS) == 0
    return work


def test_fit_by_the_evidence_keeps_the_table_and_the_noise(work):
    model, meta = pipeline.load_fitted(work / "ev")
    chosen, solver = meta["selection"], model.named_steps["solver"]
    assert solver.select == "evidence" and chosen["scoring"] == "log_evidence"
    table = solver.cv_results_
    np.testing.assert_allclose(chosen["cv"]["log_evidence"], table["log_evidence"])
    np.testing.assert_allclose(chosen["cv"]["noise_variance"], table["noise_variance"][:, 0])
    np.testing.assert_allclose(chosen["cv"]["effective_parameters"], table["effective_parameters"])
    assert "std_score" not in chosen["cv"]  # NaN for the evidence: not in the JSON
    assert chosen["best_score"] == pytest.approx(max(chosen["cv"]["log_evidence"]))
    # calibrate="auto" with a search: the posterior is kept, its noise variance in the metadata
    assert meta["calibration"]["noise_variance"] == pytest.approx(list(solver.noise_variance_))
    json.dumps(meta, allow_nan=False)  # strict JSON


def test_fit_summary_shows_the_noise_of_a_calibrated_model(work, capsys):
    assert run("fit", work / "reg.zarr", "--out", work / "one", "--n-components", 30, "--alpha", 1,
               "--calibrate", "true", *THREADS) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "cv" not in summary and summary["solver_passes"] == 2  # no search; the calibration pass
    solver = load_model(work / "one").named_steps["solver"]
    assert summary["calibration"]["noise_variance"] == pytest.approx(list(solver.noise_variance_))


def test_the_options_and_the_fingerprint(work, capsys):
    jobs = [FitJob(work / "reg.zarr", alpha=[0.1, 1], **kw) for kw in
            ({}, {"select": "evidence"}, {"calibrate": True}, {"calibrate": False})]
    assert len({job.fingerprint()[0] for job in jobs}) == 4
    assert jobs[1].model.named_steps["solver"].select == "evidence"
    assert run("fit", work / "reg.zarr", "--out", work / "x", "--calibrate", "maybe") == 2
    assert "--calibrate must be auto, true or false" in one_line(capsys)
    assert run("fit", work / "reg.zarr", "--out", work / "x", "--select", "bayes") == 2
    assert "invalid choice" in one_line(capsys)
    assert run("fit", work / "reg.zarr", "--out", work / "x", "--select", "evidence", "--alpha", "0,1") == 2
    assert "--select evidence needs every alpha > 0" in one_line(capsys)
    assert run("fit", work / "reg.zarr", "--out", work / "x", "--solver", "sgd", "--calibrate", "false") == 2
    assert "--calibrate does not apply" in one_line(capsys)


def test_predict_writes_the_library_std_and_interval(work):
    assert run("predict", work / "ev", work / "reg.zarr", "--out", work / "pred", "--std", "--interval", 0.8,
               "--quiet", *THREADS) == 0
    group = zarr.open_group(str(work / "pred"), mode="r")
    model = load_model(work / "ev")
    X, _ = io.open_dataset(work / "reg.zarr")
    X = X.compute()
    mean, std = model.predict(X, return_std=True)
    lower, upper = model[-1].predict_interval(model[:-1].transform(X), level=0.8)
    np.testing.assert_allclose(group["y_pred"][:], mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(group["std"][:], std, rtol=1e-6)
    np.testing.assert_allclose(group["lower"][:], lower, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(group["upper"][:], upper, rtol=1e-6, atol=1e-9)
    assert group.attrs["interval_level"] == 0.8


def test_evaluate_reports_interval_coverage_and_width(work, capsys):
    assert run("evaluate", work / "ev", work / "reg.zarr", "--format", "json", "--interval-level", 0.8,
               "--quiet", *THREADS) == 0
    result = json.loads(capsys.readouterr().out)
    model = load_model(work / "ev")
    X, y = (a.compute() for a in io.open_dataset(work / "reg.zarr"))
    lower, upper = model[-1].predict_interval(model[:-1].transform(X), level=0.8)
    assert result["interval_level"] == 0.8
    assert result["interval_coverage"] == pytest.approx(np.mean((y >= lower) & (y <= upper)))
    assert result["interval_width"] == pytest.approx(np.mean(upper - lower))
    assert 0.7 < result["interval_coverage"] < 0.95  # conformal: near the level on the training rows
    # the default level for a model with a posterior
    assert pipeline.evaluate_dataset(model, {}, work / "reg.zarr")["interval_level"] == 0.9


def test_a_model_without_a_posterior_is_one_line(work, capsys):
    assert run("fit", work / "reg.zarr", "--out", work / "plain", "--n-components", 20, "--alpha", "0.1,1",
               "--calibrate", "false", "--quiet", *THREADS) == 0
    for args in (("predict", work / "plain", work / "reg.zarr", "--out", work / "p2", "--std"),
                 ("predict", work / "plain", work / "reg.zarr", "--out", work / "p2", "--interval", 0.9),
                 ("evaluate", work / "plain", work / "reg.zarr", "--interval-level", 0.9)):
        assert run(*args, "--quiet", *THREADS) == 2
        assert "refit with --calibrate true for --std and --interval" in one_line(capsys)
    result = pipeline.evaluate_dataset(*pipeline.load_fitted(work / "plain"), work / "reg.zarr")
    assert "interval_coverage" not in result  # no posterior: no intervals, no error


def test_a_classifier_reports_log_loss_and_reliability(work, capsys):
    assert run("fit", work / "clf.zarr", "--out", work / "clf", "--n-components", 40, "--alpha", "0.1,1",
               "--quiet", *THREADS) == 0
    assert run("evaluate", work / "clf", work / "clf.zarr", "--format", "json", "--quiet", *THREADS) == 0
    result = json.loads(capsys.readouterr().out)
    model = load_model(work / "clf")
    X, y = (a.compute() for a in io.open_dataset(work / "clf.zarr"))
    proba = model.predict_proba(X)
    assert result["log_loss"] == pytest.approx(log_loss(y, proba), rel=1e-6)
    table = result["reliability"]
    pred = model.predict(X)
    confidence = proba[np.arange(len(y)), pred]
    bins = np.minimum((confidence * 10).astype(int), 9)
    assert table["count"] == np.bincount(bins, minlength=10).tolist()
    top = bins.max()
    assert table["mean_predicted"][top] == pytest.approx(confidence[bins == top].mean())
    assert table["accuracy"][top] == pytest.approx(np.mean((pred == y)[bins == top]))
    assert table["bins"][3] == [0.3, 0.4]
    assert run("predict", work / "clf", work / "clf.zarr", "--out", work / "cp", "--std", "--quiet") == 2
    assert "--std and --interval are a regressor's" in one_line(capsys)
    assert run("evaluate", work / "clf", work / "clf.zarr", "--interval-level", 0.8, "--quiet") == 2
    assert "--interval-level scores a regressor's" in one_line(capsys)


def test_reductions_match_numpy_on_a_multiclass_model():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    model = StreamingRidgeClassifier(alpha=[0.1, 1.0], select="evidence").fit(X, y)
    proba, pred = model.predict_proba(X), model.predict(X)
    result = classification_metrics(y, pred, model.classes_, proba=proba)
    right = (pred == y).astype(float)
    confidence = proba[np.arange(len(y)), pred]
    bins = np.minimum((confidence * 10).astype(int), 9)
    counts = np.bincount(bins, minlength=10)
    expected = np.sum(np.abs(np.bincount(bins, right, 10) - np.bincount(bins, confidence, 10))) / len(y)
    assert result["reliability"]["count"] == counts.tolist()
    assert result["reliability"]["calibration_error"] == pytest.approx(expected)
    metrics = regression_metrics(np.arange(4.0), np.zeros(4), lower=np.full(4, 0.5), upper=np.full(4, np.inf))
    assert metrics["interval_coverage"] == 0.75 and metrics["interval_width"] is None  # JSON: no infinity


def test_calibrated_models_round_trip_and_tampering_is_refused(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    Y = np.stack([np.sin(X[:, 0]), X[:, 1]], axis=1) + 0.1 * rng.normal(size=(200, 2))
    reg = StreamingRidge(alpha=[0.1, 1.0], select="evidence").fit(X, Y)
    clf = StreamingRidgeClassifier(alpha=[0.1, 1.0]).fit(X, (X[:, 0] > 0).astype(int))
    for name, est in (("reg", reg), ("clf", clf)):
        io.save_model(est, tmp_path / name)
        back = load_model(tmp_path / name)
        if name == "reg":
            for a, b in zip(est.predict(X, return_std=True) + est.predict_interval(X, 0.7),
                            back.predict(X, return_std=True) + back.predict_interval(X, 0.7)):
                np.testing.assert_array_equal(a, b)
            assert selection_summary(back)["noise_variance_of"] == "the mean over 2 target columns"
        else:
            np.testing.assert_array_equal(est.predict_proba(X), back.predict_proba(X))
    assert CONFORMAL_BINS == SCORE_BINS + 2
    counts = reg.conformal_counts_.copy()
    tampered = {"conformal_counts_": -counts, "noise_variance_": np.ones(3),
                "posterior_factor_": reg.posterior_factor_[:-1], "inverse_weight_": -1.0}
    for attr, value in tampered.items():
        setattr(reg, attr, value)
        io.save_model(reg, tmp_path / attr)
        with pytest.raises(ModelFileError, match=attr):
            load_model(tmp_path / attr)
        setattr(reg, attr, {"conformal_counts_": counts}.get(attr, getattr(load_model(tmp_path / "reg"), attr)))
    del reg.feature_mean_
    io.save_model(reg, tmp_path / "partial")
    with pytest.raises(ModelFileError, match="but not feature_mean_"):
        load_model(tmp_path / "partial")
    clf.platt_ = np.ones((2, 2))
    io.save_model(clf, tmp_path / "platt")
    with pytest.raises(ModelFileError, match="platt_ has shape"):
        load_model(tmp_path / "platt")


@pytest.mark.skipif(not have_matplotlib(), reason="matplotlib is not installed")
def test_the_heat_map_draws_the_evidence(work):
    meta = pipeline.load_fitted(work / "ev")[1]
    from rfstream.selection import cv_heatmap_png

    assert surface_title(meta["selection"]) == "log evidence, greater is better (1 x 3)"
    assert cv_heatmap_png(meta["selection"]).startswith(b"\x89PNG")


def test_a_list_of_sizes_at_the_command_line_with_its_report(work, capsys):
    assert run("fit", work / "reg.zarr", "--out", work / "sizes", "--n-components", "8,32", "--alpha", "0.1,1",
               "--gamma", "auto*0.5,auto", "--report", *THREADS) == 0
    summary = json.loads(capsys.readouterr().out)
    model, meta = pipeline.load_fitted(work / "sizes")
    chosen = meta["selection"]
    assert chosen["n_components"] == model.named_steps["features"].n_components in (8, 32)
    assert sorted(set(chosen["cv"]["n_components"])) == [8, 32] and len(chosen["cv"]["alpha"]) == 8
    assert 0 < chosen["smallest_n_components_within_1se"] <= chosen["n_components"]
    assert summary["n_components"] == chosen["n_components"] and summary["cv"]["n_components"][:2] == [8, 8]
    if have_matplotlib():
        for name in ("cv_heatmap.png", "n_components_curve.png", "interval_calibration.png"):
            assert (work / "sizes" / name).read_bytes()[:4] == b"\x89PNG"


def test_the_evidence_compares_gammas_of_a_map_fitted_once_per_gamma():
    from sklearn.pipeline import Pipeline

    from rfstream import TEFM
    from rfstream.selection import fit_model

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    fits = [Pipeline([("features", TEFM(12, gamma=g, random_state=0)),
                      ("solver", StreamingRidge(alpha=[0.1, 1.0], select="evidence", calibrate=False))]).fit(X, y)
            for g in (0.1, 1.0)]
    model = fit_model(Pipeline([("features", TEFM(12, gamma=[0.1, 1.0], random_state=0)),
                                ("solver", StreamingRidge(alpha=[0.1, 1.0], select="evidence", calibrate=False))]),
                      X, y)
    best = int(np.argmax([f[-1].best_score_ for f in fits]))  # greater evidence is better
    assert model[-1].gamma_ == (0.1, 1.0)[best] and model[-1].cv_results_["scoring"] == "log_evidence"
    np.testing.assert_allclose(model[-1].cv_results_["log_evidence"],
                               np.concatenate([f[-1].cv_results_["log_evidence"] for f in fits]))


@pytest.mark.parametrize("data", ["reg.zarr", "clf.zarr"])
def test_a_list_of_sizes_and_of_alphas_without_gammas_saves_its_report(work, data, capsys):
    """Three sizes, two alphas, one gamma: every column of the table has one entry per
    candidate, so the chosen size's surface and the curve are drawn (no IndexError at save,
    which the checkpoint would make every rerun meet again)."""
    out = work / f"sizes-{data}"
    assert run("fit", work / data, "--out", out, "--n-components", "8,16,32", "--alpha", "1,10",
               "--report", *THREADS) == 0
    chosen = pipeline.load_fitted(out)[1]["selection"]
    assert len(chosen["cv"]["alpha"]) == len(chosen["cv"]["mean_score"]) == 6
    assert chosen["cv"]["alpha"] == [1.0, 10.0] * 3
    if have_matplotlib():
        assert (out / "n_components_curve.png").read_bytes()[:4] == b"\x89PNG"
