"""The client's solves of a search (rfstream.solvers.ridge.cv, evidence, loo): exact routes, none repeated.

The oracle of every route is a Cholesky solve per alpha (scipy), in float64: the tridiagonal
reduction ``G = Q T Q'`` is backward stable like it, so the weights agree to about the Gram's
condition number times the unit roundoff; the Grams here (RFF features, alpha >= 1e-3) keep that
below 1e-8 relative.  Counting LAPACK calls at rfstream's call sites checks that no factorization is
made twice, and the BLAS threads seen inside them that no thread limit of a pass leaks into them.
"""
import threading

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_info

from rfstream import (
    RandomFourierFeatures,
    StreamingRidge,
    StreamingRidgeClassifier,
    cluster,
    lapack,
)
from rfstream.solvers.ridge import cv


def _gram(D=40, T=3, n=300, seed=0):
    rng = np.random.default_rng(seed)
    Z = RandomFourierFeatures(D, gamma=0.5, random_state=seed, dtype=np.float64).fit_transform(
        rng.normal(size=(n, 4)))
    Z -= Z.mean(axis=0)
    return Z.T @ Z, Z.T @ rng.normal(size=(n, T))


@pytest.mark.parametrize("T", [1, 4])
def test_tridiagonal_path_equals_a_cholesky_per_alpha(T):
    G, C = _gram(T=T)
    path = cv.tridiagonal_path(G, C)
    for a in (1e-3, 0.1, 10.0, 1e4):
        W = path(a)
        expected = scipy.linalg.solve(G + a * np.eye(len(G)), C, assume_a="pos")
        np.testing.assert_allclose(W, expected, rtol=0, atol=1e-8 * np.abs(expected).max())


def test_tridiagonal_path_at_alpha_zero_is_the_per_alpha_route():
    Z = np.random.default_rng(1).normal(size=(5, 12))  # rank 5 of 12: singular at alpha = 0
    G, C = Z.T @ Z, Z.T @ np.ones((5, 1))
    path = cv.tridiagonal_path(G, C)
    np.testing.assert_array_equal(path(0.0), cv.solve(G, C, 0.0))
    np.testing.assert_allclose(path(1.0), cv.solve(G, C, 1.0), rtol=1e-10)


def _stats(K=4, D=30, T=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, 3))
    Z = RandomFourierFeatures(D, gamma=1.0, random_state=seed, dtype=np.float64).fit_transform(X)
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])[:, :T] + 0.1 * rng.normal(size=(400, T))
    folds = np.arange(400) % K
    parts = {k: [] for k in ("G", "C", "s", "t", "n", "m", "B")}
    for k in range(K):
        z, y = Z[folds == k], Y[folds == k]
        for key, v in (("G", z.T @ z), ("C", z.T @ y), ("s", z.sum(0)), ("t", y.sum(0)), ("n", float(len(z))),
                       ("m", len(z)), ("B", y.T @ y)):
            parts[key].append(v)
    stats = {k: np.array(v) for k, v in parts.items()}
    return stats, {k: v.sum(axis=0) for k, v in stats.items()}


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_shared_reduction_gives_the_cholesky_path(monkeypatch, fit_intercept):
    stats, total = _stats()
    alphas = np.geomspace(1e-3, 1e2, 5)
    monkeypatch.setattr(cv, "SHARED_MIN_ALPHAS", 100)  # a Cholesky solve per (fold, alpha)
    chol = cv.alpha_path(stats, total, alphas, 4, fit_intercept)
    monkeypatch.setattr(cv, "SHARED_MIN_ALPHAS", 2)  # one reduction per fold for every alpha
    shared = cv.alpha_path(stats, total, alphas, 4, fit_intercept)
    for got, want in zip(shared, chol):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8 * np.abs(want).max())


def _counting(monkeypatch, module, name, calls, record=None):
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        if record is not None:  # (thread, BLAS threads) of the call
            record.append((threading.get_ident(),
                           max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")))
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


def _grid_data(n=600, chunks=100):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(n, 4))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return da.from_array(X, chunks=chunks), da.from_array(y, chunks=chunks)


def test_cv_with_calibration_refits_from_the_calibrations_factor(monkeypatch):
    """5 folds x 3 alphas by Cholesky (fewer than SHARED_MIN_ALPHAS), then one Cholesky
    factorization of the full Gram for the calibration which also gives the refit: no
    eigendecomposition, no second factorization."""
    X, y = _grid_data()
    Z = RandomFourierFeatures(30, gamma=0.5, random_state=0).fit_transform(X)
    calls = []
    _counting(monkeypatch, lapack, "potrf", calls)  # every Cholesky factorization
    _counting(monkeypatch, lapack, "trtri", calls)  # the calibration's inverse of its factor
    _counting(monkeypatch, scipy.linalg, "eigh", calls)
    _counting(monkeypatch, lapack, "syevr", calls)
    m = StreamingRidge(alpha=[0.01, 1.0, 10.0], cv=5, calibrate=True).fit(Z, y)
    # the solves', then the calibration's one, which gives the refit too
    assert calls.count("potrf") == 5 * 3 + 1 and calls.count("trtri") == 1
    assert calls.count("eigh") == calls.count("syevr") == 0
    calls.clear()
    plain = StreamingRidge(alpha=[0.01, 1.0, 10.0], cv=5, calibrate=False).fit(Z, y)
    assert calls.count("potrf") == 5 * 3 + 1 and calls.count("eigh") == 0  # the refit: one Cholesky
    assert calls.count("trtri") == 0
    np.testing.assert_allclose(m.coef_, plain.coef_, rtol=0, atol=1e-8 * np.abs(plain.coef_).max())


def test_the_evidence_makes_one_reduction_per_gamma_and_solves_the_fit_from_it(monkeypatch):
    X, y = _grid_data()
    gammas = [0.1, 0.5, 2.0]
    fmap = RandomFourierFeatures(30, gamma=gammas, random_state=0, dtype="float64")
    Z = fmap.fit_transform(X)
    calls = []
    _counting(monkeypatch, lapack, "sytrd", calls)
    _counting(monkeypatch, scipy.linalg, "eigh", calls)
    _counting(monkeypatch, lapack, "potrf", calls)
    from rfstream.solvers.ridge.evidence import EVIDENCE_SHARED_MIN_ALPHAS

    few = np.geomspace(1e-2, 1e2, EVIDENCE_SHARED_MIN_ALPHAS - 1)  # below the rule: Cholesky per alpha
    fresh = RandomFourierFeatures(30, gamma=gammas, random_state=0, dtype="float64").fit_transform(X)
    StreamingRidge(alpha=few, select="evidence", calibrate=False).fit(fresh, y)  # (a fit sets its map's gamma)
    # a factorization per (gamma, alpha), then the chosen one's refit
    assert calls.count("sytrd") == 0 and calls.count("potrf") == len(gammas) * few.size + 1
    calls.clear()
    alphas = np.geomspace(1e-2, 1e2, EVIDENCE_SHARED_MIN_ALPHAS)
    m = StreamingRidge(alpha=alphas, select="evidence", calibrate=False).fit(Z, y)
    assert calls.count("sytrd") == len(gammas) and calls.count("eigh") == calls.count("potrf") == 0
    # the fit solved from the chosen gamma's reduction: the Cholesky solve of its Gram
    z = RandomFourierFeatures(30, gamma=m.gamma_, random_state=0, dtype="float64").fit(X).transform(X).compute()
    zc = z - z.mean(axis=0)
    yc = y.compute() - y.compute().mean()
    expected = scipy.linalg.solve(zc.T @ zc + m.alpha_ * np.eye(30), zc.T @ yc, assume_a="pos")
    np.testing.assert_allclose(m.coef_, expected, rtol=0, atol=1e-8 * np.abs(expected).max())


@pytest.mark.parametrize("n_alphas", [3, 12])
@pytest.mark.parametrize("narrow", [True, False])
def test_the_searchs_solves_use_every_core_of_the_client(monkeypatch, n_alphas, narrow):
    """Under dask's threads a pass runs with one BLAS thread per task
    (rfstream.cluster.one_blas_thread_per_task); the client's solves after it take every core: narrow
    Grams one solve per core, each on one BLAS thread, wide ones one at a time on every BLAS thread
    (rfstream.cluster.client_map), never the pass's limit."""
    if not narrow:
        monkeypatch.setattr(cluster, "CLIENT_MAP_MAX_WIDTH", 10)  # D = 30 counts as wide
    X, y = _grid_data()
    Z = RandomFourierFeatures(30, gamma=[0.2, 1.0], random_state=0).fit_transform(X)
    outside = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    calls, seen = [], []
    _counting(monkeypatch, lapack, "potrf", calls, seen)
    _counting(monkeypatch, lapack, "sytrd", calls, seen)
    with dask.config.set(scheduler="threads", num_workers=2):
        StreamingRidgeClassifier(alpha=np.geomspace(1e-2, 1e2, n_alphas).tolist(), cv=3).fit(Z, y > 0)
    search = seen[:2 * 3 * (n_alphas if n_alphas < cv.SHARED_MIN_ALPHAS else 1)]  # then the refit's
    assert len(search) == 2 * 3 * (n_alphas if n_alphas < cv.SHARED_MIN_ALPHAS else 1)
    threads = {ident for ident, _ in search}
    if narrow and cluster.client_cores() > 1:
        assert {blas for _, blas in search} == {1} and threading.get_ident() not in threads
        assert 1 <= len(threads) <= cluster.client_cores()
    else:
        assert {blas for _, blas in search} == {outside} and threads == {threading.get_ident()}
