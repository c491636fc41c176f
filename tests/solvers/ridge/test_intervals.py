"""Posterior standard deviation, conformal intervals and Platt probabilities of ridge."""
import dask.array as da
import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import RidgeClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import KFold

from rfstream import RandomFourierFeatures, StreamingRidge, StreamingRidgeClassifier
from rfstream.solvers.ridge.calibration import (
    SCORE_BINS,
    SCORE_EDGES,
    cholesky_posterior,
    conformal_quantile,
    leverage_and_decisions,
    posterior_triangle,
    triangular_product,
)
from rfstream.solvers.ridge.platt import DECISION_BINS, DECISION_LIMIT, fit_platt


def make(n, seed, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    scale = noise * (1 + 0.5 * np.abs(X[:, 0]))  # heteroscedastic: the Gaussian model is wrong
    return X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 + scale * rng.standard_t(5, size=n)


@pytest.fixture(scope="module")
def fitted():
    X, y = make(3000, 0)
    fmap = RandomFourierFeatures(200, gamma=0.5, random_state=0).fit(X)
    model = StreamingRidge(alpha=[0.01, 0.1, 1, 10], select="evidence").fit(fmap.transform(X), y)
    return fmap, model, X, y


def test_std_is_the_posterior_predictive_formula(fitted):
    fmap, m, X, y = fitted
    Z = fmap.transform(X).astype(np.float64)
    mu = Z.mean(axis=0)
    G = (Z - mu).T @ (Z - mu)
    A = G + m.alpha_ * np.eye(G.shape[0])
    R = y - m.predict(Z)
    sigma2 = (R @ R + m.alpha_ * m.coef_ @ m.coef_) / (len(y) - 1)
    Zt = fmap.transform(X[:7]).astype(np.float64) - mu
    expected = np.sqrt(sigma2 * (1 + 1 / len(y) + np.einsum("ij,ij->i", Zt @ np.linalg.inv(A), Zt)))
    mean, std = m.predict(fmap.transform(X[:7]), return_std=True)
    np.testing.assert_allclose(std, expected, rtol=1e-6)
    np.testing.assert_allclose(mean, m.predict(fmap.transform(X[:7])), rtol=1e-12)


def test_dask_input_gives_the_same_std_and_intervals(fitted):
    fmap, m, X, _ = fitted
    rows = da.from_array(X[:500], chunks=128)
    mean, std = m.predict(fmap.transform(rows), return_std=True)
    assert isinstance(std, da.Array)
    ref_mean, ref_std = m.predict(fmap.transform(X[:500]), return_std=True)
    np.testing.assert_allclose(std.compute(), ref_std, rtol=1e-5)
    # a few rows take the factor itself, more than 2 D rows its triangle: the same std
    np.testing.assert_allclose(m.predict(fmap.transform(X[:7]), return_std=True)[1], ref_std[:7], rtol=1e-5)
    np.testing.assert_allclose(mean.compute(), ref_mean, rtol=1e-5, atol=1e-6)
    lo, hi = m.predict_interval(fmap.transform(rows), level=0.8)
    ref_lo, ref_hi = m.predict_interval(fmap.transform(X[:500]), level=0.8)
    np.testing.assert_allclose(lo.compute(), ref_lo, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hi.compute(), ref_hi, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("select", ["evidence", "cv"])
def test_intervals_cover_new_rows_at_their_level(fitted, select):
    fmap, m, X, y = fitted
    if select == "cv":
        m = StreamingRidge(alpha=[0.01, 0.1, 1, 10]).fit(fmap.transform(X), y)
    Xt, yt = make(6000, 1)
    for level in (0.8, 0.9):
        lo, hi = m.predict_interval(fmap.transform(Xt), level=level)
        coverage = np.mean((yt >= lo) & (yt <= hi))
        assert abs(coverage - level) < 0.025, (level, coverage)
    assert m.n_iter_ == (2 if select == "evidence" else 2)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_cholesky_posterior_is_the_eigendecomposition_s(fit_intercept):
    """One Cholesky factorization taken in reverse order gives a lower triangle with
    ``L L' = (G_c + alpha I)^-1``, the ridge solution and the explained energy: those of the
    eigendecomposition route, without modifying the partials; None where ``G_c`` is singular
    and alpha is 0."""
    from rfstream.solvers.ridge.calibration import posterior_basis
    from rfstream.solvers.ridge.loo import loo_basis, loo_solution

    rng = np.random.default_rng(5)
    Z, Y = rng.standard_normal((400, 30)) + 0.3, rng.standard_normal((400, 2))
    total = {"G": Z.T @ Z, "C": Z.T @ Y, "s": Z.sum(0), "t": Y.sum(0), "n": 400.0}
    kept = total["G"].copy()
    alpha = 0.7
    post = cholesky_posterior(total, alpha, fit_intercept)
    np.testing.assert_array_equal(total["G"], kept)
    L = post["L"]
    assert not np.any(np.triu(L, 1))
    basis = loo_basis(dict(total, G=kept.copy()), fit_intercept)
    F = posterior_basis(basis, alpha)
    np.testing.assert_allclose(L @ L.T, F @ F.T, rtol=1e-9, atol=1e-12)
    W, b = loo_solution(basis, alpha)
    np.testing.assert_allclose(post["W"], W, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(post["b"], b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(post["explained"], (1 / (basis["s"] + alpha)) @ basis["UC"] ** 2, rtol=1e-9)
    assert posterior_triangle(L, np.dtype(np.float32)).dtype == np.float32  # no QR of a triangle
    np.testing.assert_array_equal(posterior_triangle(L, np.dtype(np.float64)), L)
    singular = dict(total, G=np.outer(Z[0], Z[0]), n=1.0, s=Z[0], t=Y[0])
    assert cholesky_posterior(singular, 0.0, fit_intercept) is None


@pytest.mark.parametrize("D", [1, 7, 300])
def test_triangular_product_is_the_full_product(D):
    rng = np.random.default_rng(D)
    L = np.tril(rng.standard_normal((D, D)))
    c = rng.standard_normal((50, D))
    out = np.full_like(c, np.nan)
    np.testing.assert_allclose(triangular_product(c, L, out), c @ L, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_leverages_and_decisions_in_the_features_dtype(dtype, rtol):
    """``||(z - mu) L||^2`` with ``L L' = F F'`` against ``||(z - mu) F||^2``, and the
    decisions from the centred rows against ``z W + b``."""
    rng = np.random.default_rng(3)
    D, m = 120, 64
    A = rng.standard_normal((D, D))
    F = np.linalg.cholesky(np.linalg.inv(A @ A.T / D + 0.1 * np.eye(D)))
    mu, W, b = rng.uniform(0.5, 1, D), rng.standard_normal((D, 2)), rng.standard_normal(2)
    z = (mu + 0.1 * rng.standard_normal((m, D))).astype(dtype)
    spec = type("Spec", (), {"L": posterior_triangle(F, np.dtype(dtype)), "mu": mu.astype(dtype),
                             "W": W.astype(dtype), "intercept": b + mu @ W})
    buffers = [np.empty((m, D), dtype) for _ in range(2)]
    h, decisions = leverage_and_decisions(z, spec, buffers)
    a = (z.astype(np.float64) - mu) @ F
    np.testing.assert_allclose(h, np.einsum("ij,ij->i", a, a), rtol=rtol)
    np.testing.assert_allclose(decisions, z.astype(np.float64) @ W + b, rtol=rtol, atol=rtol)


def test_a_large_fit_calibrates_on_a_row_sample(monkeypatch, fitted):
    """Above CALIBRATION_ROWS rows the pass keeps a sample drawn from (seed, row): its
    histograms are those of the kept rows' exact LOO scores, whatever the chunking, and
    the intervals still cover new rows."""
    from rfstream.random import STREAM_CALIBRATION, row_uniform
    from rfstream.solvers.ridge import calibration

    fmap, _, X, y = fitted
    Z = fmap.transform(X)
    full = StreamingRidge(alpha=[0.01, 0.1, 1, 10], select="evidence").fit(Z, y)
    monkeypatch.setattr(calibration, "CALIBRATION_ROWS", 1000)
    sampled = [StreamingRidge(alpha=[0.01, 0.1, 1, 10], select="evidence").fit(
        da.from_array(Z, chunks=chunks), da.from_array(y, chunks=chunks)) for chunks in (3000, 700)]
    kept = row_uniform(0, STREAM_CALIBRATION, 0, len(y)) < 1000 / len(y)
    cdf = [np.cumsum(m.conformal_counts_[0]) for m in (*sampled, full)]
    assert cdf[0][-1] == cdf[1][-1] == kept.sum() and 900 < kept.sum() < 1100 and cdf[2][-1] == len(y)
    # the same rows whatever the chunking (a score may move a bin with the sums' order)
    assert np.abs(cdf[0] - cdf[1]).max() <= 2
    # a sample of the full pass's scores
    assert np.abs(cdf[0] / cdf[0][-1] - cdf[2] / cdf[2][-1]).max() < 0.05
    Xt, yt = make(6000, 1)
    lo, hi = sampled[0].predict_interval(fmap.transform(Xt), level=0.9)
    assert abs(np.mean((yt >= lo) & (yt <= hi)) - 0.9) < 0.03


def test_conformal_quantile_is_the_order_statistic_within_a_bin():
    rng = np.random.default_rng(0)
    scores = rng.lognormal(size=999)
    counts = np.bincount(np.searchsorted(SCORE_EDGES, scores, side="right"), minlength=SCORE_BINS + 2)
    exact = np.sort(scores)[int(np.ceil(1000 * 0.9)) - 1]
    q = conformal_quantile(counts.astype(float), 0.9)
    assert exact <= q <= exact * 10 ** (8 / SCORE_BINS) * (1 + 1e-12)
    assert conformal_quantile(counts[:1] * 0 + np.r_[3.0], 0.9) == np.inf  # 3 rows: too few for 0.9
    with pytest.raises(ValueError, match="level must be a number between 0 and 1"):
        conformal_quantile(counts, 90)


def test_uncalibrated_models_say_how_to_get_intervals():
    X, y = make(200, 2)
    m = StreamingRidge(alpha=1.0).fit(X, y)
    assert not hasattr(m, "posterior_factor_")
    with pytest.raises(ValueError, match="refit with calibrate=True"):
        m.predict(X, return_std=True)
    assert StreamingRidge(alpha=1.0, calibrate=True).fit(X, y).predict_interval(X)[0].shape == (200,)
    with pytest.raises(ValueError, match="calibrate=True needs the Gram solver"):
        StreamingRidge(alpha=1.0, calibrate=True, solver="cg").fit(X, y)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_platt_probabilities_against_calibrated_classifier_cv(n_classes):
    X, y = make(4000, 3)
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    fmap = RandomFourierFeatures(150, gamma=0.5, random_state=0).fit(X)
    Z = fmap.transform(X)
    m = StreamingRidgeClassifier(alpha=[0.1, 1.0]).fit(Z[:3000], labels[:3000])
    p = m.predict_proba(Z[3000:])
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    ours = log_loss(labels[3000:], p, labels=m.classes_)
    ref = CalibratedClassifierCV(RidgeClassifier(alpha=m.alpha_), cv=5).fit(Z[:3000], labels[:3000])
    theirs = log_loss(labels[3000:], ref.predict_proba(Z[3000:]))
    assert ours <= 1.05 * theirs, (ours, theirs)
    lazy = m.predict_proba(da.from_array(Z[3000:], chunks=400))
    np.testing.assert_allclose(lazy.compute(), p, rtol=1e-5)
    assert not hasattr(StreamingRidgeClassifier(alpha=1.0).fit(Z[:500], labels[:500]), "predict_proba")


@pytest.mark.parametrize("n_classes", [2, 3])
def test_platt_from_the_scoring_pass_is_fitted_on_the_out_of_fold_decisions(n_classes):
    X, y = make(2000, 4)
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    Z = RandomFourierFeatures(150, gamma=0.5, random_state=0).fit(X).transform(X).astype(np.float64)
    folds = KFold(5)
    m = StreamingRidgeClassifier(alpha=[0.1, 1.0, 10.0], cv=folds).fit(Z, labels)
    assert m.n_iter_ == 2  # the Gram pass and the scoring pass: no calibration pass
    # reference: each fold's held-out decisions by scikit-learn's ridge at the chosen alpha
    edges = np.linspace(-DECISION_LIMIT, DECISION_LIMIT, DECISION_BINS + 1)
    T = 1 if n_classes == 2 else n_classes
    counts = np.zeros((T, 2, DECISION_BINS))
    for train, test in folds.split(Z):
        d = RidgeClassifier(alpha=m.alpha_).fit(Z[train], labels[train]).decision_function(Z[test])
        d = np.clip(d.reshape(len(test), T), edges[0], np.nextafter(edges[-1], 0))
        positive = labels[test][:, None] == (np.arange(T) if T > 1 else np.array([1]))
        for t in range(T):
            for side in (0, 1):
                rows = positive[:, t] == bool(side)
                counts[t, side] += np.histogram(d[rows, t], bins=edges)[0]
    expected = np.array([fit_platt(column) for column in counts])
    np.testing.assert_allclose(m.platt_, expected, rtol=2e-3, atol=2e-3)
    # dask input, any chunking: the same fold models' decisions, the same sigmoid
    for chunks in (2000, 700):
        lazy = StreamingRidgeClassifier(alpha=[0.1, 1.0, 10.0], cv=folds).fit(
            da.from_array(Z, chunks=(chunks, -1)), da.from_array(labels, chunks=chunks))
        assert lazy.n_iter_ == 2 and lazy.alpha_ == m.alpha_
        np.testing.assert_allclose(lazy.platt_, m.platt_, rtol=1e-6, atol=1e-9)
    # where the histograms would outgrow the Gram's partials (D = 20), the calibration pass makes them
    narrow = StreamingRidgeClassifier(alpha=[0.1, 1.0], cv=folds).fit(Z[:, :20], labels)
    assert narrow.n_iter_ == 3 and narrow.platt_.shape == (T, 2)


def test_platt_under_leave_one_out_comes_from_its_pass_as_the_calibration_pass_makes_it(monkeypatch):
    """cv="loo": the leave-one-out pass's exact decisions (float64, every row) give Platt's
    histograms; the calibration pass makes the same leave-one-out decisions (float32 leverages)."""
    X, y = make(1500, 5)
    labels = (y > np.median(y)).astype(int)
    Z = RandomFourierFeatures(200, gamma=0.5, random_state=0).fit(X).transform(X)  # 3 x 8192 bins <= D^2
    m = StreamingRidgeClassifier(alpha=[0.1, 1.0, 10.0], cv="loo").fit(Z, labels)
    assert m.n_iter_ == 2  # the Gram pass and the leave-one-out pass
    monkeypatch.setattr(StreamingRidgeClassifier, "_platt_from_scoring", lambda *args: False)
    ref = StreamingRidgeClassifier(alpha=[0.1, 1.0, 10.0], cv="loo").fit(Z, labels)
    assert ref.n_iter_ == 3 and ref.alpha_ == m.alpha_
    np.testing.assert_allclose(m.platt_, ref.platt_, rtol=1e-4, atol=1e-4)
