"""Fastfood (Le et al. 2013) and compact random features (rfstream.features.fastfood), the
baselines of the TEFM paper: kernel approximation, the dense equivalent, the projection.

The contract of every map (numpy/dask, chunkings, processes, save/load, check_estimator,
bad input) is tested in test_contract.py.
"""
import dask.array as da
import numpy as np
import pytest

from rfstream.features import CompactRandomFeatures, FastfoodFeatures
from rfstream.kernels import kernel_matrix


@pytest.fixture(scope="module")
def X():
    # Correlated columns, as real data (the fixture of test_tefm.py)
    rng = np.random.default_rng(0)
    return rng.standard_normal((1500, 6)) @ rng.standard_normal((6, 6)) * 0.5


def test_fastfood_kernel_approximation_and_dense_equivalent(X):
    for gamma in (0.05, 0.3):
        ff = FastfoodFeatures(2048, gamma=gamma, random_state=0).fit(X[:400])
        Z = ff.transform(X[:400]).astype(np.float64)
        err = kernel_matrix(X[:400], X[:400], "gaussian", gamma) - Z @ Z.T
        # close to unbiased (frequencies of one stack share G, S: more variance than RFF)
        assert abs(err.mean()) < 0.02 and np.abs(err).max() < 0.15
        W = ff.frequencies()  # the fast transform equals a dense W
        np.testing.assert_allclose(
            np.sqrt(2 / 2048) * np.cos(X[:50] @ W + ff.random_offset_), Z[:50], atol=2e-5)
        # rows of V have the norm of N(0, 2 gamma I_p) vectors (p = 8); restricted to
        # the 6 real input columns: mean ||w||^2 = 2 gamma 6
        assert np.mean(np.sum(W**2, axis=0)) == pytest.approx(2 * gamma * 6, rel=0.05)
    Xd = da.from_array(X, chunks=500)
    ff = FastfoodFeatures(100, gamma=0.3, random_state=0).fit(Xd)
    np.testing.assert_allclose(ff.transform(Xd).compute(), ff.transform(X), atol=1e-6)


def test_compact_maps_are_a_projection_of_rff(X):
    comp = CompactRandomFeatures(50, gamma=0.3, random_state=0).fit(X)
    F = comp.rff_.transform(X[:200]).astype(np.float64)
    np.testing.assert_allclose(comp.transform(X[:200]), F @ comp.projection_, atol=1e-5)
    assert comp.projection_.shape == (200, 50)
    with pytest.raises(ValueError, match="n_random_features must be >= n_components"):
        CompactRandomFeatures(50, n_random_features=10).fit(X)
