"""Prefix maps (rfstream.features.prefix): the map of n components inside a fitted larger map,
and component_sizes (an n_components that may be a list)."""
import dask.array as da
import numpy as np
import pytest

from rfstream import load_model, save_model
from rfstream.catalog import FEATURES
from rfstream.datadriven import NystroemFeatures
from rfstream.features import (
    ArcCosineFeatures,
    CirculantFeatures,
    CompactRandomFeatures,
    FastfoodFeatures,
    FourierBinningFeatures,
    RandomBinningFeatures,
    RandomFourierFeatures,
)
from rfstream.features.arccos import arccos_kernel
from rfstream.features.width import component_sizes
from rfstream.kernels import kernel_matrix

X = np.random.default_rng(0).normal(size=(24, 3)) / 2

# (name, make(n, seed), valid sizes of a 12-column map, refused sizes)
MAPS = [
    ("rff-mc-cos", lambda n, s: RandomFourierFeatures(n, random_state=s), [1, 5, 12], [0, 13]),
    ("rff-mc-cossin", lambda n, s: RandomFourierFeatures(n, variant="cossin", random_state=s),
     [2, 6, 12], [5, 14]),
    ("rff-qmc", lambda n, s: RandomFourierFeatures(n, sampler="qmc", random_state=s), [3, 8], [13]),
    ("rff-orthogonal-cossin", lambda n, s: RandomFourierFeatures(
        n, sampler="orthogonal", variant="cossin", random_state=s), [2, 4, 6, 10], [3, 7]),
    ("rff-orthogonal-cos", lambda n, s: RandomFourierFeatures(n, sampler="orthogonal", random_state=s),
     [3, 5, 9], [20]),
    ("circulant", lambda n, s: CirculantFeatures(n, random_state=s), [1, 3, 5, 12], [13]),
    ("fastfood", lambda n, s: FastfoodFeatures(n, random_state=s), [1, 4, 7, 12], [13]),
    ("arccos0", lambda n, s: ArcCosineFeatures(n, degree=0, random_state=s), [1, 6], [13]),
    ("arccos1", lambda n, s: ArcCosineFeatures(n, degree=1, random_state=s), [2, 11], [13]),
    ("arccos2", lambda n, s: ArcCosineFeatures(n, degree=2, random_state=s), [4], [0]),
]
IDS = [m[0] for m in MAPS]


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("name, make, sizes, bad", MAPS, ids=IDS)
def test_prefix_map_is_the_scaled_columns_numpy_and_dask(name, make, sizes, bad):
    fmap = make(12, 7).fit(X)
    assert fmap.prefix_valid
    Z, Xd = fmap.transform(X), da.from_array(X, chunks=(10, 3))
    weights = {k: v.copy() for k, v in vars(fmap).items() if isinstance(v, np.ndarray)}
    for n in sizes:
        cols, scale = fmap.prefix_columns(n), fmap.prefix_scale(n)
        assert cols.dtype.kind == "i" and cols.size == n and np.all(np.diff(cols) > 0)
        assert scale == pytest.approx(np.sqrt(12 / n))
        sub = fmap.with_components(n)
        assert sub.get_params()["n_components"] == n and sub._n_features_out == n
        if "cossin" not in name:
            assert cols.tolist() == list(range(n))
        close(sub.transform(X), scale * Z[:, cols])
        close(sub.transform(Xd).compute(), scale * fmap.transform(Xd)[:, cols].compute())
        assert sub.transform(Xd).compute().dtype == Z.dtype
    # the original is unchanged: parameters and output
    assert all(np.array_equal(getattr(fmap, k), v) for k, v in weights.items())
    np.testing.assert_array_equal(fmap.transform(X), Z)


def test_rff_cossin_keeps_each_cosine_with_its_sine():
    fmap = RandomFourierFeatures(12, variant="cossin", random_state=0).fit(X)
    assert fmap.prefix_columns(4).tolist() == [0, 1, 6, 7]
    sub = fmap.with_components(4)
    np.testing.assert_array_equal(sub.random_weights_, fmap.random_weights_[:, :2])


@pytest.mark.parametrize("params", [dict(sampler="qmc"), dict(sampler="qmc", variant="cossin"),
                                    dict(sampler="orthogonal", variant="cossin")])
def test_qmc_and_orthogonal_prefixes_are_the_smaller_fit_of_the_same_seed(params):
    """The Sobol prefix, and whole orthogonal blocks plus the first columns of the next (Yu et
    al. 2016; d = 3 here, so n = 8 cuts a block), are what a fit of n draws, bit for bit."""
    big = RandomFourierFeatures(16, random_state=5, **params).fit(X)
    for n in (2, 6, 8):
        fresh = RandomFourierFeatures(n, random_state=5, **params).fit(X)
        np.testing.assert_array_equal(big.with_components(n).transform(X), fresh.transform(X))


@pytest.mark.parametrize("name, make, sizes, bad", MAPS, ids=IDS)
def test_refused_sizes_are_one_line(name, make, sizes, bad):
    fmap = make(12, 0).fit(X)
    for n in [*bad, 2.0, True, "4"]:
        for call in (fmap.prefix_columns, fmap.with_components, fmap.prefix_scale):
            with pytest.raises(ValueError, match=rf"^{type(fmap).__name__} fitted with 12 columns") as e:
                call(n)
            assert "\n" not in str(e.value) and f"n={n!r}" in str(e.value)


def kernel_of(fmap, A):
    if isinstance(fmap, ArcCosineFeatures):
        return arccos_kernel(A, degree=fmap.degree)
    return kernel_matrix(A, None, "gaussian", fmap.gamma_)


@pytest.mark.parametrize("name, make, sizes, bad", MAPS, ids=IDS)
def test_prefix_map_approximates_the_kernel_like_a_fresh_map(name, make, sizes, bad):
    """mean |Z Z' - K| of the 32-prefix of a 128-map is that of a fresh 32-map (loosely), and its
    scale is the kernel's (trace of Z Z' over trace of K near 1); the bare columns, without
    prefix_scale, estimate a quarter of the kernel."""
    n, errors, traces = 32, {"prefix": [], "fresh": []}, {"prefix": 0.0, "bare": 0.0, "K": 0.0}
    A = X[:16]
    for seed in range(8):
        big = make(128, seed).fit(A)
        K = kernel_of(big, A)
        Zp = big.with_components(n).transform(A).astype(np.float64)
        Zf = make(n, 100 + seed).fit(A).transform(A).astype(np.float64)
        Zb = big.transform(A)[:, big.prefix_columns(n)].astype(np.float64)
        errors["prefix"].append(np.abs(Zp @ Zp.T - K).mean())
        errors["fresh"].append(np.abs(Zf @ Zf.T - K).mean())
        traces["prefix"] += (Zp * Zp).sum()
        traces["bare"] += (Zb * Zb).sum()
        traces["K"] += np.trace(K)
    prefix, fresh = np.mean(errors["prefix"]), np.mean(errors["fresh"])
    assert prefix < 1.6 * fresh and fresh < 1.6 * prefix, errors
    assert 0.75 < traces["prefix"] / traces["K"] < 1.33, traces
    assert 0.15 < traces["bare"] / traces["K"] < 0.35, traces


def test_a_prefix_map_saves_loads_and_refits_as_any_map(tmp_path):
    for fmap in (RandomFourierFeatures(12, variant="cossin", random_state=1).fit(X),
                 CirculantFeatures(12, random_state=1).fit(X), ArcCosineFeatures(12, random_state=1).fit(X)):
        sub = fmap.with_components(6)
        path = tmp_path / type(fmap).__name__
        save_model(sub, path)
        loaded = load_model(path)
        assert loaded.get_params() == sub.get_params()
        np.testing.assert_array_equal(loaded.transform(X), sub.transform(X))
        assert loaded.with_components(2).transform(X).shape == (24, 2)  # a loaded map has prefixes too
        assert sub.fit(X).transform(X).shape == (24, 6)


def test_gamma_grid_prefix_after_and_before_select_gamma():
    grid = RandomFourierFeatures(12, gamma=[0.5, 1.0, 2.0], random_state=3).fit(X)
    stacked = grid.transform(X).compute()
    sub = grid.with_components(4)
    np.testing.assert_array_equal(grid.transform(X).compute(), stacked)  # the original keeps its grid
    scale = grid.prefix_scale(4)
    close(sub.transform(X).compute(), scale * stacked[:, [g * 12 + c for g in range(3) for c in range(4)]])
    grid.select_gamma(2)
    chosen = grid.with_components(4)
    assert chosen.gamma_ == 2.0 and chosen.n_components == 4
    close(chosen.transform(X), scale * grid.transform(X)[:, :4])
    sub.select_gamma(2)
    np.testing.assert_array_equal(sub.transform(X), chosen.transform(X))


@pytest.mark.parametrize("fmap", [RandomBinningFeatures(n_grids=4, n_bins=8, random_state=0),
                                  NystroemFeatures(8, random_state=0)], ids=["binning", "nystroem"])
def test_maps_without_prefixes_refuse_in_one_line_fitted_or_not(fmap):
    assert not fmap.prefix_valid
    for state in (fmap, fmap.fit(X)):
        for call in (state.prefix_columns, state.with_components, state.prefix_scale):
            with pytest.raises(ValueError, match=rf"^{type(fmap).__name__} cannot give a prefix") as e:
                call(4)
            assert "\n" not in str(e.value) and "n=4" in str(e.value) and "fit one map per" in str(e.value)


def test_only_data_independent_draws_declare_prefixes():
    declared = {name: getattr(cls, "func", cls).prefix_valid for name, cls in FEATURES.items()}
    assert {name for name, valid in declared.items() if valid} == {"rff", "arccos", "circulant", "skewed-chi2"}
    for cls in (FastfoodFeatures,):
        assert cls.prefix_valid
    for cls in (CompactRandomFeatures, FourierBinningFeatures):
        with pytest.raises(ValueError, match="prefix_valid is False"):
            cls().prefix_columns(2)


def test_component_sizes():
    assert component_sizes(1000) == (1000,)
    assert component_sizes([2000, 500, 1000, 500]) == (500, 1000, 2000)
    assert component_sizes("500, 1000,2000") == (500, 1000, 2000)
    assert component_sizes((np.int64(3),)) == component_sizes(np.array([3])) == (3,)
    for bad, where in [("", "n_components "), ("500,,2000", "item 2"), ([], "empty"), ([4, 0], "item 2"),
                       ([1.5], "item 1"), (True, "n_components "), ("1e3", "n_components "), (None, ""),
                       ("-3", ""), (2.0, "")]:
        with pytest.raises(ValueError, match="n_components") as e:
            component_sizes(bad)
        assert where in str(e.value) and "\n" not in str(e.value)
