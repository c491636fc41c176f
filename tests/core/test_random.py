"""Per-row randomness (rfstream.random): a function of (seed, stream, global row) only.

Whatever the chunking or the order in which rows are asked for, a row gets the same
numbers; streams and seeds are independent; every stream id is reserved in one place.
"""
import ast
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import rfstream.random as rnd
from rfstream.random import (
    STREAM_FOLDS,
    STREAM_SPLIT,
    VIRTUAL_BLOCK,
    check_seed,
    chunk_offsets,
    row_integers,
    row_normal,
    row_uniform,
    sample_row_indices,
    sample_rows,
)

STREAMS = {name: value for name, value in vars(rnd).items() if name.startswith("STREAM_")}


# ------------------------------------------------------------------ stream ids
def test_reserved_stream_ids_are_distinct_ints():
    assert len(STREAMS) >= 15  # split, folds, sample, SGD, TEFM, SES, EERF, CNM, synthetic
    assert all(isinstance(v, int) and v >= 0 for v in STREAMS.values())
    assert len(set(STREAMS.values())) == len(STREAMS), STREAMS


@pytest.mark.parametrize("prefix, low, high", [
    ("STREAM_TEFM_", 10, 19), ("STREAM_SRHT_", 10, 19), ("STREAM_SES_", 20, 29),
    ("STREAM_EERF_", 30, 39), ("STREAM_CNM_", 40, 49), ("STREAM_SYNTHETIC", 90, 99),
])
def test_each_method_draws_from_its_reserved_range(prefix, low, high):
    # the ranges documented in rfstream/random.py
    values = [v for name, v in STREAMS.items() if name.startswith(prefix)]
    assert values and all(low <= v <= high for v in values), (prefix, values)


def test_no_module_defines_a_stream_id_of_its_own():
    # every stream id lives in rfstream/random.py, so two methods cannot share one
    package = Path(rnd.__file__).parent
    own = []
    for path in package.rglob("*.py"):
        if path.name == "random.py" and path.parent == package:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                own += [f"{path.name}: {t.id}" for t in node.targets
                        if isinstance(t, ast.Name) and t.id.startswith("STREAM_")]
    assert not own, own


# ------------------------------------------------------------------ rows
@pytest.mark.parametrize("seed,stream", [(0, STREAM_SPLIT), (12345, STREAM_FOLDS)])
def test_row_uniform_independent_of_how_rows_are_requested(seed, stream):
    B = VIRTUAL_BLOCK
    n = 3 * B + 100
    whole = row_uniform(seed, stream, 0, n)
    assert whole.shape == (n,)
    cuts = [0, 1, B - 1, B, B + 1, 2 * B - 3, 2 * B + 5, 3 * B, n]
    pieces = np.concatenate([row_uniform(seed, stream, a, b) for a, b in zip(cuts[:-1], cuts[1:])])
    np.testing.assert_array_equal(pieces, whole)
    # any sub-range, including ones that straddle two or three virtual blocks
    for a, b in [(B - 10, B + 10), (5, 2 * B + 7), (2 * B, 2 * B + 1), (17, 17)]:
        np.testing.assert_array_equal(row_uniform(seed, stream, a, b), whole[a:b])
    assert np.all((whole >= 0) & (whole < 1))
    # uniform: mean 1/2 with std 1/sqrt(12 n) ~ 0.0025; 5 std
    assert abs(whole.mean() - 0.5) < 5 / np.sqrt(12 * n)


def test_row_uniform_is_the_documented_virtual_block():
    # virtual block b is default_rng([seed, stream, b]).random(VIRTUAL_BLOCK)
    b = 2
    expected = np.random.default_rng([9, STREAM_FOLDS, b]).random(VIRTUAL_BLOCK)
    np.testing.assert_array_equal(row_uniform(9, STREAM_FOLDS, b * VIRTUAL_BLOCK, (b + 1) * VIRTUAL_BLOCK),
                                  expected)


def test_row_uniform_on_dask_chunks_equals_one_call():
    # what a chunk function does: its rows from its global offset, for any chunking
    n = 2 * VIRTUAL_BLOCK + 321
    whole = row_uniform(4, STREAM_SPLIT, 0, n)
    for chunks in [(1000,), (VIRTUAL_BLOCK,), ((1, VIRTUAL_BLOCK, 0, n - VIRTUAL_BLOCK - 1),)]:
        X = da.zeros(n, chunks=chunks)
        got = X.map_blocks(
            lambda x, block_info=None: row_uniform(4, STREAM_SPLIT, *block_info[0]["array-location"][0]),
            dtype=float).compute()
        np.testing.assert_array_equal(got, whole)


def test_row_normal_independent_of_how_rows_are_requested():
    B, k = VIRTUAL_BLOCK, 3
    n = 2 * B + 50
    whole = row_normal(5, 10, 0, n, k)
    assert whole.shape == (n, k) and whole.dtype == np.float64
    cuts = [0, 7, B, B + 3, n]
    pieces = np.concatenate([row_normal(5, 10, a, b, k) for a, b in zip(cuts[:-1], cuts[1:])])
    np.testing.assert_array_equal(pieces, whole)
    assert row_normal(5, 10, 9, 9, k).shape == (0, k)
    assert row_normal(5, 10, 0, 10, k, dtype=np.float32).dtype == np.float32
    # standard normal: mean 0 (std 1/sqrt(n k) ~ 0.008) and variance 1 (std ~ 0.011); 5 std
    assert abs(whole.mean()) < 5 / np.sqrt(whole.size)
    assert abs(whole.var() - 1) < 5 * np.sqrt(2 / whole.size)
    assert not np.array_equal(whole, row_normal(6, 10, 0, n, k))


def test_row_streams_and_seeds_differ():
    a = row_uniform(0, STREAM_SPLIT, 0, 1000)
    assert not np.array_equal(a, row_uniform(0, STREAM_FOLDS, 0, 1000))
    assert not np.array_equal(a, row_uniform(1, STREAM_SPLIT, 0, 1000))
    # independent uniforms: correlation ~ N(0, 1/sqrt(1000)); 5 std = 0.16
    assert abs(np.corrcoef(a, row_uniform(0, STREAM_FOLDS, 0, 1000))[0, 1]) < 0.16


def test_row_integers_in_range_and_balanced():
    k = row_integers(3, STREAM_FOLDS, 100, 20_100, 5)
    assert k.min() == 0 and k.max() == 4
    # each fold holds Binomial(20000, 1/5) rows: std ~57, 5 std ~ 283
    counts = np.bincount(k, minlength=5)
    assert np.all(np.abs(counts - 4000) < 283)
    np.testing.assert_array_equal(k[50:60], row_integers(3, STREAM_FOLDS, 150, 160, 5))
    np.testing.assert_array_equal(k, np.floor(row_uniform(3, STREAM_FOLDS, 100, 20_100) * 5))


# ------------------------------------------------------------------ seeds, offsets, samples
def test_check_seed():
    assert check_seed(7) == 7 and check_seed(np.int64(7)) == 7
    a, b = check_seed(None), check_seed(None)
    assert a != b and 0 <= a < 2**63  # a fresh seed each time
    assert check_seed(np.random.default_rng(0)) == check_seed(np.random.default_rng(0))
    assert check_seed(np.random.RandomState(0)) == check_seed(np.random.RandomState(0))
    with pytest.raises(ValueError, match="random_state must be a non-negative int, None or a Generator; got -1"):
        check_seed(-1)
    with pytest.raises(TypeError, match="random_state must be None, .*; got str"):
        check_seed("0")
    with pytest.raises(TypeError, match="got bool"):
        check_seed(True)


def test_chunk_offsets():
    np.testing.assert_array_equal(chunk_offsets((3, 0, 5, 2)), [0, 3, 3, 8])
    assert chunk_offsets((4,)).tolist() == [0]
    assert chunk_offsets((3, 0, 5, 2)).dtype == np.int64


def test_sample_row_indices_and_rows():
    idx = sample_row_indices(10_000, 300, 5)
    assert idx.shape == (300,) and np.all(np.diff(idx) > 0)  # sorted and distinct
    assert idx.min() >= 0 and idx.max() < 10_000
    np.testing.assert_array_equal(idx, sample_row_indices(10_000, 300, 5))
    assert not np.array_equal(idx, sample_row_indices(10_000, 300, 6))
    np.testing.assert_array_equal(sample_row_indices(50, 300, 5), np.arange(50))  # all rows
    X = np.arange(20_000.0).reshape(10_000, 2)
    rows = sample_rows(X, 300, 5)
    np.testing.assert_array_equal(rows, X[idx])
    np.testing.assert_array_equal(sample_rows(da.from_array(X, chunks=(777, 2)), 300, 5), rows)
