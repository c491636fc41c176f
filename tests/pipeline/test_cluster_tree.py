"""A fit's Gram pass is reduced by the tree that docs/scaling.md models for its row blocks.

The graph is the same on every scheduler (a fit by address on worker processes equals the
embedded default's: tests/pipeline/test_cluster_processes.py), so it is read from a fit on threads."""
from functools import partial

import dask
import pytest

from rfstream import cluster
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


def test_the_gram_passs_tree_is_the_modelled_one(blocks_zarr, monkeypatch):
    submitted = []
    uncopied = cluster._uncopied  # every collection a local scheduler computes passes here

    def recording(collection):
        submitted.append(collection)
        return uncopied(collection)

    monkeypatch.setattr(cluster, "_uncopied", recording)
    with connect("threads"):
        fit_dataset(str(blocks_zarr), **FIT)
    grams = [c for c in submitted if _chunk_function(c) is gram_chunk]
    assert len(grams) == 1, [getattr(_chunk_function(c), "__name__", None) for c in submitted]
    layers = grams[0].__dask_graph__().layers
    leaves = [len(layer) for name, layer in layers.items() if name.startswith(("_apply_block-", "gram_chunk-"))]
    tree = sorted((len(layer) for name, layer in layers.items() if "-partial-" in name or "-aggregate-" in name),
                  reverse=True)
    assert leaves == [ROWS // ROWS_PER_CHUNK]
    # rfstream leaves the width to dask's split_every (4 unless configured)
    assert tree == tree_levels(leaves[0], dask.config.get("split_every", 4))
