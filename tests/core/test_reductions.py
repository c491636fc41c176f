"""Data passes as reductions (rfstream.reductions): sum_rows, moments, Layout, even chunks.

Every pass over the rows goes through :func:`sum_rows` (or :func:`moments`): the result
must be numpy's whatever the chunking (empty blocks included), the chunk function must
see each block's global row offset, and the partials of a combine step are added in
place without touching the blocks.
"""
import dask.array as da
import numpy as np
import pytest
import test_preprocess
from test_preprocess import CHUNKINGS, N, _rel

import rfstream.reductions as reductions
from rfstream.reductions import (
    Layout,
    _add_blocks,
    align_rows,
    block_partials,
    even_chunks,
    even_row_chunks,
    even_rows,
    moments,
    moments_chunk,
    moments_combine,
    sum_rows,
    unpack_moments,
)

X = test_preprocess.X  # the Standardizer tests' data (a fixture), for the moments as well


# ------------------------------------------------------------------ sum_rows
def _sums(x, y, offset):
    """Partials [rows, sum of global row indices, column sums of x, sum of y, sum x'y]."""
    rows = np.arange(offset, offset + x.shape[0])
    return np.concatenate([[x.shape[0], rows.sum()], x.sum(axis=0), [y.sum()], x.T @ y])


@pytest.mark.parametrize("chunks", CHUNKINGS, ids=str)
@pytest.mark.parametrize("split_every", [None, 2, 3])
def test_sum_rows_equals_numpy_sums_for_any_chunking(X, chunks, split_every):
    # float64 sums in another order: a few ulps of the largest partial (|x'y| ~ 1e5)
    y = np.random.default_rng(1).normal(size=N)
    expected = np.concatenate([[N, N * (N - 1) / 2], X.sum(axis=0), [y.sum()], X.T @ y])
    Xd = da.from_array(X, chunks=chunks + ((2, 2),))  # column chunks: merged for the function
    yd = da.from_array(y, chunks=250)  # other row chunks: aligned to X's
    lazy = sum_rows(_sums, 11, Xd, yd, split_every=split_every)
    assert isinstance(lazy, da.Array) and lazy.shape == (11,) and lazy.dtype == np.float64
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-12, atol=1e-9)
    # numpy input: the same chunk function over NUMPY_BLOCK-row slices, eagerly
    eager = sum_rows(_sums, 11, X, y)
    assert isinstance(eager, np.ndarray)
    np.testing.assert_allclose(eager, expected, rtol=1e-12, atol=1e-9)


def test_sum_rows_numpy_slices_and_blocks(monkeypatch):
    # NUMPY_BLOCK = 7 rows: 35 rows are 5 slices with offsets 0, 7, ..., 28
    monkeypatch.setattr(reductions, "NUMPY_BLOCK", 7)
    Xn = np.arange(70.0).reshape(35, 2)

    def fn(x, offset):
        return np.array([x.shape[0], offset, x[:, 0].sum()])

    np.testing.assert_array_equal(sum_rows(fn, 3, Xn), [35, 0 + 7 + 14 + 21 + 28, Xn[:, 0].sum()])
    # blocks= keeps those slices only (the others are never read)
    np.testing.assert_array_equal(sum_rows(fn, 3, Xn, blocks=[1, 4]), [14, 35, Xn[7:14, 0].sum() + Xn[28:, 0].sum()])
    np.testing.assert_array_equal(sum_rows(fn, 3, np.zeros((0, 2))), [0, 0, 0])  # no rows: zeros


def test_sum_of_partials_adds_in_place_without_touching_the_blocks():
    Xn = np.arange(70.0).reshape(35, 2)
    X = da.from_array(Xn, chunks=(4, 2))  # 9 blocks

    def fn(x, offset):
        return np.concatenate([[x.shape[0], offset], x.sum(axis=0)])

    expected = np.array([35.0, sum(range(0, 35, 4)), *Xn.sum(axis=0)])
    for split_every in (None, 2, 3, 9):
        np.testing.assert_array_equal(sum_rows(fn, 4, X, split_every=split_every).compute(), expected)
    np.testing.assert_array_equal(sum_rows(fn, 4, X, blocks=[1, 8]).compute(), [4 + 3, 4 + 32, 242, 249])
    blocks = [np.ones((1, 3)), np.full((1, 3), 2.0), [np.full((1, 3), 3.0)]]
    assert _add_blocks(blocks).tolist() == [[6.0, 6.0, 6.0]]
    assert _add_blocks(blocks, keepdims=False).tolist() == [6.0, 6.0, 6.0]
    assert blocks[0].tolist() == [[1.0, 1.0, 1.0]] and blocks[1].tolist() == [[2.0, 2.0, 2.0]]
    single = np.ones((1, 2))  # one partial is its own sum: no copy
    assert _add_blocks([single]) is single and np.shares_memory(_add_blocks([[single]], keepdims=False), single)
    assert _add_blocks([single], keepdims=False).shape == (2,)


def test_block_partials_one_row_per_block_and_shape_check():
    X = da.from_array(np.ones((10, 3)), chunks=(4, 3))
    parts = block_partials(lambda x, offset: np.array([offset, x.shape[0]], dtype=float), 2, X)
    assert parts.shape == (3, 2) and parts.chunks == ((1, 1, 1), (2,))
    np.testing.assert_array_equal(parts.compute(), [[0, 4], [4, 4], [8, 2]])
    bad = block_partials(lambda x, offset: np.zeros(3), 2, X)
    with pytest.raises(RuntimeError, match=r"chunk function returned shape \(3,\), expected \(2,\)"):
        bad.compute()


def test_align_rows():
    X = da.zeros((10, 4), chunks=(3, 2))
    y = da.zeros(10, chunks=5)
    Y = da.zeros((10, 3), chunks=(5, 1))
    Xa, ya, none, Ya = align_rows(X, y, None, Y)
    assert Xa.chunks == ((3, 3, 3, 1), (4,))
    assert ya.chunks == ((3, 3, 3, 1),) and none is None
    assert Ya.chunks == ((3, 3, 3, 1), (3,))


# ------------------------------------------------------------------ even chunks
@pytest.mark.parametrize("n, k", [(10, 4), (494_021, 8), (7, 7), (0, 3), (5, 1), (3, 5)])
def test_even_chunks(n, k):
    sizes = even_chunks(n, k)
    assert len(sizes) == k and sum(sizes) == n
    assert max(sizes) - min(sizes) <= 1
    assert list(sizes) == sorted(sizes, reverse=True)  # the larger first


def test_even_row_chunks():
    # KDD99: 494,021 rows in blocks of 65,536, the last one about half full -> 8 equal blocks
    kdd = (65536,) * 7 + (35269,)
    even = even_row_chunks(kdd)
    assert len(even) == 8 and sum(even) == sum(kdd) and max(even) - min(even) <= 1
    assert max(even) <= 65536  # none larger than before
    assert even_row_chunks((100,) * 8) == (100,) * 8  # already equal
    assert even_row_chunks((100,) * 7 + (97,)) == (100,) * 7 + (97,)  # short by < 5%
    assert even_row_chunks((100,)) == (100,)  # one block
    assert even_row_chunks((100, 100, 40), tolerance=0.5) == (100, 100, 40)
    assert even_row_chunks((3, 3, 3, 1)) == (3, 3, 2, 2)
    unknown = (np.nan, np.nan)
    assert even_row_chunks(unknown) is not None and np.isnan(even_row_chunks(unknown)).all()


def test_even_rows_evens_out_a_short_last_block():
    kdd = da.zeros((7 * 65536 + 35269, 3), chunks=(65536, 3))  # KDD99's 494,021 rows
    even = even_rows(kdd)
    assert len(even.chunks[0]) == 8 and max(even.chunks[0]) - min(even.chunks[0]) <= 8
    assert sum(even.chunks[0]) == kdd.shape[0]
    for X in [da.zeros((8 * 100, 3), chunks=(100, 3)), da.zeros((100, 3), chunks=(100, 3)),
              da.zeros((8 * 100 - 3, 3), chunks=(100, 3))]:
        assert even_rows(X) is X  # equal blocks, one block, a last block short by less than 5%
    small = even_rows(da.zeros((10, 3), chunks=(3, 3)))  # 3, 3, 3, 1 -> 3, 3, 2, 2
    assert small.chunks[0] == (3, 3, 2, 2)


# ----------------------------------------------------------------- moments / Layout
@pytest.mark.parametrize("chunks", CHUNKINGS, ids=str)
@pytest.mark.parametrize("split_every", [None, 2])
def test_moments_equal_numpy(X, chunks, split_every):
    # Chan's pairwise combine is exact in exact arithmetic; in float64 the
    # difference from numpy's two-pass mean/var is a few ulps: 1e-12 relative.
    Xd = da.from_array(X, chunks=chunks + ((4,),))
    n, mean, var = unpack_moments(moments(Xd, split_every=split_every).compute())
    assert n == N
    assert _rel(mean, X.mean(axis=0)) < 1e-12
    assert _rel(var, X.var(axis=0)) < 1e-12
    n_np, mean_np, var_np = unpack_moments(moments(X))
    assert n_np == N
    assert _rel(mean_np, X.mean(axis=0)) < 1e-12
    assert _rel(var_np, X.var(axis=0)) < 1e-12


def test_moments_combine_is_chan_golub_leveque():
    # combining the partials of two halves gives the partials of the whole, an
    # empty block changes nothing, and a large mean does not cost precision
    rng = np.random.default_rng(3)
    x = 1e6 + rng.normal(size=(1000, 2))
    whole = moments_chunk(x)
    parts = np.vstack([moments_chunk(x[:300]), moments_chunk(x[:0]), moments_chunk(x[300:])])
    combined = moments_combine(parts, keepdims=False)
    # each x - mean is exact to ~1e6 eps = 2e-10 (the two means differ by ulps), so
    # M2 ~ 1e3 carries ~1e-8 of rounding: 1e-9 relative.  E[x^2] - E[x]^2 would lose
    # 1e-4 of it (tests/core/test_preprocess.py::test_standardizer_large_offset_keeps_precision)
    np.testing.assert_allclose(combined, whole, rtol=1e-9)
    assert moments_combine(parts).shape == (1, 5)
    np.testing.assert_array_equal(moments_combine(np.vstack([moments_chunk(x[:0])] * 2), keepdims=False),
                                  np.zeros(5))


def test_moments_chunk_in_sub_blocks_is_the_float64_moments():
    # a float32 block of more rows than MOMENTS_SUB_BLOCK (a short last sub-block too), its
    # mean far from zero: the sub-blocks' float64 moments merged by Chan's update equal numpy's
    # two-pass ones on the float64 copy to a few ulps (1e-12 relative), as the merge of blocks does
    from rfstream.reductions import MOMENTS_SUB_BLOCK

    rng = np.random.default_rng(4)
    m = 2 * MOMENTS_SUB_BLOCK + 77
    x = (1e3 + rng.normal(size=(m, 3))).astype(np.float32)
    x64 = x.astype(np.float64)
    got = moments_chunk(x)
    assert got[0] == m
    assert _rel(got[1:4], x64.mean(axis=0)) < 1e-12
    assert _rel(got[4:], ((x64 - x64.mean(axis=0)) ** 2).sum(axis=0)) < 1e-12
    assert np.isnan(moments_chunk(np.array([[np.inf], [1.0]], dtype=np.float32))[2])  # reported by the caller


def test_layout_pack_unpack_round_trip():
    lay = Layout(n=(), s=(3,), t=(2, 1), g=(3, 3), k=(2, 3, 3))
    assert lay.size == 1 + 3 + 2 + 9 + 18
    # the slices tile [0, size) without gaps or overlaps, in declaration order
    starts = [lay.slices[k].start for k in lay.shapes]
    stops = [lay.slices[k].stop for k in lay.shapes]
    assert starts[0] == 0 and stops[-1] == lay.size and starts[1:] == stops[:-1]
    rng = np.random.default_rng(0)
    values = {k: rng.normal(size=s) for k, s in lay.shapes.items()}
    vec = lay.empty()
    assert vec.dtype == np.float64 and not vec.any()
    for k, v in lay.unpack(vec).items():
        v[...] = values[k]  # views write through into the packed vector
    np.testing.assert_array_equal(vec, np.concatenate([values[k].ravel() for k in lay.shapes]))
    for k, v in lay.unpack(vec).items():
        assert v.shape == lay.shapes[k]
        np.testing.assert_array_equal(v, values[k])
    # a sum of packed vectors is the sum of every partial
    out = lay.unpack(vec + vec)
    for k in lay.shapes:
        np.testing.assert_array_equal(out[k], 2 * values[k])
