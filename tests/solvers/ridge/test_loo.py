"""Exact leave-one-out from one Gram (rfstream.solvers.ridge.loo, cv="loo").

The oracle is brute force: for every row, refit scikit-learn's Ridge (or
RidgeClassifier, the same +-1 least squares) on all other rows and predict the
row left out.  The one-Gram formula r_i = e_i / (1 - c_i h_ii) is exact, so
the scores agree to rounding (1e-8 asked).
"""
import json

import dask.array as da
import numpy as np
import pytest
from sklearn.linear_model import Ridge, RidgeClassifier
from sklearn.metrics import balanced_accuracy_score
from sklearn.pipeline import make_pipeline

import rfstream
from rfstream import (
    RandomFourierFeatures,
    StreamingRidge,
    StreamingRidgeClassifier,
    cli,
)

ALPHAS = [1e-3, 0.3, 30.0]


def _regression(n=90, d=5, targets=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=(d, targets)) + rng.normal(size=(n, targets))
    return X, y[:, 0] if targets == 1 else y


def _brute_regression(X, y, alphas, fit_intercept=True, w=None):
    n = len(X)
    w = np.ones(n) if w is None else w
    out = []
    for a in alphas:
        sq = np.zeros(n)
        for i in range(n):
            keep = np.arange(n) != i
            model = Ridge(alpha=a, fit_intercept=fit_intercept).fit(X[keep], y[keep], sample_weight=w[keep])
            sq[i] = np.sum((y[i] - model.predict(X[i:i + 1])[0]) ** 2)
        out.append(w @ sq / w.sum())
    return np.array(out)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("targets", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_loo_mse_equals_brute_force(fit_intercept, targets, weighted):
    X, y = _regression(targets=targets)
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=len(X)) if weighted else None
    est = StreamingRidge(alpha=ALPHAS, cv="loo", fit_intercept=fit_intercept).fit(X, y, sample_weight=w)
    expected = _brute_regression(X, y, ALPHAS, fit_intercept, w)
    np.testing.assert_allclose(est.cv_results_["mean_score"], expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(est.cv_mse_, expected, rtol=1e-8)
    assert est.alpha_ == ALPHAS[int(np.argmin(expected))] and est.cv_results_["cv"] == "loo"
    assert est.n_iter_ == 3  # the Gram pass, the leave-one-out pass, the calibration pass


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("scoring", ["error_rate", "balanced_error"])
def test_loo_classification_equals_brute_force(n_classes, scoring):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(120, 4))
    score = X[:, 0] - 0.5 * X[:, 1] + 0.7 * rng.normal(size=120)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    est = StreamingRidgeClassifier(alpha=ALPHAS, cv="loo", scoring=scoring).fit(X, y)
    expected = []
    for a in ALPHAS:
        pred = np.array([RidgeClassifier(alpha=a, solver="cholesky").fit(np.delete(X, i, 0), np.delete(y, i))
                         .predict(X[i:i + 1])[0] for i in range(len(X))])
        expected.append(np.mean(pred != y) if scoring == "error_rate" else 1 - balanced_accuracy_score(y, pred))
    np.testing.assert_allclose(est.cv_results_["mean_score"], expected, rtol=0, atol=1e-12)


def test_loo_with_fused_features_and_a_gamma_grid():
    # float64 features: the fused (dask) pass and the stored features give the same
    # scores; each gamma's scores equal the map fitted with that gamma alone
    X, y = _regression(n=400, d=4, seed=3)
    Xd, yd = da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)
    items = [0.05, 0.3, 2.0]
    grid = make_pipeline(RandomFourierFeatures(60, gamma=items, dtype="float64", random_state=0),
                         StreamingRidge(alpha=ALPHAS, cv="loo")).fit(Xd, yd)
    means = []
    for gamma in items:
        Z = RandomFourierFeatures(60, gamma=gamma, dtype="float64", random_state=0).fit(X).transform(X)
        means.append(StreamingRidge(alpha=ALPHAS, cv="loo").fit(Z, y).cv_results_["mean_score"])
    np.testing.assert_allclose(grid[-1].cv_results_["mean_score"], np.concatenate(means), rtol=1e-9)
    best = int(np.argmin(np.concatenate(means)))
    assert grid[-1].gamma_ == items[best // 3] and grid[-1].alpha_ == ALPHAS[best % 3]


def test_loo_when_the_folds_grams_do_not_fit(monkeypatch):
    from rfstream.solvers import memory

    D = 300
    one_gram = 8 * (D * D + 2 * D + 3)  # a partial of one fold, 1 target
    task = 4 * (memory.SUB_BLOCK + D + 2) * (D + 2)  # a running task's [Z, Y, 1] and its SYRK
    # 3 Grams (one per thread, plus two in the tree) and the task fit, 15 not
    monkeypatch.setattr(memory, "worker_memory", lambda: (4 * one_gram + task, 1))
    X, y = _regression(n=200, d=3)
    Z = RandomFourierFeatures(D, gamma=0.5, random_state=0).fit(X).transform(X)
    with pytest.warns(UserWarning, match="5-fold cross-validation needs 5 Grams of D=300.*cv='loo'"):
        est = StreamingRidge(alpha=ALPHAS).fit(Z, y)
    assert est.cv_results_["cv"] == "loo"
    ref = StreamingRidge(alpha=ALPHAS, cv="loo").fit(Z, y)
    np.testing.assert_allclose(est.cv_results_["mean_score"], ref.cv_results_["mean_score"], rtol=1e-12)
    monkeypatch.setattr(memory, "worker_memory", lambda: (2 * one_gram + task, 1))  # not even one Gram
    with pytest.raises(ValueError, match=r"5 fold\(s\) x D\^2 \(D=300\).*lower cv or n_components, or use solver='pcg'"):
        StreamingRidge(alpha=ALPHAS).fit(Z, y)


def test_cli_cv_loo(tmp_path, prepared, capsys):
    data = prepared("cpusmall", test=False)[0]
    code = cli.main(["fit", str(data), "--out", str(tmp_path / "m"), "--n-components", "100",
                     "--alpha", "0.1,1,10", "--cv", "loo", "--scheduler", "threads", "--progress", "never"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cv"]["scoring"] == "squared_error" and len(summary["cv"]["mean_score"]) == 3
    solver = rfstream.load_model(tmp_path / "m").named_steps["solver"]
    assert solver.cv == "loo" and solver.alpha_ == summary["alpha"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["fit", str(data), "--out", str(tmp_path / "m2"), "--cv", "1"])
    assert exit_info.value.code == 2 and "--cv must be an int >= 2 or 'loo'" in capsys.readouterr().err
