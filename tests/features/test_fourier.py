"""RandomFourierFeatures (rfstream.features.fourier): mathematics, variants, errors.

The contract every map keeps (numpy/dask, chunkings, processes, save/load,
check_estimator, bad input) is tested once for all maps in test_contract.py.
"""
import math
import pickle

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers.sklearn_checks import FLOAT32_ROW_GROUPING
from dask.array.utils import assert_eq
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
from sklearn.utils.estimator_checks import check_estimator

from rfstream.features import FeatureMap, RandomFourierFeatures
from rfstream.features.fourier import project_with_offset
from rfstream.samplers import SAMPLERS

# ----------------------------------------------------------- kernel approximation
# Gammas per kernel chosen on the data below (uniform [0,1)^8) so that the mean
# kernel value is ~0.87, ~0.5 and ~0.07: near-constant, mid-range and near-zero
# kernels.  A bandwidth off by a factor 2 moves the mid-range kernel by ~0.15 on
# average, far beyond the bias bound.
GAMMAS = {
    "gaussian": [0.1, 0.5, 2.5],
    "laplacian": [0.05, 0.25, 1.2],
    "cauchy": [0.1, 0.5, 2.5],
}


def exact_kernel(kernel, X, Y, gamma):
    if kernel == "gaussian":
        return rbf_kernel(X, Y, gamma=gamma)
    if kernel == "laplacian":
        return laplacian_kernel(X, Y, gamma=gamma)
    diff = X[:, None, :] - Y[None, :, :]  # separable Cauchy, Rahimi & Recht Fig. 1
    return np.prod(1.0 / (1.0 + gamma * diff**2), axis=2)


CASES = [
    (kernel, sampler, variant, gamma)
    for sampler, func in SAMPLERS.items()
    if sampler in ("mc", "qmc", "orthogonal")
    for kernel in func.kernels
    for variant in ("cos", "cossin")
    for gamma in GAMMAS[kernel]
]


@pytest.fixture(scope="module")
def XY():
    rng = np.random.default_rng(0)
    return rng.random((150, 8)), rng.random((150, 8))


@pytest.mark.parametrize("kernel,sampler,variant,gamma", CASES)
def test_kernel_approximation(XY, kernel, sampler, variant, gamma):
    # D = 10_000 features: each entry of Z_X Z_Y' is a mean of D bounded terms
    # (variance <= 1 per term for "cos", <= 1/2 per pair for "cossin"), so its
    # error has std <= 0.01; over 22_500 entries the max is ~4.5 std ~ 0.045 and
    # the mean |error| ~ 0.008, well inside the sklearn bounds (0.1, 0.05).  The
    # mean error is averaged over entries and frequencies: |bias| ~ 1e-3.
    X, Y = XY
    rff = RandomFourierFeatures(
        10_000, kernel=kernel, gamma=gamma, sampler=sampler, variant=variant, random_state=0
    ).fit(X)
    approx = rff.transform(X).astype(np.float64) @ rff.transform(Y).T.astype(np.float64)
    error = exact_kernel(kernel, X, Y, gamma) - approx
    assert np.abs(np.mean(error)) <= 0.01  # close to unbiased
    np.abs(error, out=error)
    assert np.max(error) <= 0.1  # nothing too far off
    assert np.mean(error) <= 0.05  # mean is fairly close


# ------------------------------------------------------------ numpy / dask contract
@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(1).normal(size=(200, 6))


@pytest.mark.parametrize("variant", ["cos", "cossin"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_dask_equal_and_lazy_metadata(X, variant, dtype):
    rff = RandomFourierFeatures(64, variant=variant, dtype=dtype, random_state=0).fit(X)
    Z = rff.transform(X)
    assert isinstance(Z, np.ndarray) and Z.dtype == dtype and Z.shape == (200, 64)
    assert rff.random_weights_.dtype == dtype
    Zd = rff.transform(da.from_array(X, chunks=(37, 6)))
    assert isinstance(Zd, da.Array)
    assert Zd.chunks == ((37,) * 5 + (15,), (64,))
    assert Zd.dtype == dtype
    assert type(Zd._meta) is np.ndarray and Zd._meta.ndim == 2 and Zd._meta.dtype == dtype
    assert_eq(Zd, Z, rtol=1e-5, atol=1e-6)  # also checks chunks, dtype and meta of Zd


def test_chunking_invariance(X):
    # Parameters are drawn once in fit: the features of a row never depend on
    # its block.  Tolerance only for BLAS choosing different kernels (summation
    # orders) for different block shapes: each float32 argument x'w + b of the
    # cosine can then differ by a few ulps of sum_j |x_j w_j| + |b|, which is
    # large for the heavy-tailed (Cauchy) Laplacian frequencies, and cos is
    # 1-Lipschitz; the features carry the factor sqrt(2 / D).
    rff = RandomFourierFeatures(64, kernel="laplacian", random_state=0).fit(X)
    Z = rff.transform(X)
    magnitude = np.abs(X) @ np.abs(rff.random_weights_) + np.abs(rff.random_offset_)
    tol = np.sqrt(2 / 64) * 8 * np.finfo(np.float32).eps * magnitude
    for chunks in [(1, 6), (7, 6), (50, 3), (200, 1), ((120, 0, 80), 6)]:
        Zd = rff.transform(da.from_array(X, chunks=chunks))
        assert len(Zd.chunks[1]) == 1  # column chunks merged
        assert np.all(np.abs(Zd.compute() - Z) <= tol), np.max(np.abs(Zd.compute() - Z) / tol)
    # fitting on dask (any chunking) draws the same parameters as on numpy
    rff_d = RandomFourierFeatures(64, kernel="laplacian", random_state=0).fit(da.from_array(X, chunks=(9, 2)))
    np.testing.assert_array_equal(rff_d.random_weights_, rff.random_weights_)
    np.testing.assert_array_equal(rff_d.random_offset_, rff.random_offset_)


def test_transform_is_lazy_and_graph_names_deterministic():
    def boom(block):
        raise RuntimeError("data was read")

    X = da.ones((100, 4), chunks=(10, 4)).map_blocks(boom, dtype=float)
    rff = RandomFourierFeatures(16, random_state=0).fit(X)  # no data read
    Z = rff.transform(X)  # no data read
    assert Z.shape == (100, 16) and Z.numblocks == (10, 1)
    assert Z.name == rff.transform(X).name  # deterministic key
    assert Z.name != RandomFourierFeatures(16, random_state=1).fit(X).transform(X).name
    with pytest.raises(RuntimeError, match="data was read"):
        Z.compute()


def test_determinism_and_seeds(X):
    Z = RandomFourierFeatures(32, sampler="qmc", random_state=3).fit_transform(X)
    np.testing.assert_array_equal(Z, RandomFourierFeatures(32, sampler="qmc", random_state=3).fit_transform(X))
    assert not np.allclose(Z, RandomFourierFeatures(32, sampler="qmc", random_state=4).fit_transform(X))
    rff = RandomFourierFeatures(32, random_state=None).fit(X)  # fresh seed, consistent
    np.testing.assert_array_equal(rff.transform(X[:50]), rff.transform(X)[:50])
    for rs in (np.random.default_rng(0), np.random.RandomState(0)):
        assert RandomFourierFeatures(32, random_state=rs).fit_transform(X).shape == (200, 32)


def test_dtypes(X):
    assert RandomFourierFeatures(8, random_state=0).fit_transform(X).dtype == np.float32
    assert RandomFourierFeatures(8, random_state=0).fit_transform(X.astype(np.float32)).dtype == np.float32
    assert RandomFourierFeatures(8, dtype="float64", random_state=0).fit_transform(X).dtype == np.float64
    Xi = np.arange(40).reshape(10, 4)
    rff = RandomFourierFeatures(8, dtype=np.float64, random_state=0).fit(Xi)
    assert rff.transform(Xi).dtype == np.float64
    Zi = rff.transform(da.from_array(Xi, chunks=5))  # integer dask input
    assert_eq(Zi, rff.transform(Xi))


def test_fitted_attributes(X):
    rff = RandomFourierFeatures(10, gamma=2.0, random_state=0).fit(X)
    assert rff.gamma_ == 2.0 and rff.n_features_in_ == 6
    assert rff.random_weights_.shape == (6, 10) and rff.random_offset_.shape == (10,)
    rff.set_params(variant="cossin").fit(X)
    assert rff.random_weights_.shape == (6, 5) and not hasattr(rff, "random_offset_")
    assert rff.transform(X).shape == (200, 10)
    names = rff.get_feature_names_out()
    assert list(names) == [f"randomfourierfeatures{i}" for i in range(10)]
    df = pd.DataFrame(X, columns=[f"c{i}" for i in range(6)])
    assert list(rff.fit(df).feature_names_in_) == list(df.columns)
    assert not hasattr(rff.fit(da.from_array(X)), "feature_names_in_")


def test_gamma_auto_numpy_equals_dask(X):
    big = np.random.default_rng(2).normal(size=(3000, 6))
    a = RandomFourierFeatures(32, gamma="auto", random_state=5).fit(big)
    b = RandomFourierFeatures(32, gamma="auto", random_state=5).fit(da.from_array(big, chunks=(128, 3)))
    assert a.gamma_ == b.gamma_ and 1 / 40 < a.gamma_ < 1 / 4
    np.testing.assert_array_equal(a.random_weights_, b.random_weights_)
    # The bandwidth uses a child generator: the frequencies are those of a fixed
    # gamma, rescaled (W = sqrt(2 gamma) G for the Gaussian kernel).
    c = RandomFourierFeatures(32, gamma=a.gamma_, random_state=5).fit(big)
    np.testing.assert_array_equal(a.random_weights_, c.random_weights_)
    np.testing.assert_array_equal(a.random_offset_, c.random_offset_)


def test_sparse_input_equals_dense(X):
    rff = RandomFourierFeatures(16, random_state=0).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(rff.transform(sp.csr_matrix(X)), rff.transform(X), rtol=1e-5, atol=1e-6)


def test_block_is_picklable_and_pure(X):
    rff = RandomFourierFeatures(16, variant="cossin", random_state=0).fit(X)
    block = pickle.loads(pickle.dumps(rff._block))
    np.testing.assert_array_equal(block(X[10:20]), rff.transform(X)[10:20])
    assert rff._n_features_out == 16
    assert issubclass(RandomFourierFeatures, FeatureMap)


def test_offset_folded_into_the_projection():
    rng = np.random.default_rng(70)
    x = rng.standard_normal((300, 7))
    W = rng.standard_normal((7, 11)).astype(np.float32)
    b = rng.uniform(0, 2 * np.pi, 11).astype(np.float32)
    got = project_with_offset(x, W, b)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x.astype(np.float32) @ W + b, rtol=1e-5, atol=1e-5)


def test_rff_block_matches_the_formula():
    rng = np.random.default_rng(71)
    X = rng.standard_normal((50, 4))
    rff = RandomFourierFeatures(n_components=16, gamma=0.5, random_state=0).fit(X)
    W, b = rff.random_weights_.astype(np.float64), rff.random_offset_.astype(np.float64)
    expected = math.sqrt(2 / 16) * np.cos(X @ W + b)
    np.testing.assert_allclose(rff.transform(X), expected, atol=2e-6)


# -------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "params,match",
    [
        ({"n_components": 0}, r"The 'n_components' parameter of RandomFourierFeatures must be an int in the range \[1, inf\), an array-like .* Got 0 instead"),
        ({"n_components": 2.5}, r"'n_components' parameter .* Got 2.5 instead"),
        ({"kernel": "rbf"}, r"The 'kernel' parameter of RandomFourierFeatures must be a str among .*'laplacian'.* Got 'rbf' instead"),
        ({"sampler": "sobol"}, r"The 'sampler' parameter .* must be a str among .*'qmc'.* Got 'sobol' instead"),
        ({"gamma": 0.0}, r"The 'gamma' parameter .* must be a float in the range \(0.0, inf\), .* Got 0.0 instead"),
        ({"gamma": "scale"}, r"gamma \('scale'\) is not a number, 'auto' or 'auto\*F'"),
        ({"variant": "sin"}, r"The 'variant' parameter .* Got 'sin' instead"),
        ({"dtype": "float16"}, r"The 'dtype' parameter .* Got 'float16' instead"),
        ({"dtype": np.int64}, r"dtype must be 'float32' or 'float64'; got <class 'numpy.int64'>"),
        ({"variant": "cossin", "n_components": 7}, r"n_components must be even with variant='cossin' .*; got 7"),
        ({"sampler": "orthogonal", "kernel": "laplacian"}, r"sampler='orthogonal' supports only kernel in \('gaussian',\); got kernel='laplacian'"),
    ],
)
def test_parameter_errors(X, params, match):
    with pytest.raises(ValueError, match=match):
        RandomFourierFeatures(**params).fit(X)


# ------------------------------------------------------------ scikit-learn checks
# check_array_api_input skips itself (SCIPY_ARRAY_API unset) with a warning.
pytestmark_skiptest = pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")

CHECKING_N_COMPONENTS_1 = (
    "sklearn's checks set n_components=1, which variant='cossin' rejects "
    "(it needs an even number of features)"
)


@pytestmark_skiptest
@pytest.mark.parametrize(
    "estimator, expected_failed",
    [
        # the default configuration is checked in test_contract.py::test_map_check_estimator[rff]
        (RandomFourierFeatures(kernel="cauchy", sampler="qmc", dtype="float64"), {}),
        (RandomFourierFeatures(sampler="orthogonal", gamma="auto"), FLOAT32_ROW_GROUPING),
    ],
    ids=["cauchy-qmc-float64", "orthogonal-auto"],
)
def test_sklearn_check_estimator(estimator, expected_failed):
    check_estimator(estimator, expected_failed_checks=expected_failed)


@pytestmark_skiptest
def test_sklearn_check_estimator_cossin():
    failed = {
        name: CHECKING_N_COMPONENTS_1
        for name in (
            "check_dont_overwrite_parameters",
            "check_methods_sample_order_invariance",
            "check_methods_subset_invariance",
            "check_fit2d_1sample",
            "check_fit2d_1feature",
            "check_fit2d_predict1d",
        )
    }
    check_estimator(RandomFourierFeatures(variant="cossin"), expected_failed_checks=failed)
