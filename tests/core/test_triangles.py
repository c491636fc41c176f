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


@pytest.mark.filterwarnings("ignore:Newton stopped after max_iter")  # three passes are enough to compare
def test_newton_hessians_and_kpca_covariance_travel_as_triangles_and_fit_the_same(monkeypatch):
    """The other passes with square partials: SGD's Newton solver (its Hessians) and kernel PCA's
    Gram route (Z'Z).  Over several blocks they send triangles, and the fits equal, bit for bit,
    the same fits with every square sent whole."""
    import rfstream.reductions as reductions
    from rfstream import KernelPCA, RandomFourierFeatures, StreamingSGDClassifier
    from rfstream.reductions import Layout

    rng = np.random.default_rng(3)
    X = rng.normal(size=(1200, 5)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.normal(size=1200) > 0).astype(int)
    Xd, yd = da.from_array(X, chunks=300), da.from_array(y, chunks=300)

    def fits():
        fmap = RandomFourierFeatures(40, gamma=0.3, random_state=0).fit(Xd)
        with dask.config.set(scheduler="sync"):
            newton = StreamingSGDClassifier(solver="newton", loss="hinge", max_iter=3).fit(fmap.transform(Xd), yd)
            kpca = KernelPCA(3, features=RandomFourierFeatures(40, gamma=0.3, random_state=0), method="gram").fit(Xd)
        return newton.coef_, np.asarray(kpca.transform(X[:50]))

    sent = []
    real_pack = reductions.pack
    monkeypatch.setattr(reductions, "pack", lambda flat, spans: sent.append(spans) or real_pack(flat, spans))
    packed = fits()
    sizes = {d for spans in sent for _, _, d in spans}
    assert sizes == {41, 40}  # Newton's (D + 1)-square Hessians and kernel PCA's D x D covariance
    monkeypatch.setattr(Layout, "square_spans", lambda self, *names, base=0: [])
    for got, want in zip(packed, fits()):
        np.testing.assert_array_equal(got, want)


def test_the_leverage_pilot_gram_travels_as_its_triangle(monkeypatch):
    """Nystroem leverage's pilot pass (``Z'Z`` of the pilot features): over three blocks it sends
    its triangle, and equals the same sums made eagerly, block after block, in the same order."""
    import rfstream.reductions as reductions
    from rfstream.datadriven.leverage import pilot_gram, pilot_map

    X = np.random.default_rng(4).normal(size=(900, 4))
    pilot = pilot_map(4, 64, "gaussian", 0.5, np.random.default_rng(0)).fit(X[:10])
    sent = []
    real_pack = reductions.pack
    monkeypatch.setattr(reductions, "pack", lambda flat, spans: sent.append(spans) or real_pack(flat, spans))
    with dask.config.set(scheduler="sync"):
        G = pilot_gram(da.from_array(X, chunks=300), pilot)
    assert len(sent) == 3 and sent[0] == ((0, 1, 256),)
    monkeypatch.setattr(reductions, "NUMPY_BLOCK", 300)  # numpy rows: the same three blocks, added in turn
    np.testing.assert_array_equal(G, pilot_gram(X, pilot))
    np.testing.assert_array_equal(G, G.T)
