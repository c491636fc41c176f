"""Random binning features (Rahimi & Recht 2007, Algorithm 2): mathematics and invariants.

The contract of every map (numpy/dask, chunkings, processes, save/load, check_estimator,
bad input) is tested in test_contract.py, exactly for the sparse binning features."""
import json
import subprocess
import sys

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import laplacian_kernel

from rfstream import (
    FourierBinningFeatures,
    RandomBinningFeatures,
    StreamingRidge,
    StreamingRidgeClassifier,
)
from rfstream.pipeline import evaluate_dataset, fit_dataset


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).random((300, 5))


def _kernel_errors(K, Z):
    error = K - (Z @ Z.T).toarray()
    return np.mean(error), np.max(np.abs(error)), np.mean(np.abs(error))


@pytest.mark.parametrize("gamma", [0.3, 1.0, 3.0])
def test_laplacian_kernel_unbiased_sklearn_bounds(X, gamma):
    """sklearn's bounds (mean bias, max error, mean error) at three gammas.

    With P grids the estimate of k has variance k (1 - k) / P; all pairs share
    the same grids, so the mean bias of one draw has a standard deviation of
    about 0.008 at P = 1000 (gamma = 0.3, measured over seeds): four draws are
    averaged for the bias (std about 0.0042 against the 0.01 bound).  n_bins =
    4096 keeps the hashing bias below (1 - k) / 4096.
    """
    K = laplacian_kernel(X, gamma=gamma)
    runs = [
        _kernel_errors(K, RandomBinningFeatures(1000, n_bins=4096, gamma=gamma, random_state=s).fit_transform(X))
        for s in range(4)
    ]
    bias, max_err, mean_err = np.array(runs).T
    assert abs(bias.mean()) <= 0.01  # close to unbiased
    assert max_err.max() <= 0.1  # nothing too far off
    assert mean_err.max() <= 0.05  # mean is fairly close


def test_hybrid_is_weighted_concatenation(X):
    """[sqrt(w) z_F, sqrt(1-w) z_B], so z'z = w z_F'z_F + (1 - w) z_B'z_B: an estimate of
    w k_Fourier + (1 - w) k_Laplacian (each half's unbiasedness is tested on its own)."""
    hyb = FourierBinningFeatures(64, n_grids=20, n_bins=32, kernel="gaussian", gamma=1.0,
                                 weight=0.3, random_state=0).fit(X)
    Z = hyb.transform(X)
    assert sp.issparse(Z) and Z.shape == (300, 64 + 20 * 32)
    F, B = hyb.fourier_.transform(X).astype(np.float64), hyb.binning_.transform(X)
    expected = 0.3 * F @ F.T + 0.7 * (B @ B.T).toarray()
    np.testing.assert_allclose((Z @ Z.T).toarray(), expected, atol=1e-5)
    assert hyb.fourier_.kernel == "gaussian" and hyb.binning_.gamma_ == 1.0


def test_sparse_structure_and_dtype(X):
    Z = RandomBinningFeatures(7, n_bins=16, gamma=1.0, random_state=0).fit_transform(X)
    assert isinstance(Z, sp.csr_matrix) and Z.dtype == np.float32 and Z.shape == (300, 7 * 16)
    counts = np.diff(Z.indptr)
    assert np.all(counts == 7)  # one bin per grid
    grid = Z.indices.reshape(300, 7) // 16
    assert np.all(grid == np.arange(7))  # the p-th non-zero is in grid p's columns
    np.testing.assert_allclose(Z.data, np.sqrt(1 / 7))
    np.testing.assert_allclose(Z.multiply(Z).sum(axis=1), 1.0, rtol=1e-6)  # z(x)'z(x) = k(x, x) = 1


def test_bins_follow_algorithm_2(X):
    """Same column <=> same integer bin vector floor((x - u) / delta) (no 64-bit collision here)."""
    m = RandomBinningFeatures(3, n_bins=2**20, gamma=2.0, random_state=1).fit(X)
    keys = m.bin_keys(X)
    for p in range(3):
        bins = np.floor((X - m.offsets_[p]) / m.pitches_[p]).astype(np.int64)
        _, first = np.unique(bins, axis=0, return_inverse=True)
        _, second = np.unique(keys[:, p], return_inverse=True)
        same_bins = first.ravel()[:, None] == first.ravel()[None, :]
        same_keys = second[:, None] == second[None, :]
        assert np.array_equal(same_bins, same_keys)
    assert np.all(m.offsets_ >= 0) and np.all(m.offsets_ < m.pitches_)
    # pitches ~ Gamma(2, 1/gamma): mean 2/gamma
    pitches = RandomBinningFeatures(500, gamma=2.0, random_state=0).fit(X).pitches_
    assert abs(pitches.mean() - 1.0) < 0.03


_KEYS_SCRIPT = """
import json, sys
import numpy as np
from rfstream import RandomBinningFeatures
X = np.random.default_rng(0).random((300, 5))
m = RandomBinningFeatures(20, n_bins=32, gamma=1.0, random_state=0).fit(X)
print(json.dumps([str(v) for v in m.bin_keys(X)[:50].ravel()]))
"""


def test_hashing_deterministic_across_processes(X):
    """The hash is a fixed function (no Python hash(), no PYTHONHASHSEED dependence)."""
    m = RandomBinningFeatures(20, n_bins=32, gamma=1.0, random_state=0).fit(X)
    here = [str(v) for v in m.bin_keys(X)[:50].ravel()]
    out = subprocess.run([sys.executable, "-c", _KEYS_SCRIPT], capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "12345", "PATH": ""})
    assert json.loads(out.stdout) == here


def test_sparse_ridge_equals_dense_ridge(X):
    """The sparse Gram pass gives the dense pass's solution (float64 features)."""
    rng = np.random.default_rng(1)
    Xr = rng.random((2000, 4))
    y = np.sin(3 * Xr.sum(axis=1)) + 0.1 * rng.normal(size=2000)
    Z = RandomBinningFeatures(12, n_bins=16, gamma=2.0, random_state=0, dtype="float64").fit_transform(Xr)
    H = FourierBinningFeatures(30, n_grids=8, n_bins=16, gamma=2.0, random_state=0,
                               dtype="float64").fit_transform(Xr)
    for feats in (Z, H):
        for alpha in (1.0, [0.1, 1.0, 10.0]):
            sparse = StreamingRidge(alpha=alpha).fit(feats, y)
            dense = StreamingRidge(alpha=alpha).fit(feats.toarray(), y)
            np.testing.assert_allclose(sparse.coef_, dense.coef_, atol=1e-9)
            assert sparse.alpha_ == dense.alpha_
            np.testing.assert_allclose(sparse.predict(feats), dense.predict(feats.toarray()), atol=1e-9)
    # dask of sparse blocks: same model, lazy predictions
    m = RandomBinningFeatures(12, n_bins=16, gamma=2.0, random_state=0, dtype="float64").fit(Xr)
    Zd = m.transform(da.from_array(Xr, chunks=300))
    yd = da.from_array(y, chunks=300)
    lazy = StreamingRidge(alpha=1.0).fit(Zd, yd)
    np.testing.assert_allclose(lazy.coef_, StreamingRidge(alpha=1.0).fit(Z, y).coef_, atol=1e-9)
    pred = lazy.predict(Zd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), lazy.predict(Z), atol=1e-9)
    # conjugate gradients on the implicit normal equations reach the same solution
    for X_, y_ in ((Z, y), (Zd, yd)):
        cg = StreamingRidge(alpha=1.0, solver="cg", tol=1e-10, max_iter=500).fit(X_, y_)
        np.testing.assert_allclose(cg.coef_, lazy.coef_, atol=1e-6)
        assert 1 < cg.n_iter_ < 500
    labels = np.digitize(y, [-0.5, 0.5])  # three classes: one-vs-rest targets
    dense = StreamingRidgeClassifier(alpha=1.0, solver="gram").fit(Z, labels)
    cg = StreamingRidgeClassifier(alpha=1.0, solver="cg", tol=1e-10, max_iter=500).fit(Z, labels)
    np.testing.assert_allclose(cg.coef_, dense.coef_, atol=1e-6)
    # a list of alphas: every (fold, alpha) system in the same O(nnz) passes, the Gram route's choice
    gram = StreamingRidge(alpha=[0.3, 3.0], solver="gram").fit(Z, y)
    cv = StreamingRidge(alpha=[0.3, 3.0], solver="cg", tol=1e-10, max_iter=500).fit(Zd, yd)
    np.testing.assert_allclose(cv.cv_mse_, gram.cv_mse_, rtol=1e-6)
    assert cv.alpha_ == gram.alpha_
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="CG stopped after max_iter=1"):
        StreamingRidge(alpha=1.0, solver="cg", tol=1e-10, max_iter=1).fit(Z, y)


def test_errors(X):
    with pytest.raises(ValueError, match="n_grids"):
        RandomBinningFeatures(0).fit(X)
    with pytest.raises(ValueError, match="n_bins"):
        RandomBinningFeatures(4, n_bins=0).fit(X)
    with pytest.raises(ValueError, match="gamma"):
        RandomBinningFeatures(4, gamma=-1.0).fit(X)
    with pytest.raises(ValueError, match="weight"):
        FourierBinningFeatures(4, weight=1.5).fit(X)
    with pytest.raises(ValueError, match="n_components must be even"):
        FourierBinningFeatures(5, variant="cossin").fit(X)
    m = RandomBinningFeatures(4, gamma=1.0).fit(X)
    with pytest.raises(ValueError, match="5 features"):
        m.transform(X[:, :3])


def test_gamma_auto_uses_l1_distance(X):
    m = RandomBinningFeatures(4, gamma="auto", random_state=0).fit(X)
    h = FourierBinningFeatures(4, n_grids=4, kernel="gaussian", gamma="auto", random_state=0).fit(X)
    assert h.binning_gamma_ == pytest.approx(m.gamma_)
    assert h.gamma_ != pytest.approx(m.gamma_)  # the Gaussian half resolves its own gamma


def test_kdd99_binning_least_squares(kdd_train_zarr, kdd_test_zarr):
    """Acceptance: KDD99 (train 10%, test "corrected"), binning + least squares <= 8% error."""
    with dask.config.set(scheduler="threads"):
        model, meta = fit_dataset(kdd_train_zarr, features="binning", n_grids=10, n_bins=64, alpha=1.0)
        error = evaluate_dataset(model, meta, kdd_test_zarr)["value"]
    assert error <= 0.08
