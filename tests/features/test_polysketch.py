"""PolynomialCountSketch (Pham & Pagh 2013; rfstream.features.polysketch): the kernel it
estimates, against scikit-learn's sketch of the same width, and the block function on every
kind of input (dense, CSR, dask, the fused ridge pass).

The contract of every registered map (chunkings, processes, save/load, check_estimator) is
tested in test_contract.py.
"""
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import PolynomialCountSketch as SklearnSketch
from sklearn.metrics.pairwise import polynomial_kernel as sklearn_polynomial_kernel

from rfstream import PolynomialCountSketch, StreamingRidge
from rfstream.features import feature_source
from rfstream.features.polysketch import count_sketch, polynomial_kernel

SEEDS = range(8)


@pytest.fixture(scope="module")
def X():
    X = np.random.default_rng(0).normal(size=(30, 5))
    return X / np.linalg.norm(X, axis=1, keepdims=True)  # unit rows: <x, y> in [-1, 1]


def test_oracle_is_sklearns_polynomial_kernel(X):
    np.testing.assert_allclose(polynomial_kernel(X, gamma=0.7, degree=3, coef0=0.5),
                               sklearn_polynomial_kernel(X, gamma=0.7, degree=3, coef0=0.5), rtol=1e-12)


def test_count_sketch_is_the_hashed_sum(X):
    rng = np.random.default_rng(1)
    index, sign = rng.integers(0, 4, size=5), rng.choice([-1.0, 1.0], size=5)
    naive = np.zeros((X.shape[0], 4))
    for j in range(5):
        naive[:, index[j]] += sign[j] * X[:, j]
    np.testing.assert_allclose(count_sketch(X, index, sign, 4), naive, atol=1e-15)
    np.testing.assert_allclose(count_sketch(sp.csr_matrix(X), index, sign, 4), naive, atol=1e-15)


@pytest.mark.parametrize("degree, coef0", [(2, 0.0), (3, 1.0)])
def test_unbiased(X, degree, coef0):
    K = polynomial_kernel(X, degree=degree, coef0=coef0)
    errs = [Z @ Z.T - K for Z in (
        PolynomialCountSketch(degree=degree, coef0=coef0, n_components=500, random_state=s,
                              dtype="float64").fit_transform(X) for s in SEEDS)]
    mean_err, scale = np.mean(errs, axis=0), np.abs(K).max()
    # measured over 5 x 8 draws (D = 500, 5 columns): |mean of mean error| <= 0.015 scale,
    # max |mean error| <= 0.11 scale, one draw's mean |error| <= 0.11 scale
    assert abs(mean_err.mean()) < 0.04 * scale  # no systematic offset
    assert np.abs(mean_err).max() < 0.25 * scale  # nothing far off after averaging 8 draws
    assert np.abs(errs[0]).mean() < 0.2 * scale


@pytest.mark.parametrize("degree, coef0, gamma", [(2, 0.0, 1.0), (3, 1.0, 0.5)])
def test_as_accurate_as_sklearn(X, degree, coef0, gamma):
    # Paired over seeds: the mean |Z Z' - K| of ours minus sklearn's at the same width.
    # The draws differ (equal in distribution), so the difference is seed noise: over
    # 200 seeds it was 0.0005 +- 0.002 (degree 2) and 0.008 +- 0.017 (degree 3, coef0 1).
    K = polynomial_kernel(X, gamma=gamma, degree=degree, coef0=coef0)
    params = dict(gamma=gamma, degree=degree, coef0=coef0, n_components=100)

    def error(est):
        Z = est.fit_transform(X)
        return np.abs(Z @ Z.T - K).mean()

    diff = np.array([error(PolynomialCountSketch(**params, random_state=s, dtype="float64"))
                     - error(SklearnSketch(**params, random_state=s)) for s in SEEDS])
    assert diff.mean() <= 2 * diff.std(ddof=1) / np.sqrt(len(diff)) + 1e-12


def test_dense_sparse_dask_agree(X):
    est = PolynomialCountSketch(degree=3, coef0=0.5, n_components=32, random_state=0).fit(X)
    Z = est.transform(X)
    assert Z.shape == (30, 32) and Z.dtype == np.float32
    Xs = X.copy()
    Xs[np.abs(Xs) < 0.4] = 0.0
    np.testing.assert_allclose(est.transform(sp.csr_matrix(Xs)), est.transform(Xs), atol=1e-6)
    for chunks in (30, 7):  # the block function is per row: chunk invariant
        Zd = est.transform(da.from_array(X, chunks=(chunks, 5)))
        assert isinstance(Zd, da.Array) and Zd.chunks[1] == (32,)
        np.testing.assert_array_equal(Zd.compute(), Z)
    sparse_dask = da.from_array(sp.csr_matrix(Xs), chunks=(8, 5), asarray=False)
    np.testing.assert_allclose(est.transform(sparse_dask).compute(), est.transform(Xs), atol=1e-6)


def test_seeded():
    X = np.random.default_rng(2).normal(size=(6, 3))
    a, b, c = (PolynomialCountSketch(n_components=16, random_state=s).fit_transform(X) for s in (0, 0, 1))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_ridge_on_the_fused_dask_features_equals_numpy():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] * X[:, 1] + 0.5 * X[:, 2] + 0.1 * rng.normal(size=300)
    est = PolynomialCountSketch(degree=2, coef0=1.0, n_components=32, random_state=0, dtype="float64").fit(X)
    Zd = est.transform(da.from_array(X, chunks=70))
    assert feature_source(Zd) is not None  # the ridge pass makes the features in its tasks
    lazy = StreamingRidge(alpha=0.1).fit(Zd, da.from_array(y, chunks=70))
    eager = StreamingRidge(alpha=0.1).fit(est.transform(X), y)
    np.testing.assert_allclose(lazy.coef_, eager.coef_, atol=1e-9)
    assert np.corrcoef(eager.predict(est.transform(X)), y)[0, 1] > 0.95  # a degree-2 target


def test_parameters():
    X = np.random.default_rng(4).normal(size=(4, 8))
    assert PolynomialCountSketch(gamma="auto").fit(X).gamma_ == 1 / 8  # sklearn's polynomial_kernel
    est = PolynomialCountSketch(degree=3, coef0=2.0, n_components=10, random_state=0).fit(X)
    assert est.index_hash_.shape == est.bit_hash_.shape == (3, 9)  # a sqrt(coef0) column
    assert est.index_hash_.min() >= 0 and est.index_hash_.max() < 10
    assert set(np.unique(est.bit_hash_)) <= {-1.0, 1.0}
    with pytest.raises(ValueError, match=r"'coef0' parameter .* range \[0.0, inf\)\. Got -1"):
        PolynomialCountSketch(coef0=-1).fit(X)
    with pytest.raises(ValueError, match=r"'degree' parameter .* range \[1, inf\)\. Got 0"):
        PolynomialCountSketch(degree=0).fit(X)
    with pytest.raises(ValueError, match=r"PolynomialCountSketch has none \(its count sketches do not nest"):
        PolynomialCountSketch(n_components=[8, 16]).fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but PolynomialCountSketch is expecting 8"):
        est.transform(X[:, :3])
