"""CirculantFeatures (Yu et al. 2015, Section 8): FFT products, gradients, kernel, dask.

Save/load, check_estimator and the rest of the contract of every map: test_contract.py."""
import dask.array as da
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from sklearn.metrics.pairwise import rbf_kernel

from rfstream import CirculantFeatures
from rfstream.features.circulant import circulant_grad, circulant_project


def dense_circulant_project(xs, r, k):
    """Oracle: stacked dense circ(r_j) (scipy.linalg.circulant, eq. 12) times each row."""
    R = np.vstack([scipy.linalg.circulant(rj) for rj in r])  # (B d, d)
    return xs @ R[:k].T


@pytest.mark.parametrize("d, k", [(8, 3), (8, 8), (7, 17), (16, 48), (5, 1)])
def test_fft_product_equals_dense_circulant_product(d, k):
    rng = np.random.default_rng(d * 100 + k)
    xs = rng.normal(size=(9, d))
    r = rng.normal(size=(-(-k // d), d))
    np.testing.assert_allclose(circulant_project(xs, r, k), dense_circulant_project(xs, r, k),
                               atol=1e-12)
    # float32 in, float32 out (complex64 FFTs)
    u32 = circulant_project(xs.astype(np.float32), r.astype(np.float32), k)
    assert u32.dtype == np.float32
    np.testing.assert_allclose(u32, dense_circulant_project(xs, r, k), atol=1e-4)


@pytest.mark.parametrize("d, k", [(6, 4), (6, 6), (5, 13)])
def test_fft_gradient_matches_finite_differences(d, k):
    """Eqs. 16-17: d sum(G * u) / d r by FFT cross-correlation equals central differences."""
    rng = np.random.default_rng(k)
    xs, G = rng.normal(size=(7, d)), rng.normal(size=(7, k))
    r = rng.normal(size=(-(-k // d), d))
    grad = circulant_grad(xs, G, r.shape[0])
    eps = 1e-6
    num = np.zeros_like(r)
    for idx in np.ndindex(*r.shape):
        e = np.zeros_like(r)
        e[idx] = eps
        num[idx] = (np.sum(G * circulant_project(xs, r + e, k))
                    - np.sum(G * circulant_project(xs, r - e, k))) / (2 * eps)
    np.testing.assert_allclose(grad, num, atol=1e-7)
    # circ(r) = sum_l r_l circ(e_l): the exact gradient is sum(G_j * (xs circ(e_l)'))
    shifts = [xs @ scipy.linalg.circulant(np.eye(d)[l]).T for l in range(d)]
    Gpad = np.hstack([G, np.zeros((7, r.size - k))]).reshape(7, r.shape[0], d)
    exact = np.array([[np.sum(Gpad[:, j] * shifts[l]) for l in range(d)] for j in range(r.shape[0])])
    np.testing.assert_allclose(grad, exact, atol=1e-10)


def test_features_are_cos_of_the_dense_map():
    X = np.random.default_rng(0).normal(size=(20, 6))
    cf = CirculantFeatures(15, gamma=0.5, random_state=0, dtype="float64").fit(X)
    W = np.vstack([scipy.linalg.circulant(rj) for rj in cf.circulant_])[:15] * cf.signs_  # R D
    expected = np.sqrt(2 / 15) * np.cos(X @ W.T + cf.random_offset_)
    np.testing.assert_allclose(cf.transform(X), expected, atol=1e-12)
    # O(k) parameters: ceil(k/d) d + d + k numbers, never the k x d matrix
    assert cf.circulant_.shape == (3, 6) and cf.signs_.shape == (6,)
    assert set(np.unique(cf.signs_)) <= {-1.0, 1.0}


@pytest.mark.parametrize("gamma", [0.05, 0.3, 1.0])
def test_unbiased_gaussian_kernel_approximation(gamma):
    """Mean of Z Z' over 30 independent maps ~= exp(-gamma ||x-y||^2) (sklearn oracle)."""
    X = np.random.default_rng(1).normal(size=(40, 16)) * 0.5
    K = rbf_kernel(X, gamma=gamma)
    est = np.zeros_like(K)
    for seed in range(30):
        Z = CirculantFeatures(64, gamma=gamma, random_state=seed, dtype="float64").fit(X).transform(X)
        est += Z @ Z.T / 30
    err = est - K
    # each entry averages 30 x 64 cosines: sd ~ sqrt(0.5 / 1920) ~ 0.016
    assert abs(np.mean(err)) < 0.01
    assert np.max(np.abs(err)) < 0.1
    assert np.mean(np.abs(err)) < 0.03


def test_numpy_dask_chunks_sparse_and_determinism():
    X = np.random.default_rng(2).normal(size=(103, 12))
    cf = CirculantFeatures(30, gamma="auto", random_state=3).fit(X)
    Z = cf.transform(X)
    assert Z.dtype == np.float32 and Z.shape == (103, 30)
    for chunks in (10, 37, 103):
        Zd = cf.transform(da.from_array(X, chunks=(chunks, 12)))
        assert isinstance(Zd, da.Array) and Zd.chunks[0] == da.from_array(X, chunks=(chunks, 12)).chunks[0]
        np.testing.assert_allclose(Zd.compute(), Z, atol=1e-6)
    np.testing.assert_allclose(cf.transform(sp.csr_matrix(X)), Z, atol=1e-6)
    again = CirculantFeatures(30, gamma="auto", random_state=3).fit(da.from_array(X, chunks=20))
    np.testing.assert_array_equal(again.circulant_, cf.circulant_)
    assert again.gamma_ == cf.gamma_


def test_errors():
    X = np.zeros((5, 3))
    with pytest.raises(ValueError, match="n_components"):
        CirculantFeatures(0).fit(X)
    with pytest.raises(ValueError, match="kernel"):
        CirculantFeatures(4, kernel="poly").fit(X)
    with pytest.raises(ValueError, match="gamma"):
        CirculantFeatures(4, gamma=-1.0).fit(X)
    cf = CirculantFeatures(4, random_state=0).fit(X)
    with pytest.raises(ValueError, match="3 features"):
        cf.transform(np.zeros((2, 4)))
