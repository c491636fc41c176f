"""Symmetric blocks of a flat vector as their upper triangles (rfstream.triangles), and the
Gram pass's partials travelling so through the reduction tree (rfstream.reductions.sum_rows)."""
import dask
import dask.array as da
import numpy as np
import pytest

from rfstream.reductions import sum_rows, whole_sum
from rfstream.triangles import pack, packed_size, unpack


def _symmetric(rng, count, d):
    a = rng.normal(size=(count, d, d))
    return a + a.transpose(0, 2, 1)


def _vector(rng):
    """[3 numbers, 2 symmetric 4x4, 5 numbers, 1 symmetric 3x3, 2 numbers] and its spans."""
    parts = [rng.normal(size=3), _symmetric(rng, 2, 4).ravel(), rng.normal(size=5),
             _symmetric(rng, 1, 3).ravel(), rng.normal(size=2)]
    return np.concatenate(parts), [(3, 2, 4), (3 + 32 + 5, 1, 3)]


def test_pack_keeps_each_upper_triangle_row_by_row_and_unpack_mirrors_it():
    flat, spans = _vector(np.random.default_rng(0))
    packed = pack(flat, spans)
    assert packed.size == packed_size(flat.size, spans) == flat.size - 2 * 6 - 3
    first = flat[3:19].reshape(4, 4)
    np.testing.assert_array_equal(packed[:3], flat[:3])
    np.testing.assert_array_equal(packed[3:13], first[np.triu_indices(4)])  # rows of the triangle in order
    np.testing.assert_array_equal(unpack(packed, spans, flat.size), flat)  # bit for bit


def test_unpack_refuses_what_pack_did_not_make():
    flat, spans = _vector(np.random.default_rng(1))
    packed = pack(flat, spans)
    assert unpack(packed[:-1], spans, flat.size) is None  # a number short
    assert unpack(packed, [(3, 2, 4)], flat.size) is None  # other spans: another length
    assert unpack(packed, list(reversed(spans)), flat.size) is None  # out of order
    assert unpack(packed, [(3, 2, 4), (40, 1, 3)], flat.size - 1) is None  # a span past the end


def _gram_partials(x, offset):
    """[rows, x'x (symmetric, by SYRK), column sums]: a Gram pass's shape."""
    return np.concatenate([[x.shape[0]], (x.T @ x).ravel(), x.sum(axis=0)])


@pytest.mark.parametrize("chunks", [1000, 300])
def test_triangles_travel_through_the_tree_and_come_back_whole(chunks):
    x = np.random.default_rng(2).normal(size=(1000, 6)).astype(np.float32)
    size, spans = 1 + 36 + 6, [(1, 1, 6)]
    plain = sum_rows(_gram_partials, size, da.from_array(x, chunks=(chunks, 6)))
    lazy = sum_rows(_gram_partials, size, da.from_array(x, chunks=(chunks, 6)), symmetric=spans)
    several = chunks < 1000
    # over several blocks the partials are their triangles (a block alone is its own sum: kept whole)
    assert lazy.shape == ((packed_size(size, spans),) if several else (size,))
    with dask.config.set(scheduler="sync"):
        got, want = whole_sum(lazy.compute(), size, spans), plain.compute()
    np.testing.assert_array_equal(got, want)  # the same adds, in the same order
    with pytest.raises(ValueError, match="neither 43 nor their packed triangles"):
        whole_sum(np.zeros(20), size, spans)
