"""select="evidence": the log marginal likelihood of every (gamma, alpha) against numpy."""
import warnings

import dask.array as da
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from rfstream import RandomFourierFeatures, StreamingRidge, StreamingRidgeClassifier


def direct_log_evidence(Z, Y, alpha, fit_intercept=True):
    """The restricted log evidence summed over target columns, sigma^2 at its closed-form
    maximum, from a dense n x n Gaussian log-density (no eigen-trick)."""
    n = Z.shape[0]
    Zw, Yw = Z, Y
    if fit_intercept:  # the flat-prior intercept: project onto the complement of the ones
        Q, _ = np.linalg.qr(np.column_stack([np.ones(n), np.eye(n)[:, : n - 1]]))
        P = Q[:, 1:].T
        Zw, Yw = P @ Zw, P @ Yw
    K = np.eye(Zw.shape[0]) + Zw @ Zw.T / alpha
    total = 0.0
    for t in range(Y.shape[1]):
        quad = Yw[:, t] @ np.linalg.solve(K, Yw[:, t])
        s2 = quad / Zw.shape[0]
        total += multivariate_normal(np.zeros(Zw.shape[0]), s2 * K).logpdf(Yw[:, t])
    return total


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 4))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=120)
    return X, y


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_log_evidence_matches_dense_numpy(data, fit_intercept):
    X, y = data
    Z = RandomFourierFeatures(30, gamma=0.5, random_state=0, dtype=np.float64).fit_transform(X)
    alphas = [0.01, 0.3, 10.0]
    m = StreamingRidge(alpha=alphas, select="evidence", fit_intercept=fit_intercept,
                       calibrate=False).fit(Z, y)
    expected = [direct_log_evidence(Z, y[:, None], a, fit_intercept) for a in alphas]
    np.testing.assert_allclose(m.cv_results_["log_evidence"], expected, rtol=1e-8)
    assert m.cv_results_["scoring"] == "log_evidence" and m.n_iter_ == 1
    assert m.alpha_ == alphas[int(np.argmax(expected))]


def test_weighted_multi_target_evidence(data):
    X, y = data
    Z = RandomFourierFeatures(20, gamma=1.0, random_state=1, dtype=np.float64).fit_transform(X)
    Y = np.column_stack([y, np.cos(X[:, 2])])
    w = np.random.default_rng(0).integers(1, 4, size=len(y)).astype(float)
    m = StreamingRidge(alpha=[0.1, 1.0], select="evidence", calibrate=False).fit(Z, Y, sample_weight=w)
    # an integer weight is that row repeated: the dense evidence of the repeated rows
    repeat = np.repeat(np.arange(len(y)), w.astype(int))
    expected = [direct_log_evidence(Z[repeat], Y[repeat], a) for a in (0.1, 1.0)]
    np.testing.assert_allclose(m.cv_results_["log_evidence"], expected, rtol=1e-8)
    # sigma^2 per target at its maximum: the weighted residual energy over sum c - 1
    a = m.alpha_
    R = Y - m.predict(Z)
    energy = (w @ R ** 2) + a * np.sum(m.coef_ ** 2, axis=1)
    row = int(np.flatnonzero(m.cv_results_["alpha"] == a)[0])
    np.testing.assert_allclose(m.cv_results_["noise_variance"][row], energy / (w.sum() - 1), rtol=1e-7)


def test_gamma_grid_choice_matches_an_explicit_loop(data):
    X, y = data
    gammas, alphas = [0.1, 0.5, 2.0], [0.01, 0.1, 1.0]
    rows = da.from_array(X, chunks=40)
    fmap = RandomFourierFeatures(40, gamma=gammas, random_state=0, dtype=np.float64).fit(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a choice on the grid's edge warns
        m = StreamingRidge(alpha=alphas, select="evidence", calibrate=False).fit(fmap.transform(rows), y)
    loop = []
    for g in gammas:
        Z = RandomFourierFeatures(40, gamma=g, random_state=0, dtype=np.float64).fit(X).transform(X)
        fit = StreamingRidge(alpha=alphas, select="evidence", calibrate=False).fit(Z, y)
        loop.extend(fit.cv_results_["log_evidence"])
    np.testing.assert_allclose(m.cv_results_["log_evidence"], loop, rtol=1e-6)
    best = int(np.argmax(loop))
    assert (m.gamma_, m.alpha_) == (gammas[best // 3], alphas[best % 3])
    assert fmap.gamma_ == m.gamma_


def test_classifier_evidence_of_coded_targets(data):
    X, y = data
    labels = np.digitize(y, [-0.5, 0.5])  # three classes: three +-1 columns
    Z = RandomFourierFeatures(25, gamma=0.5, random_state=2, dtype=np.float64).fit_transform(X)
    m = StreamingRidgeClassifier(alpha=[0.1, 3.0], select="evidence", calibrate=False).fit(Z, labels)
    coded = np.where(labels[:, None] == np.arange(3), 1.0, -1.0)
    expected = [direct_log_evidence(Z, coded, a) for a in (0.1, 3.0)]
    np.testing.assert_allclose(m.cv_results_["log_evidence"], expected, rtol=1e-8)


def test_evidence_refuses_alpha_zero_and_iterative_solvers(data):
    X, y = data
    with pytest.raises(ValueError, match="select='evidence' needs every alpha > 0"):
        StreamingRidge(alpha=[0.0, 1.0], select="evidence").fit(X, y)
    with pytest.raises(ValueError, match="select='evidence' needs the Gram solver"):
        StreamingRidge(alpha=1.0, select="evidence", solver="cg").fit(X, y)



def test_tridiagonal_and_cholesky_routes_agree(data):
    X, y = data
    Z = RandomFourierFeatures(30, gamma=0.5, random_state=0, dtype=np.float64).fit_transform(X)
    alphas = np.geomspace(1e-3, 1e2, 12)  # SHARED_MIN_ALPHAS or more: one reduction serves all
    many = StreamingRidge(alpha=alphas, select="evidence", calibrate=False).fit(Z, y).cv_results_
    few = [StreamingRidge(alpha=[a], select="evidence", calibrate=False).fit(Z, y).cv_results_ for a in alphas]
    for key in ("log_evidence", "effective_parameters", "noise_variance"):
        np.testing.assert_allclose(many[key], np.concatenate([f[key] for f in few]), rtol=1e-9)
    np.testing.assert_allclose(many["log_evidence"][[0, 4]],
                               [direct_log_evidence(Z, y[:, None], a) for a in alphas[[0, 4]]], rtol=1e-8)
