"""Every read of the data goes through ``rfstream.cluster.compute``, and each run keeps its own count.

The door matters because what passes through it is counted in progress and stored in
a checkpoint: a read that bypasses it (``.compute()`` on a dask array) is neither
shown nor replayed on resume.  The test counts the chunk reads of a Zarr dataset's
store and checks that each one happens while ``compute`` runs a pass.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest
import zarr

from rfstream import catalog, cluster, pipeline
from rfstream.cluster import compute, connect, run_context
from rfstream.io import open_dataset, write_dataset

_INSIDE = threading.local()
_STATE = {"inside": 0, "lock": threading.Lock()}


@pytest.fixture
def counted_reads(monkeypatch):
    """``reads``: ``(key, inside a compute)`` of every chunk read of a local Zarr store."""
    reads = []
    original_get = zarr.storage.LocalStore.get
    original_blas = cluster.one_blas_thread_per_task

    async def get(self, key, *args, **kwargs):
        if "/c/" in key or key.startswith("c/"):  # a chunk, not metadata
            reads.append((key, _STATE["inside"] > 0))
        return await original_get(self, key, *args, **kwargs)

    @contextlib.contextmanager
    def inside_compute(collections=()):
        # runs around dask.compute in cluster.compute (threads), and nowhere else
        with _STATE["lock"]:
            _STATE["inside"] += 1
        try:
            with original_blas(collections):
                yield
        finally:
            with _STATE["lock"]:
                _STATE["inside"] -= 1

    monkeypatch.setattr(zarr.storage.LocalStore, "get", get)
    monkeypatch.setattr(cluster, "one_blas_thread_per_task", inside_compute)
    return reads


@pytest.fixture
def labelled(tmp_path):
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(1200, 4)))  # non-negative: the chi-squared maps take histograms
    y = (X[:, 0] > X[:, 1]).astype(np.int64)
    write_dataset(tmp_path / "d.zarr", X, y, rows_per_chunk=300)
    return tmp_path / "d.zarr"


#: small settings of every registered map (the data-driven ones make their own passes)
SMALL = {"rff": {"n_components": 32, "alpha": [0.1, 1.0]},  # moments, auto's sample, 2 ridge passes
         "ses": {"n_components": 16, "n_pairs": 256}, "nystroem": {"n_components": 24},
         "tefm-g": {"n_components": 8, "n_random_features": 32}, "tefm-s": {"n_components": 8},
         "eerf": {"n_components": 8, "n_candidates": 32}, "lkrf": {"n_components": 8, "n_candidates": 32},
         "cnm": {"n_components": 16}, "binning": {"n_grids": 4, "n_bins": 16},
         "rff+binning": {"n_components": 16, "n_grids": 4}, "arccos": {"n_components": 16},
         "circulant": {"n_components": 16}, "polysketch": {"n_components": 16, "degree": 2},
         # histograms: the labelled rows' absolute values, not standardized (labelled fixture)
         "chi2": {"standardize": False}, "skewed-chi2": {"n_components": 16, "standardize": False}}


def test_every_registered_map_is_covered():
    assert set(SMALL) == set(catalog.FEATURES)


@pytest.mark.parametrize("features, params", sorted(SMALL.items()))
def test_every_read_of_a_fit_goes_through_compute(labelled, counted_reads, features, params):
    with connect("threads"):
        pipeline.fit_dataset(labelled, features=features, **{"alpha": 1.0, "gamma": "auto", **params})
    assert counted_reads, "the fit read no chunk: the counter is broken"
    outside = sorted({key for key, inside in counted_reads if not inside})
    assert not outside, f"chunks read outside rfstream.cluster.compute: {outside}"


def test_the_counter_sees_a_read_outside_the_door(labelled, counted_reads):
    # the check itself can fail: a bare .compute() is caught
    X, _ = open_dataset(labelled)
    with connect("threads"):
        X[:10].compute()
    assert any(not inside for _, inside in counted_reads)


def test_two_runs_in_one_process_count_their_own_passes():
    import dask.array as da

    X = da.ones((1000, 3), chunks=(250, 3))
    barrier = threading.Barrier(2)
    counts = {}

    def run(name, passes):
        with run_context(progress="never") as ctx:
            barrier.wait(timeout=60)  # both runs are open at once
            for _ in range(passes):
                compute(X.sum())
            barrier.wait(timeout=60)  # both are still open after both have counted
            counts[name] = ctx.passes

    with connect("threads"):
        threads = [threading.Thread(target=run, args=("a", 2)), threading.Thread(target=run, args=("b", 5))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert counts == {"a": 2, "b": 5}
    assert cluster.current_run() is None  # nothing leaks into the caller's context


def test_a_run_numbers_its_passes_from_one(capsys):
    import dask.array as da

    X = da.ones((100, 2), chunks=(50, 2))
    with connect("threads"):
        with run_context(progress="auto"):
            compute(X.sum())
        with run_context(progress="auto") as second:
            compute(X.sum())
            compute(X.sum())
    err = capsys.readouterr().err
    assert second.passes == 2
    assert err.count("rfstream: pass 1 done") == 2 and err.count("rfstream: pass 2 done") == 1


# ------------------------------------------------------------------ the feature source
def _fit_ridge(Z, y):
    from rfstream.solvers import StreamingRidgeClassifier

    return StreamingRidgeClassifier(alpha=1.0).fit(Z, y)


def test_rechunk_or_astype_of_features_gives_the_same_model():
    """``Z.rechunk(...)``/``Z.astype(...)`` lose the fused source and fall back to the stored
    blocks: the same model (the Gram summed in another grouping: float32 features, so
    agreement to a few float32 ulps of the coefficients)."""
    import dask.array as da

    from rfstream.features import RandomFourierFeatures, feature_source

    rng = np.random.default_rng(5)
    Xn = rng.normal(size=(900, 3))
    yn = (Xn[:, 0] * Xn[:, 2] > 0).astype(np.int64)
    X, y = da.from_array(Xn, chunks=(300, 3)), da.from_array(yn, chunks=300)
    Z = RandomFourierFeatures(24, gamma=0.5, random_state=0).fit(X).transform(X)
    assert feature_source(Z) is not None
    reference = _fit_ridge(Z, y).coef_
    with connect("threads"):
        paths = []
        for derived in (Z.rechunk({0: 450}), Z.astype(np.float64), Z[:, :], Z[:, :12]):
            paths.append(feature_source(derived) is not None)  # fused path kept, or the stored blocks
            coef = _fit_ridge(derived, y.rechunk(derived.chunks[0])).coef_
            if derived.shape[1] == Z.shape[1]:
                np.testing.assert_allclose(coef, reference, rtol=0, atol=1e-5 * np.abs(reference).max())
            else:  # a slice of the columns: the model of those columns, from their stored blocks
                np.testing.assert_allclose(coef, _fit_ridge(np.asarray(Z)[:, :12], yn).coef_, rtol=0,
                                           atol=1e-5 * np.abs(coef).max())
        assert paths == [False, False, True, False]  # only the no-op slice is Z itself


def test_a_grid_that_lost_its_source_is_refused_not_fitted():
    import dask.array as da

    from rfstream.features import RandomFourierFeatures

    rng = np.random.default_rng(6)
    X = da.from_array(rng.normal(size=(400, 3)), chunks=(200, 3))
    y = da.from_array((rng.normal(size=400) > 0).astype(np.int64), chunks=200)
    Z = RandomFourierFeatures(16, gamma=[0.5, 2.0], random_state=0).fit(X).transform(X)
    assert Z.shape[1] == 32  # both gammas side by side
    for derived in (Z.rechunk({0: 100}), Z.astype(np.float64), Z[:, :16]):
        with pytest.raises(ValueError, match="stacked features of a gamma grid"):
            _fit_ridge(derived, y.rechunk(derived.chunks[0]))
