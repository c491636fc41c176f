"""standardize="auto": the columns' extrema from the moments pass, and the rule that leaves
columns already on one scale alone (docs/accuracy.md, "Standardizing: the rule")."""
from __future__ import annotations

import array_api_strict as xps
import dask.array as da
import numpy as np
import pytest

from rfstream import Standardizer
from rfstream.devices import GenericRows, array_namespace, to_host
from rfstream.preprocess import common_scale
from rfstream.reductions import moments, moments_chunk, unpack_extrema, unpack_moments


def pixels(n=300, d=16, seed=0):
    """Pixel-like rows: integers in [0, 16], a few border columns almost always 0."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 17, size=(n, d)).astype(np.float64)
    X[:, :3] = 0.0
    X[rng.random(n) < 0.02, 0] = 2.0  # a rare flicker: tiny variance, a small range
    return X


def mixed(n=300, seed=0):
    """Columns in unrelated units: a unit normal, an income-like column, a 0/1 column."""
    rng = np.random.default_rng(seed)
    return np.c_[rng.normal(0, 1, n), rng.lognormal(10, 1, n), rng.integers(0, 2, n)]


@pytest.mark.parametrize("chunks", [300, 64, 7])
def test_moments_extrema_are_the_columns_min_and_max(chunks):
    X = mixed()
    X[5, 1] = -3.0  # a minimum inside one block
    vec = np.asarray(moments(da.from_array(X, chunks=(chunks, 3)), extrema=True).compute())
    lo, hi = unpack_extrema(vec)
    np.testing.assert_array_equal(lo, X.min(axis=0))
    np.testing.assert_array_equal(hi, X.max(axis=0))
    n, mean, var = unpack_moments(vec, extrema=True)
    n0, mean0, var0 = unpack_moments(moments(X))  # the same moments as without extrema
    assert n == n0 == 300
    np.testing.assert_allclose(mean, mean0, rtol=1e-12)
    np.testing.assert_allclose(var, var0, rtol=1e-12)
    np.testing.assert_allclose(var, X.var(axis=0), rtol=1e-10)


def test_common_scale_rule():
    X = pixels()
    shared, reason = common_scale(X.min(axis=0), X.max(axis=0))
    assert shared and reason == "every column in [0, 16], median range 16"
    X = mixed()
    shared, reason = common_scale(X.min(axis=0), X.max(axis=0))
    assert not shared and reason.startswith("columns on different scales: ranges 1 to ")
    # one-hot columns passed through do not count; nor do constant ones
    lo, hi = np.array([0.0, 0.0, 0.0, 0.0, 5.0]), np.array([100.0, 1.0, 1.0, 90.0, 5.0])
    assert not common_scale(lo, hi)[0]  # ranges 100, 1, 1, 90: median 45.5 < 50
    assert common_scale(lo, hi, passthrough=[1, 2])[0]  # ranges 100, 90
    assert common_scale(np.zeros(3), np.zeros(3)) == (True, "no column to scale")
    # the threshold: the median range at least half of the span
    assert common_scale([0.0, 0.0, 0.0], [10.0, 5.0, 5.0])[0]
    assert not common_scale([0.0, 0.0, 0.0], [10.0, 4.9, 4.9])[0]


def test_auto_leaves_pixels_alone():
    X = pixels()
    sc = Standardizer(auto=True).fit(da.from_array(X, chunks=(100, 16)))
    assert sc.applied_ is False
    assert sc.decision_ == "auto -> off (every column in [0, 16], median range 16)"
    np.testing.assert_array_equal(sc.data_min_, X.min(axis=0))
    np.testing.assert_array_equal(sc.transform(X), X)
    np.testing.assert_array_equal(sc.transform(da.from_array(X, chunks=(64, 16))).compute(), X)
    np.testing.assert_array_equal(sc.inverse_transform(X), X)
    assert sc.transform(X.astype(np.float32)).dtype == np.float32
    plain = Standardizer().fit(X)  # without auto the same data are standardized
    assert plain.applied_ is True and plain.decision_ == "on"
    assert not np.allclose(plain.transform(X), X)


def test_auto_standardizes_mixed_scales_as_true_does():
    X = mixed()
    sc = Standardizer(auto=True).fit(X)
    assert sc.applied_ is True and sc.decision_.startswith("auto -> on (columns on different scales")
    np.testing.assert_array_equal(sc.transform(X), Standardizer().fit(X).transform(X))


def test_auto_must_be_boolean():
    with pytest.raises(ValueError, match="'auto' parameter of Standardizer must be an instance of 'bool'"):
        Standardizer(auto="yes").fit(pixels())


@pytest.mark.parametrize("rows", [lambda x: x.view(GenericRows), xps.asarray], ids=["generic", "strict"])
def test_extrema_and_auto_on_rows_in_another_namespace_equal_numpys(rows):
    X = pixels(n=257)
    # the numpy path sums in sub-blocks (Chan's update), the device's in one: equal to rounding;
    # the extrema (the last 2 d entries) exactly
    got, want = moments_chunk(rows(X), extrema=True), moments_chunk(X, extrema=True)
    d = X.shape[1]
    np.testing.assert_allclose(got[:-2 * d], want[:-2 * d], rtol=1e-12)
    np.testing.assert_array_equal(got[-2 * d:], want[-2 * d:])
    assert moments_chunk(rows(X[:0]), extrema=True).shape == moments_chunk(X[:0], extrema=True).shape
    sc = Standardizer(auto=True).fit(X)
    got = sc._block(rows(X))
    assert array_namespace(got) is array_namespace(rows(X))
    np.testing.assert_array_equal(to_host(got), X)
