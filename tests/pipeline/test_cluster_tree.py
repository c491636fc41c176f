"""A fit by address on `dask scheduler` / `dask worker` processes equals the threads scheduler's,
and its Gram pass is reduced by the tree that docs/scaling.md models for its row blocks."""
from functools import partial

import dask
import numpy as np
import pytest
from distributed import Client
from helpers.services import dask_cluster

from rfstream.cluster import connect
from rfstream.datasets.synthetic import write_kdd_like
from rfstream.pipeline import fit_dataset
from rfstream.solvers.ridge.gram import gram_chunk

ROWS, ROWS_PER_CHUNK = 12288, 512  # 24 row blocks: a tree of more than one combine level
FIT = {"n_components": 64, "alpha": [0.1, 1.0], "random_state": 0, "progress": "never"}


def tree_levels(n_blocks, split_every):
    """The tasks of each level of dask's tree reduction of ``n_blocks`` partials, the root last
    (docs/scaling.md): ``L = ceil(log_s n_blocks)`` levels (at least one), each grouping
    ``split_every`` tasks of the level below."""
    depth, reach = 1, split_every
    while reach < n_blocks:  # the smallest L with s**L >= n_blocks, in integers
        depth, reach = depth + 1, reach * split_every
    widths, width = [], n_blocks
    for _ in range(depth - 1):
        width = -(-width // split_every)
        widths.append(width)
    return widths + [1]


def test_tree_levels():
    # one combine (the root) up to s blocks; each power of s past it adds a level
    assert tree_levels(4, 4) == [1]
    assert tree_levels(5, 4) == [2, 1]
    assert tree_levels(16, 4) == [4, 1]
    assert tree_levels(24, 4) == [6, 2, 1]
    assert tree_levels(1000, 2) == [500, 250, 125, 63, 32, 16, 8, 4, 2, 1]


def _chunk_function(collection):
    """The chunk function of a pass (the one-task layer holding it), unwrapped from its partials."""
    for layer in collection.__dask_graph__().layers.values():
        if len(layer) != 1:
            continue
        fn = next(iter(dict(layer).values()))
        fn = getattr(fn, "value", fn)
        while isinstance(fn, partial):
            spec = fn.keywords.get("spec")
            fn = getattr(spec, "chunk", None) or fn.keywords.get("chunk") or fn.func
        if callable(fn):
            return fn
    return None


@pytest.fixture(scope="module")
def blocks_zarr(tmp_path_factory):
    path = tmp_path_factory.mktemp("tree") / "kdd_like.zarr"
    write_kdd_like(path, ROWS, rows_per_chunk=ROWS_PER_CHUNK)
    return path


def _coef(model):
    solver = model.steps[-1][1]
    return np.asarray(solver.coef_), np.asarray(solver.intercept_)


def test_fit_by_address_equals_threads_and_its_gram_tree_is_modelled(blocks_zarr, tmp_path, monkeypatch):
    submitted = []
    compute = Client.compute

    def recording(self, collections, *args, **kwargs):
        submitted.extend(collections if isinstance(collections, (list, tuple)) else [collections])
        return compute(self, collections, *args, **kwargs)

    monkeypatch.setattr(Client, "compute", recording)
    with dask_cluster(tmp_path, 2) as (address, _, _), connect(address) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        on_cluster, _ = fit_dataset(str(blocks_zarr), **FIT)
    with connect("threads"):
        on_threads, _ = fit_dataset(str(blocks_zarr), **FIT)

    # the same graph and the same tree of float64 sums on one BLAS thread per task:
    # equal to float rounding of the client's solve
    (c1, i1), (c2, i2) = _coef(on_cluster), _coef(on_threads)
    scale = np.abs(c2).max()
    assert scale > 0
    np.testing.assert_allclose(c1, c2, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(i1, i2, rtol=0, atol=1e-6 * max(scale, np.abs(i2).max()))

    grams = [c for c in submitted if _chunk_function(c) is gram_chunk]
    assert len(grams) == 1, [getattr(_chunk_function(c), "__name__", None) for c in submitted]
    layers = grams[0].__dask_graph__().layers
    leaves = [len(layer) for name, layer in layers.items() if name.startswith("_apply_block-")]
    tree = sorted((len(layer) for name, layer in layers.items() if "-partial-" in name or "-aggregate-" in name),
                  reverse=True)
    assert leaves == [ROWS // ROWS_PER_CHUNK]
    # rfstream leaves the width to dask's split_every (4 unless configured)
    assert tree == tree_levels(leaves[0], dask.config.get("split_every", 4))
