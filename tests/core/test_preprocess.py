"""Standardizer, train_test_split, encode_labels (rfstream.preprocess).

Invariants: the streaming moments equal numpy's whatever the chunking (and keep
precision when the mean dwarfs the spread); the split is a function of
(seed, row) only, so numpy and every chunking select the same rows.  The
moments reduction itself is tested in test_reductions.py, per-row random
numbers in test_random.py.
"""
import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from rfstream import Standardizer, encode_labels, train_test_split
from rfstream.random import STREAM_SPLIT, row_uniform

N = 3000
CHUNKINGS = [
    (500,),
    ((1, 999, 1000, 700, 300),),  # uneven
    ((0, 1500, 0, 1500),),  # empty blocks
    ((N,),),  # one chunk
]


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    scales = np.array([1.0, 10.0, 0.01, 3.0])
    return rng.normal(size=(N, 4)) * scales + np.array([0.0, -5.0, 100.0, 2.0])


# --------------------------------------------------------------------- Standardizer
@pytest.mark.parametrize("chunks", CHUNKINGS, ids=str)
def test_standardizer_dask_equals_numpy(X, chunks):
    ref = Standardizer().fit(X)
    assert _rel(ref.mean_, X.mean(axis=0)) < 1e-12
    assert _rel(ref.var_, X.var(axis=0)) < 1e-12
    Xd = da.from_array(X, chunks=chunks + ((2, 2),))  # column chunks are merged
    est = Standardizer().fit(Xd)
    assert _rel(est.mean_, ref.mean_) < 1e-12
    assert _rel(est.var_, ref.var_) < 1e-12
    assert est.n_samples_seen_ == N and est.n_features_in_ == 4

    Zd = est.transform(Xd)
    assert isinstance(Zd, da.Array)  # lazy
    assert Zd.chunks == (Xd.chunks[0], (4,))
    Z = Zd.compute()
    # column 2 has |mean| / std = 1e4: mean_ agreeing to ~1e-15 relative (0.1
    # ulp-scale differences of 1e-13) moves z = (x - mean) / std by ~1e-11
    np.testing.assert_allclose(Z, ref.transform(X), rtol=1e-12, atol=1e-9)
    # standardized: mean 0 and variance 1 per column (to float64 rounding,
    # amplified 1e4 times in column 2 as above)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(Z.var(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(est.inverse_transform(Z), X, rtol=1e-12, atol=1e-9)


def test_standardizer_large_offset_keeps_precision():
    # Mean 1e6, std 1: x^2 ~ 1e12, so E[x^2] - E[x]^2 in float64 cancels 12
    # digits and leaves ~1e-4 of rounding in a variance of 1.  The per-block
    # two-pass moments + Chan combine keep ~1e-9: each x - mean is exact to
    # ~1e6 * eps = 2e-10.  1e-8 separates the two by four orders of magnitude.
    rng = np.random.default_rng(3)
    n = 20_000
    X = 1e6 + rng.normal(size=(n, 3))
    exact_var = X.var(axis=0)  # numpy: two-pass in float64
    naive = (X**2).mean(axis=0) - X.mean(axis=0) ** 2
    assert np.max(np.abs(naive - exact_var)) > 1e-6  # the naive formula fails here...
    for Xin in (X, da.from_array(X, chunks=(777, 3))):
        est = Standardizer().fit(Xin)
        assert _rel(est.var_, exact_var) < 1e-8  # ...the streaming one does not
        assert _rel(est.mean_, X.mean(axis=0)) < 1e-14
    Z = Standardizer().fit(X).transform(X)
    np.testing.assert_allclose(Z.std(axis=0), 1.0, rtol=1e-8)


def test_standardizer_constant_column():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=200), np.full(200, 7.5), np.full(200, -1e6)])
    for Xin in (X, da.from_array(X, chunks=(64, 3))):
        est = Standardizer().fit(Xin)
        assert est.scale_[1] == 1.0 and est.scale_[2] == 1.0  # not 0: no division by 0
        assert est.var_[1] == 0.0
        Z = np.asarray(est.transform(Xin))
        assert np.all(np.isfinite(Z))
        np.testing.assert_array_equal(Z[:, 1:], 0.0)  # centred, unscaled


def test_standardizer_passthrough(X):
    Xp = X.copy()
    Xp[:, 1] = np.random.default_rng(1).integers(0, 2, size=N)  # a one-hot-like column
    for Xin in (Xp, da.from_array(Xp, chunks=(700, 4))):
        est = Standardizer(passthrough=[1, 3]).fit(Xin)
        Z = np.asarray(est.transform(Xin))
        np.testing.assert_array_equal(Z[:, [1, 3]], Xp[:, [1, 3]])  # untouched, bit for bit
        np.testing.assert_allclose(Z[:, [0, 2]].mean(axis=0), 0.0, atol=1e-10)
        np.testing.assert_allclose(Z[:, [0, 2]].var(axis=0), 1.0, rtol=1e-12)
        assert est.mean_[1] == 0.0 and est.scale_[1] == 1.0
        np.testing.assert_allclose(est.var_, Xp.var(axis=0), rtol=1e-12)  # still reported


def test_standardizer_with_mean_with_std(X):
    Z = Standardizer(with_mean=False).fit(X).transform(X)
    np.testing.assert_allclose(Z, X / X.std(axis=0), rtol=1e-12)
    Z = Standardizer(with_std=False).fit(X).transform(X)
    np.testing.assert_allclose(Z, X - X.mean(axis=0), rtol=1e-12, atol=1e-12)


def test_standardizer_float32_in_float32_out(X):
    X32 = X.astype(np.float32)
    est = Standardizer().fit(X32)
    assert est.transform(X32).dtype == np.float32
    assert est.transform(da.from_array(X32, chunks=(500, 4))).dtype == np.float32
    assert est.mean_.dtype == np.float64  # moments accumulate in float64


def test_standardizer_errors(X):
    with pytest.raises(NotFittedError):
        Standardizer().transform(X)
    with pytest.raises(ValueError, match="passthrough"):
        Standardizer(passthrough=[7]).fit(X)
    est = Standardizer().fit(X)
    with pytest.raises(ValueError, match="3 features"):
        est.transform(da.from_array(X[:, :3]))
    with pytest.raises(ValueError, match="3 features"):
        est.transform(X[:, :3])
    with pytest.raises(ValueError, match="unknown row chunk sizes"):
        Xd = da.from_array(X, chunks=(500, 4))
        Standardizer().fit(Xd[Xd[:, 0] > 0])


# ---------------------------------------------------------------- train_test_split
N_SPLIT = 10_000  # spans three virtual blocks of 4096 rows


@pytest.fixture(scope="module")
def rows():
    """Column 0 is the row index, so every output row says where it came from."""
    rng = np.random.default_rng(2)
    X = np.column_stack([np.arange(N_SPLIT, dtype=np.float64), rng.normal(size=(N_SPLIT, 2))])
    y = np.arange(N_SPLIT) * 10
    return X, y


SPLIT_CHUNKINGS = [
    (1000,),
    (4096,),
    ((3, 4093, 1, 5000, 903),),  # uneven, boundaries next to the virtual-block edges
    ((0, 6000, 4000),),
    ((N_SPLIT,),),
]


@pytest.mark.parametrize("chunks", SPLIT_CHUNKINGS, ids=str)
def test_split_dask_equals_numpy(rows, chunks):
    X, y = rows
    ref = train_test_split(X, y, test_size=0.3, random_state=5)
    Xd = da.from_array(X, chunks=chunks + ((3,),))
    yd = da.from_array(y, chunks=chunks)
    out = train_test_split(Xd, yd, test_size=0.3, random_state=5)
    assert len(out) == 4
    for lazy, expected in zip(out, ref):
        assert isinstance(lazy, da.Array)
        # chunk sizes are known (no nan) and equal the rows each block holds
        assert not any(np.isnan(c) for c in lazy.chunks[0])
        assert lazy.shape[0] == expected.shape[0]
        sizes = [lazy.blocks[i].compute().shape[0] for i in range(lazy.numblocks[0])]
        assert tuple(sizes) == lazy.chunks[0]
        np.testing.assert_array_equal(lazy.compute(), expected)


def test_split_partitions_rows(rows):
    X, y = rows
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=1)
    tr, te = X_tr[:, 0].astype(int), X_te[:, 0].astype(int)
    assert np.intersect1d(tr, te).size == 0  # no overlap
    np.testing.assert_array_equal(np.union1d(tr, te), np.arange(N_SPLIT))  # union = all
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(te) > 0)  # row order kept
    np.testing.assert_array_equal(y_tr, tr * 10)  # X and y stay paired
    np.testing.assert_array_equal(y_te, te * 10)
    # the documented rule: row i is a test row iff u_i < test_size
    u = row_uniform(1, STREAM_SPLIT, 0, N_SPLIT)
    np.testing.assert_array_equal(te, np.flatnonzero(u < 0.25))


@pytest.mark.parametrize("test_size", [0.1, 0.25, 0.5])
def test_split_fraction_is_binomial(rows, test_size):
    # The test count is Binomial(n, p): std sqrt(p(1-p)/n) <= 0.005 for
    # n = 10000; 5 std (0.025 at p=0.5) fails by chance with prob ~6e-7.
    X, _ = rows
    sd = np.sqrt(test_size * (1 - test_size) / N_SPLIT)
    for seed in range(3):
        _, X_te = train_test_split(X, test_size=test_size, random_state=seed)
        assert abs(X_te.shape[0] / N_SPLIT - test_size) < 5 * sd


def test_split_deterministic_and_seed_dependent(rows):
    X, _ = rows
    a = train_test_split(X, random_state=3)[1][:, 0]
    b = train_test_split(X, random_state=3)[1][:, 0]
    c = train_test_split(X, random_state=4)[1][:, 0]
    np.testing.assert_array_equal(a, b)
    # two independent 25% test sets share ~6.25% of the rows, not 25%
    assert np.intersect1d(a, c).size < 0.5 * a.size


def test_split_errors(rows):
    X, y = rows
    for bad in (0.0, 1.0, -0.1, "0.3", 2):
        with pytest.raises(ValueError, match="test_size"):
            train_test_split(X, test_size=bad)
    with pytest.raises(ValueError, match="same number of rows"):
        train_test_split(X, y[:-1])
    with pytest.raises(ValueError, match="at least one array"):
        train_test_split()


# ------------------------------------------------------------------- encode_labels
def test_encode_labels_numpy_strings():
    y = np.array(["b", "a", "c", "a", "b"])
    codes, classes = encode_labels(y)
    np.testing.assert_array_equal(classes, ["a", "b", "c"])
    np.testing.assert_array_equal(codes, [1, 0, 2, 0, 1])
    np.testing.assert_array_equal(classes[codes], y)  # decoding inverts encoding
    # unseen labels -> -1: below, between and above the known classes
    codes, _ = encode_labels(np.array(["0", "a", "ab", "c", "zz"]), classes=classes)
    np.testing.assert_array_equal(codes, [-1, 0, -1, 2, -1])
    assert codes.dtype == np.int32


@pytest.mark.parametrize("chunks", [4, 7, 20])
def test_encode_labels_dask_equals_numpy(chunks):
    y = np.array([5, -1, 3, 3, 9, 5, 5, 3, -1, 9] * 2)
    ref_codes, ref_classes = encode_labels(y)
    codes, classes = encode_labels(da.from_array(y, chunks=chunks))
    np.testing.assert_array_equal(classes, ref_classes)
    assert isinstance(codes, da.Array) and codes.chunks == da.from_array(y, chunks=chunks).chunks
    np.testing.assert_array_equal(codes.compute(), ref_codes)
    unseen, _ = encode_labels(da.from_array(np.array([5, 4, 10, -7, 9]), chunks=2), classes=[-1, 3, 5, 9])
    np.testing.assert_array_equal(unseen.compute(), [2, -1, -1, -1, 3])


# ------------------------------------------------------------------- sklearn conventions
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_standardizer_check_estimator():
    check_estimator(Standardizer())


def test_a_dask_dataframe_is_converted_not_loaded():
    # its partitions become the row blocks of a lazy dask array (more in test_dataframes.py)
    import dask.dataframe as dd
    import pandas as pd

    values = np.arange(30.0).reshape(10, 3) ** 2
    frame = dd.from_pandas(pd.DataFrame(values, columns=["a", "b", "c"]), npartitions=2)
    est = Standardizer().fit(frame)
    ref = Standardizer().fit(da.from_array(values, chunks=(5, 3)))
    assert list(est.feature_names_in_) == ["a", "b", "c"] and est.n_samples_seen_ == 10
    np.testing.assert_array_equal(est.mean_, ref.mean_)
    np.testing.assert_array_equal(est.scale_, ref.scale_)
    Z = est.transform(frame)
    assert isinstance(Z, da.Array) and Z.chunks == ((5, 5), (3,))
    np.testing.assert_array_equal(Z.compute(), ref.transform(values))

