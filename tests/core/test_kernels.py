"""Exact kernels, spectral densities and the bandwidth rule (rfstream.kernels); the
frequency samplers are tested in test_samplers.py."""
import time

import dask.array as da
import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from rfstream.kernels import (
    KERNELS,
    auto_gamma,
    check_kernel,
    frequency_distribution,
    frequency_ppf,
    kernel_matrix,
    sample_frequencies,
)

GAMMAS = [0.1, 1.0, 7.0]


def k1(kernel, gamma, t):
    """One-dimensional kernel profile k(t), written out from the definitions."""
    t = np.abs(t)
    return {
        "gaussian": np.exp(-gamma * t**2),
        "laplacian": np.exp(-gamma * t),
        "cauchy": 1.0 / (1.0 + gamma * t**2),
    }[kernel]


# ------------------------------------------------------------------ exact kernels
def test_kernel_matrix_matches_sklearn_and_formula():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 4)), rng.normal(size=(20, 4))
    for gamma in GAMMAS:
        np.testing.assert_allclose(kernel_matrix(X, Y, "gaussian", gamma), rbf_kernel(X, Y, gamma=gamma))
        np.testing.assert_allclose(
            kernel_matrix(X, Y, "laplacian", gamma), laplacian_kernel(X, Y, gamma=gamma)
        )
        diff = X[:, None, :] - Y[None, :, :]
        expected = np.prod(1.0 / (1.0 + gamma * diff**2), axis=2)
        np.testing.assert_allclose(kernel_matrix(X, Y, "cauchy", gamma), expected, rtol=1e-12)
    for kernel in KERNELS:
        K = kernel_matrix(X, kernel=kernel, gamma=0.5)  # Y=None -> X
        np.testing.assert_allclose(np.diag(K), 1.0)
        np.testing.assert_allclose(K, K.T)


def test_kernel_errors():
    with pytest.raises(ValueError, match=r"kernel must be one of 'gaussian', 'laplacian', 'cauchy'; got 'rbf'"):
        check_kernel("rbf")
    with pytest.raises(ValueError, match="kernel must be one of"):
        kernel_matrix(np.ones((2, 2)), kernel="poly")
    with pytest.raises(ValueError, match=r"gamma must be a finite float > 0; got -1"):
        kernel_matrix(np.ones((2, 2)), gamma=-1)
    with pytest.raises(ValueError, match="same number of columns"):
        kernel_matrix(np.ones((2, 2)), np.ones((2, 3)))


# ------------------------------------------------------------- spectral densities
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_density_characteristic_function_is_kernel(kernel, gamma):
    # Bochner: k(t) = integral p(w) cos(w t) dw = 2 int_0^inf p(w) cos(w t) dw for a
    # symmetric density.  Quadrature (QAWF) checks the density itself, with no
    # sampling noise, so a wrong scale (e.g. a missing factor 2) fails outright.
    dist = frequency_distribution(kernel, gamma)
    for t in (0.1, 0.7, 2.0):
        value, _ = integrate.quad(dist.pdf, 0, np.inf, weight="cos", wvar=t)
        assert abs(2 * value - k1(kernel, gamma, t)) < 1e-6


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_sampled_frequencies_reproduce_kernel(kernel, gamma):
    # E cos(w' delta) = k(delta) in d = 3; the Monte Carlo mean of N draws of a
    # bounded variable has std <= 1/sqrt(2N) ~ 0.0016: 0.01 is > 6 std.
    rng = np.random.default_rng(1)
    W = sample_frequencies(kernel, gamma, (3, 200_000), rng)
    assert W.dtype == np.float64
    for delta in ([0.1, -0.2, 0.3], [0.5, 0.0, -0.4], [1.0, 0.7, -1.2]):
        delta = np.asarray(delta) / np.sqrt(gamma)  # kernel values in a useful range
        exact = kernel_matrix(delta[None], np.zeros((1, 3)), kernel, gamma)[0, 0]
        assert abs(np.mean(np.cos(delta @ W)) - exact) < 0.01
    # and the draws follow the documented law
    assert stats.kstest(W.ravel()[:20_000], frequency_distribution(kernel, gamma).cdf).pvalue > 1e-3


@pytest.mark.parametrize("kernel", KERNELS)
def test_ppf_is_inverse_cdf(kernel):
    dist = frequency_distribution(kernel, 0.8)
    u = np.linspace(1e-6, 1 - 1e-6, 1001)
    np.testing.assert_allclose(frequency_ppf(kernel, 0.8, u), dist.ppf(u), rtol=1e-9, atol=1e-12)
    x = np.linspace(-5, 5, 101)
    np.testing.assert_allclose(frequency_ppf(kernel, 0.8, dist.cdf(x)), x, atol=1e-8)


# -------------------------------------------------------------------- auto_gamma
def test_auto_gamma_two_points_exact():
    # n = 2 rows: all rows used, k = min(50, n-1) = 1, so sigma is the distance
    # between the two points: L2 = h sqrt(d), L1 = h d.
    h, d = 0.5, 4
    X = np.vstack([np.zeros(d), h * np.ones(d)])
    s2, s1 = h * np.sqrt(d), h * d
    assert auto_gamma(X, "gaussian") == pytest.approx(1 / (2 * s2**2))
    assert auto_gamma(X, "laplacian") == pytest.approx(1 / s1)
    assert auto_gamma(X, "cauchy") == pytest.approx(1 / s2**2)


def test_auto_gamma_scale_and_order():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 10))
    g = {k: auto_gamma(X, k, random_state=0) for k in KERNELS}
    # Same rows sampled for any scale: gamma scales as 1/s^2 (L2^2), 1/s (L1).
    for s in (0.01, 30.0):
        assert auto_gamma(s * X, "gaussian", random_state=0) == pytest.approx(g["gaussian"] / s**2)
        assert auto_gamma(s * X, "laplacian", random_state=0) == pytest.approx(g["laplacian"] / s)
        assert auto_gamma(s * X, "cauchy", random_state=0) == pytest.approx(g["cauchy"] / s**2)
    # Standard normal data in d = 10: pairwise L2 distances ~ sqrt(2 d) = 4.5, the
    # 50th nearest of 1000 a bit closer, so sigma is in (2, 4.5) and gamma_gauss in
    # (1/40, 1/8); L1 distances ~ d * 2/sqrt(pi) = 11.3 -> sigma_L1 in (5, 11.3).
    assert 1 / 40 < g["gaussian"] < 1 / 8
    assert 1 / 11.3 < g["laplacian"] < 1 / 5
    assert g["cauchy"] == pytest.approx(2 * g["gaussian"])  # same sigma, 1/s^2 vs 1/(2 s^2)


def test_auto_gamma_small_n_uses_all_rows():
    X = np.random.default_rng(0).normal(size=(40, 3))
    # n < n_samples: every row, k = 39; the seed and the row order do not matter
    g = auto_gamma(X, "gaussian", random_state=1)
    assert g == auto_gamma(X[::-1], "gaussian", random_state=2)
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    assert g == pytest.approx(1 / (2 * np.mean(D.max(axis=1)) ** 2))


def test_auto_gamma_dask_equals_numpy_and_reads_only_needed_chunks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 5))
    Xd = da.from_array(X, chunks=(100, 5))  # 200 chunks
    for kernel in KERNELS:
        assert auto_gamma(Xd, kernel, random_state=7) == auto_gamma(X, kernel, random_state=7)

    touched = []

    def record(block, block_info=None):
        touched.append(block_info[0]["chunk-location"][0])
        return block

    Xw = Xd.map_blocks(record, dtype=X.dtype)
    g = auto_gamma(Xw, "gaussian", n_samples=20, k=5, random_state=3)
    assert g == auto_gamma(X, "gaussian", n_samples=20, k=5, random_state=3)
    idx = np.sort(np.random.default_rng(3).choice(len(X), size=20, replace=False))
    assert set(touched) == set(idx // 100)  # only the chunks holding sampled rows
    assert len(set(touched)) <= 20 < Xd.numblocks[0]

    # a dataset far bigger than memory: gathering 1000 rows stays fast
    huge = da.random.default_rng(0).normal(size=(10**8, 10), chunks=(10**4, 10))  # 8 GB
    t0 = time.perf_counter()
    assert 1 / 40 < auto_gamma(huge, "gaussian", random_state=0) < 1 / 8
    assert time.perf_counter() - t0 < 30  # ~2 s: at most 1000 of 10_000 chunks are read


def test_auto_gamma_errors():
    with pytest.raises(ValueError, match="at least 2 rows"):
        auto_gamma(np.ones((1, 3)))
    with pytest.raises(ValueError, match="duplicated rows"):
        auto_gamma(np.ones((10, 3)))
    with pytest.raises(ValueError, match="unknown number of rows"):
        x = da.ones((10, 2), chunks=5)
        auto_gamma(x[x[:, 0] > 0])
    with pytest.raises(ValueError, match="kernel must be one of"):
        auto_gamma(np.ones((10, 3)), "rbf")
    with pytest.raises(ValueError, match="k must be an int >= 1; got 0"):
        auto_gamma(np.eye(3), k=0)
