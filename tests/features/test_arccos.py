"""Arc-cosine features (Cho & Saul 2009; rfstream.features.arccos), the EERF paper's other
base: the kernel they approximate, its known values, exact dask features.

The contract of every map (numpy/dask, chunkings, processes, save/load, check_estimator,
bad input) is tested in test_contract.py.
"""
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from rfstream import ArcCosineFeatures
from rfstream.features.arccos import arccos_kernel


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_arccos_features_approximate_the_kernel(degree):
    X = np.random.default_rng(0).normal(size=(60, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # unit rows: k in [0, 1] (degree 2: [0, 3])
    K = arccos_kernel(X, degree=degree)
    errs = []
    for seed in range(8):
        Z = ArcCosineFeatures(4000, degree=degree, random_state=seed, dtype="float64").fit_transform(X)
        errs.append(Z @ Z.T - K)
    mean_err = np.mean(errs, axis=0)
    scale = np.abs(K).max()
    # The features of degree n have 2n-th moments: the variance grows with n (measured
    # max |mean error| over 4 draws: 0.02, 0.04, 0.28 of scale 1, 1, 3).
    assert abs(mean_err.mean()) < 0.01 * scale  # unbiased: no systematic offset
    assert np.abs(mean_err).max() < 0.08 * scale  # nothing far off after averaging draws
    assert np.abs(errs[0]).mean() < 0.02 * scale  # one draw is close on average


def test_arccos_kernel_known_values():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    # orthogonal (theta = pi/2): J0 = pi/2, J1 = 1, J2 = pi/2
    assert arccos_kernel(x, degree=0)[0, 1] == pytest.approx(0.5)
    assert arccos_kernel(x, degree=1)[0, 1] == pytest.approx(2 / np.pi)
    assert arccos_kernel(x, degree=2)[0, 1] == pytest.approx(4 * 0.5)
    assert arccos_kernel(x, degree=1)[0, 2] == pytest.approx(0.0)  # opposite: J1(pi) = 0
    assert arccos_kernel(x, degree=1)[1, 1] == pytest.approx(4.0)  # ||x||^2 J1(0)/pi


def test_arccos_numpy_dask_sparse():
    X = np.random.default_rng(2).normal(size=(300, 4))
    est = ArcCosineFeatures(16, degree=2, random_state=0).fit(X)
    Z = est.transform(X)
    np.testing.assert_array_equal(est.transform(da.from_array(X, chunks=(77, 4))).compute(), Z)
    np.testing.assert_allclose(est.transform(sp.csr_matrix(X)), Z, rtol=1e-5, atol=1e-6)  # float32 GEMM
