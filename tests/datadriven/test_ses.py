"""SESFeatures (Chang et al. 2017): shrinkage weights, BQ baseline, invariants, errors.

The contract of every map (numpy/dask, chunkings, processes, save/load, check_estimator,
bad input) is tested in test_contract.py."""
import dask
import dask.array as da
import numpy as np
import pytest
from helpers.sklearn_checks import FLOAT32_ROW_GROUPING
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import check_estimator

from rfstream import (
    RandomFourierFeatures,
    SESFeatures,
    Standardizer,
    StreamingRidge,
    load_model,
    save_model,
)
from rfstream.datadriven.ses import bq_system, bq_weights, nonnegative_quadratic
from rfstream.io import open_dataset
from rfstream.kernels import kernel_matrix
from rfstream.metrics import kernel_approximation_error


@pytest.fixture(scope="module")
def X():
    # correlated columns, as real data
    rng = np.random.default_rng(0)
    return rng.standard_normal((3000, 6)) @ rng.standard_normal((6, 6)) * 0.5


@pytest.fixture(scope="module")
def cpusmall(prepared):
    """cpusmall (8192 x 12) standardized: 7192 rows to fit on, 1000 held-out rows."""
    dst, _ = prepared("cpusmall", rows_per_chunk=2000)
    Xd, y = open_dataset(dst)
    Xs = Standardizer().fit(Xd).transform(Xd)
    perm = np.random.default_rng(0).permutation(Xs.shape[0])
    Xn = Xs.compute().astype(np.float64)
    return Xs, Xn[perm[1000:]], Xn[perm[:1000]], y


def test_features_are_sqrt_weights_times_rff(X):
    ses = SESFeatures(16, gamma=0.2, random_state=0, dtype="float64").fit(X)
    beta = ses.weights_
    assert beta.shape == (16,) and np.all(beta >= 0) and np.all(np.isfinite(beta))
    Z = ses.transform(X[:50])
    assert Z.shape == (50, 32) and Z.dtype == np.float64
    # z'(x)' z'(y) = sum_m beta_m cos(w_m'(x - y))   (eqs. (3)-(4) with weights beta)
    W = ses.rff_.random_weights_
    diff = X[:50, None, :] - X[None, :50, :]
    expected = np.cos(diff @ W) @ beta
    np.testing.assert_allclose(Z @ Z.T, expected, atol=1e-12)


def test_pair_rows_are_hadamard_products_of_features(X):
    """Eq. (7): H[k] = z(x_i) o z(x_j) summed per frequency, t[k] = k(x_i, x_j)."""
    from rfstream.datadriven.ses import pair_terms

    ses = SESFeatures(10, gamma=0.3, random_state=1, dtype="float64").fit(X)
    i, j = np.arange(0, 40), np.arange(40, 80)
    H, t = pair_terms(ses.rff_, X, i, j, "gaussian", 0.3)
    z = ses.rff_.transform(X) * np.sqrt(10)  # unnormalized [cos, sin] per frequency
    zz = z[i] * z[j]
    np.testing.assert_allclose(H, zz[:, :10] + zz[:, 10:], atol=1e-12)
    np.testing.assert_allclose(t, np.diag(kernel_matrix(X[i], X[j], "gaussian", 0.3)), rtol=1e-12)
    for kernel in ("laplacian", "cauchy"):  # the target uses shift invariance: k(x_i - x_j, 0)
        _, t = pair_terms(ses.rff_, X, i, j, kernel, 0.3)
        np.testing.assert_allclose(t, np.diag(kernel_matrix(X[i], X[j], kernel, 0.3)), rtol=1e-12)


def test_uniform_weights_are_monte_carlo(X):
    uni = SESFeatures(20, gamma=0.3, weights="uniform", random_state=3).fit(X)
    np.testing.assert_array_equal(uni.weights_, np.full(20, 1 / 20))
    rff = uni.rff_  # the unweighted map: MC random Fourier features, a cos and a sin per frequency
    assert isinstance(rff, RandomFourierFeatures)
    assert (rff.n_components, rff.variant, rff.sampler) == (40, "cossin", "mc")
    np.testing.assert_allclose(uni.transform(X[:100]), rff.transform(X[:100]), rtol=1e-6)


def test_weights_shrink_toward_uniform_as_m_grows(X):
    """Theorem 2 / Figure 2(d): the optimal shrinkage alpha* ~ Var/(Var + E k^2) falls like
    1/M, so the sum of the weights (1 - alpha) rises toward 1 and the SES kernel estimate
    approaches the uniform-weight (MC) estimate with the same frequencies."""
    sums, gaps = [], []
    for m in (8, 32, 128):
        s, g = [], []
        for seed in range(2):
            ses = SESFeatures(m, gamma=0.2, random_state=seed).fit(X)
            mc = SESFeatures(m, gamma=0.2, weights="uniform", random_state=seed).fit(X)
            Zs, Zm = ses.transform(X[:300]), mc.transform(X[:300])
            Ks, Km = Zs @ Zs.T, Zm @ Zm.T
            s.append(ses.weights_.sum())
            g.append(np.linalg.norm(Ks - Km) / np.linalg.norm(Km))
        sums.append(np.mean(s))
        gaps.append(np.mean(g))
    assert sums[0] < sums[1] < sums[2] < 1.0
    assert 1.0 - sums[2] < 0.5 * (1.0 - sums[0])
    assert gaps[0] > gaps[1] > gaps[2]


def test_ses_and_bq_beat_mc_on_held_out_rows(cpusmall):
    """Kernel approximation on 1000 held-out rows of cpusmall, M = 32, 3 seeds.

    Measured (docs/ses.md): SES / MC ~ 0.85, BQ / MC ~ 0.95 at M = 32.  The floors
    leave room for seed noise while still failing for uniform weights (ratio 1)."""
    _, train, test, _ = cpusmall
    errs = {"mc": [], "ses": [], "bq": []}
    for seed in range(3):
        for name, kw in (("mc", {"weights": "uniform"}), ("ses", {}),
                         ("bq", {"weights": "bq", "sampler": "qmc"})):
            fm = SESFeatures(32, gamma=0.12, random_state=seed, **kw).fit(train)
            errs[name].append(kernel_approximation_error(test, fm, n_samples=1000))
    mean = {k: np.mean(v) for k, v in errs.items()}
    assert mean["ses"] < 0.92 * mean["mc"]
    assert mean["bq"] < mean["mc"]


def test_chunk_invariance_and_numpy_dask_equality(X):
    ref = SESFeatures(12, gamma=0.25, n_pairs=200, random_state=5).fit(X)
    for chunks in [(3000,), (1000, 2000), (1, 1500, 1499), 97]:
        Xd = da.from_array(X, chunks=(chunks, -1))
        ses = SESFeatures(12, gamma=0.25, n_pairs=200, random_state=5).fit(Xd)
        # the same rows are gathered whatever the chunking: identical weights
        np.testing.assert_array_equal(ses.weights_, ref.weights_)
        assert ses.reg_ == ref.reg_
        Zd = ses.transform(Xd)
        assert isinstance(Zd, da.Array) and Zd.chunks[0] == Xd.chunks[0]
        np.testing.assert_allclose(Zd.compute(), ref.transform(X), atol=1e-6)
    with dask.config.set(scheduler="synchronous"):
        sync = SESFeatures(12, gamma=0.25, n_pairs=200, random_state=5).fit(da.from_array(X, chunks=300))
    np.testing.assert_array_equal(sync.weights_, ref.weights_)
    auto = SESFeatures(12, gamma="auto", random_state=5)
    np.testing.assert_array_equal(auto.fit(X).weights_, auto.fit(da.from_array(X, chunks=700)).weights_)


def test_nonnegative_quadratic_kkt():
    rng = np.random.default_rng(1)
    B = rng.standard_normal((40, 10))
    A = B.T @ B / 40 + 0.01 * np.eye(10)
    b = rng.standard_normal(10)
    beta = nonnegative_quadratic(A, b)
    grad = 2 * (A @ beta - b)
    # KKT: beta >= 0, gradient >= 0, complementary slackness
    assert np.all(beta >= 0) and np.any(beta == 0)
    assert np.all(grad >= -1e-8)
    np.testing.assert_allclose(beta * grad, 0, atol=1e-8)
    # feasible unconstrained minimiser is returned as is
    b_pos = A @ np.abs(rng.standard_normal(10))
    np.testing.assert_allclose(nonnegative_quadratic(A, b_pos), np.linalg.solve(A, b_pos), rtol=1e-10)


def test_bq_gamma_closed_form_matches_monte_carlo():
    """gamma_m = int K_GP(w, w_m) dP(w), Section 3, checked by sampling w ~ N(0, 2 gamma I)."""
    rng = np.random.default_rng(2)
    d, gamma, sigma_gp = 3, 0.4, 0.9
    W = rng.normal(0, np.sqrt(2 * gamma), size=(d, 5))
    _, gam = bq_system(W, gamma, sigma_gp)
    w = rng.normal(0, np.sqrt(2 * gamma), size=(400_000, d))
    sq = ((w[:, :, None] - W[None, :, :]) ** 2).sum(axis=1)
    mc = np.exp(-sq / (2 * sigma_gp**2)).mean(axis=0)
    np.testing.assert_allclose(gam, mc, rtol=0.01)  # 4e5 samples: ~0.3% standard error
    beta = bq_weights(W, gamma, sigma_gp)
    assert np.all(beta >= 0) and beta.shape == (5,)


def test_negative_weights_handled_and_features_finite(X):
    # weak regularization: the unconstrained solution has negative weights
    ses = SESFeatures(64, gamma=0.2, reg=2.0**-12, random_state=0).fit(X)
    assert ses.n_negative_ > 0
    assert np.all(ses.weights_ >= 0) and np.any(ses.weights_ == 0)
    Z = ses.transform(X)
    assert np.all(np.isfinite(Z))
    zero = np.flatnonzero(ses.weights_ == 0)
    assert np.all(Z[:, zero] == 0) and np.all(Z[:, zero + 64] == 0)


def test_selection_and_attributes(X):
    ses = SESFeatures(16, gamma=0.2, random_state=0).fit(X)
    grid = 2.0 ** np.arange(-8, 9, 2)
    assert ses.reg_ in grid and ses.sigma_gp_ is None
    # validation_error_ is the held-out error of the chosen reg, the grid's lowest: a
    # fixed reg (same seed: same pairs, same weights) reports each grid point's error
    errors = {lam: SESFeatures(16, gamma=0.2, reg=lam, random_state=0).fit(X).validation_error_
              for lam in grid}
    assert ses.validation_error_ == errors[ses.reg_] == min(errors.values())
    assert len(set(errors.values())) > 1  # the grid points differ
    fixed = SESFeatures(16, gamma=0.2, reg=0.5, random_state=0).fit(X)
    assert fixed.reg_ == 0.5
    bq = SESFeatures(16, gamma=0.2, weights="bq", random_state=0).fit(X)
    assert bq.reg_ is None and bq.sigma_gp_ > 0
    # the validated choice is no worse on held-out pairs than a fixed reg
    assert ses.validation_error_ <= fixed.validation_error_ * 1.0000001


@pytest.mark.parametrize(
    "params, match",
    [
        ({"weights": "bq", "kernel": "laplacian"}, "weights='bq'.*kernel='gaussian'"),
        ({"n_components": 0}, "n_components"),
        ({"reg": -1.0}, "'reg' parameter"),
        ({"reg": "tuned"}, "'reg' parameter"),
        ({"weights": "nnls"}, "'weights' parameter"),
        ({"n_pairs": 0}, "'n_pairs' parameter"),
        ({"sampler": "orthogonal", "kernel": "cauchy"}, "sampler='orthogonal'"),
        ({"dtype": "float16"}, "dtype"),
    ],
)
def test_errors(X, params, match):
    with pytest.raises(ValueError, match=match):
        SESFeatures(**{"gamma": 0.2, **params}).fit(X)


def test_unknown_row_count_is_refused(X):
    Xd = da.from_array(X, chunks=1000)
    Xd = Xd[Xd[:, 0] > -100]  # boolean mask: nan chunk sizes
    with pytest.raises(ValueError, match="unknown row chunk sizes.*compute_chunk_sizes"):
        SESFeatures(8, gamma=0.2).fit(Xd)
    ses = SESFeatures(8, gamma=0.2, random_state=0).fit(Xd.compute_chunk_sizes())
    np.testing.assert_array_equal(ses.weights_, SESFeatures(8, gamma=0.2, random_state=0).fit(X).weights_)


def test_save_load_roundtrip(X, tmp_path):
    y = X[:, 0] ** 2
    for weights in ("ses", "bq"):
        pipe = Pipeline([("std", Standardizer()),
                         ("features", SESFeatures(16, weights=weights, random_state=0)),
                         ("solver", StreamingRidge())]).fit(X, y)
        save_model(pipe, tmp_path / weights)
        loaded = load_model(tmp_path / weights)
        np.testing.assert_array_equal(loaded.predict(X), pipe.predict(X))
        np.testing.assert_array_equal(loaded.named_steps["features"].weights_,
                                      pipe.named_steps["features"].weights_)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")  # as every check_estimator test
@pytest.mark.parametrize("weights", ["bq"])  # "ses": test_contract.py::test_map_check_estimator[ses]
def test_sklearn_check_estimator(weights):
    check_estimator(SESFeatures(n_components=8, weights=weights, random_state=0),
                    expected_failed_checks=FLOAT32_ROW_GROUPING)
