"""Frequency samplers (rfstream.samplers): the law of the frequencies each one draws.

A sampler returns ``W`` (d x m) whose columns satisfy ``E[cos(w' (x - y))] = k(x, y)``
(Bochner).  Checked per sampler and kernel: the marginal law (KS test and quantiles),
the moments the spectral density fixes, the kernel reproduced by ``mean cos``,
determinism; orthogonality within the blocks of orthogonal random features and the
low discrepancy of the Sobol points.
"""
import warnings

import numpy as np
import pytest
from scipy import stats

from rfstream.kernels import frequency_distribution, kernel_matrix
from rfstream.samplers import SAMPLERS, check_sampler, sample_weights

SUPPORTED = [(s, k) for s, f in SAMPLERS.items() for k in f.kernels]


def test_registry():
    assert set(SAMPLERS) == {"mc", "qmc", "orthogonal"}
    assert SAMPLERS["orthogonal"].kernels == ("gaussian",)
    assert SAMPLERS["mc"].kernels == SAMPLERS["qmc"].kernels == ("gaussian", "laplacian", "cauchy")


@pytest.mark.parametrize("sampler,kernel", SUPPORTED)
def test_samplers_shape_law_and_determinism(sampler, kernel):
    d, m, gamma = 6, 1000, 0.7
    W = sample_weights(sampler, kernel, gamma, d, m, np.random.default_rng(3))
    assert W.shape == (d, m) and W.dtype == np.float64 and np.all(np.isfinite(W))
    np.testing.assert_array_equal(W, sample_weights(sampler, kernel, gamma, d, m, np.random.default_rng(3)))
    assert not np.array_equal(W, sample_weights(sampler, kernel, gamma, d, m, np.random.default_rng(4)))
    # every coordinate has the kernel's spectral law (pooled KS test, fixed seed)
    assert stats.kstest(W.ravel(), frequency_distribution(kernel, gamma).cdf).pvalue > 1e-3


@pytest.mark.parametrize("sampler,kernel", SUPPORTED)
def test_sample_quantiles_match_the_spectral_density(sampler, kernel):
    # The empirical p-quantile of n draws has standard error sqrt(p (1-p) / n) / f(q_p)
    # (asymptotic normality of sample quantiles); pooled over d * m = 40_000 draws,
    # 5 standard errors.  All three laws have heavy enough tails that the quartiles,
    # not the mean, are the stable summary (the Cauchy law has no mean).
    d, m, gamma = 4, 10_000, 0.4
    W = sample_weights(sampler, kernel, gamma, d, m, np.random.default_rng(0)).ravel()
    dist = frequency_distribution(kernel, gamma)
    for p in (0.1, 0.25, 0.5, 0.75, 0.9):
        q = dist.ppf(p)
        se = np.sqrt(p * (1 - p) / W.size) / dist.pdf(q)
        assert abs(np.quantile(W, p) - q) < 5 * se, (p, np.quantile(W, p), q)


@pytest.mark.parametrize("sampler", ["mc", "qmc", "orthogonal"])
def test_gaussian_frequencies_have_covariance_2_gamma_identity(sampler):
    # Gaussian kernel exp(-gamma ||x - y||^2): w ~ N(0, 2 gamma I).  The sample
    # covariance of m = 20_000 frequencies: entries of std <= 2 gamma sqrt(2 / m) =
    # 0.01 (2 gamma); 5 std.  A bandwidth off by 2 (gamma vs 2 gamma) is off by 100 std.
    d, m, gamma = 4, 20_000, 0.3
    W = sample_weights(sampler, "gaussian", gamma, d, m, np.random.default_rng(1))
    np.testing.assert_allclose(W.mean(axis=1), 0.0, atol=5 * np.sqrt(2 * gamma / m))
    np.testing.assert_allclose(np.cov(W), 2 * gamma * np.eye(d), atol=5 * 2 * gamma * np.sqrt(2 / m))


@pytest.mark.parametrize("sampler,kernel", SUPPORTED)
def test_mean_cosine_reproduces_the_kernel(sampler, kernel):
    # E cos(w' delta) = k(delta): the mean of m bounded terms has std <= 1/sqrt(2 m)
    # ~ 0.0035 for m = 40_000 i.i.d. draws (orthogonal blocks and Sobol points do no
    # worse); 0.02 is > 5 std.  Evaluated at deltas where k is in (0.1, 0.9).
    d, m, gamma = 3, 40_000, 0.5
    W = sample_weights(sampler, kernel, gamma, d, m, np.random.default_rng(2))
    for delta in ([0.1, -0.2, 0.3], [0.5, 0.0, -0.4], [1.0, 0.7, -1.2]):
        delta = np.asarray(delta) / np.sqrt(gamma)
        exact = kernel_matrix(delta[None], np.zeros((1, d)), kernel, gamma)[0, 0]
        assert abs(np.mean(np.cos(delta @ W)) - exact) < 0.02, (delta, exact)


def test_qmc_is_more_uniform_than_mc():
    # Sobol points: the empirical CDF of each coordinate is far closer to the
    # target than i.i.d. draws (KS statistic ~1/m vs ~1/sqrt(m)).
    dist = frequency_distribution("gaussian", 1.0)
    W = sample_weights("qmc", "gaussian", 1.0, 4, 1024, np.random.default_rng(0))
    ks = max(stats.kstest(row, dist.cdf).statistic for row in W)
    assert ks < 0.01  # i.i.d.: ~0.04 typical
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # m not a power of 2: no Sobol balance warning
        assert sample_weights("qmc", "laplacian", 1.0, 4, 1000, np.random.default_rng(0)).shape == (4, 1000)


def test_qmc_is_deterministic_and_a_prefix_of_the_balanced_sequence():
    # the first m of 2^ceil(log2 m) scrambled Sobol points: asking for fewer
    # frequencies with the same seed gives a prefix of the same frequencies
    a = sample_weights("qmc", "gaussian", 0.5, 5, 100, np.random.default_rng(7))
    b = sample_weights("qmc", "gaussian", 0.5, 5, 100, np.random.default_rng(7))
    c = sample_weights("qmc", "gaussian", 0.5, 5, 70, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, a[:, :70])


def test_orthogonal_blocks():
    d, gamma = 5, 1.5
    W = sample_weights("orthogonal", "gaussian", gamma, d, 12, np.random.default_rng(0))
    for start in (0, 5, 10):  # blocks of d columns; the last one truncated to 2
        block = W[:, start : start + d]
        G = block.T @ block
        np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-10)  # orthogonal
    # ...but not across blocks: independent Haar rotations
    assert abs(W[:, 0] @ W[:, 5]) > 1e-6
    # norms^2 / (2 gamma) ~ chi^2(d), as for i.i.d. N(0, 2 gamma I) frequencies
    big = sample_weights("orthogonal", "gaussian", gamma, d, 5000, np.random.default_rng(1))
    r2 = np.sum(big**2, axis=0) / (2 * gamma)
    assert stats.kstest(r2, stats.chi2(d).cdf).pvalue > 1e-3


def test_sampler_errors():
    with pytest.raises(ValueError, match=r"sampler must be one of 'mc', 'qmc', 'orthogonal'.*; got 'sobol'"):
        check_sampler("sobol", "gaussian")
    with pytest.raises(ValueError, match=r"sampler='orthogonal' supports only kernel in \('gaussian',\); got kernel='laplacian'"):
        check_sampler("orthogonal", "laplacian")
    with pytest.raises(ValueError, match="at most 21201 input features"):
        sample_weights("qmc", "gaussian", 1.0, 21202, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="kernel must be one of"):
        sample_weights("mc", "rbf", 1.0, 2, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="gamma must be a finite float > 0; got -1"):
        sample_weights("mc", "gaussian", -1, 2, 2, np.random.default_rng(0))
