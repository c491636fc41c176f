"""The PCG statistics pass (:func:`rfstream.solvers.ridge.cg.stats_chunk`) sums a dense block in
float64 a few columns at a time: the same numbers as the float64 copy of the whole block,
without that copy (issue 32: the workers' peak at D = 50,000)."""
import numpy as np
import pytest
import scipy.sparse as sp

from rfstream.reductions import Layout
from rfstream.solvers.ridge import cg
from rfstream.solvers.ridge import cg as cg_stats
from rfstream.solvers.passes import RowSpec


def _whole_block_stats(z, Y, c):
    """The sums in float64 from one copy of the block (the former computation)."""
    z = z.astype(np.float64)
    c = np.ones(len(z)) if c is None else c
    return {"n": c.sum(), "m": len(z), "s": z.T @ c, "d": (z * z).T @ c, "t": c @ Y, "C": z.T @ (c[:, None] * Y)}


@pytest.mark.parametrize("diagonal", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_column_slices_give_the_whole_blocks_sums(monkeypatch, weighted, sparse, diagonal):
    """With or without the diagonal ``d`` (the Nystrom preconditioner needs none)."""
    monkeypatch.setattr(cg_stats, "STATS_COLUMNS", 7)  # slices of 7 columns: 37 = 5 x 7 + 2
    monkeypatch.setattr(cg_stats, "STATS_ROWS", 50)
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 37)).astype(np.float32)
    z[z < 0.3] = 0
    y = rng.normal(size=50)
    w = rng.uniform(0.5, 2, size=50) if weighted else None
    layout = cg_stats.stats_layout(37, 2, diagonal=diagonal)
    spec = RowSpec(layout=layout, targets=lambda v: np.c_[v, 2 * v]).for_rows(y=y, w=w)
    out = np.zeros(layout.size)
    rows = (y,) if w is None else (y, w)
    cg_stats.stats_chunk(sp.csr_matrix(z) if sparse else z, *rows, offset=0, spec=spec, out=out)
    got = layout.unpack(out)
    want = _whole_block_stats(z, np.c_[y, 2 * y], w)
    if not diagonal:
        assert "d" not in got and layout.size == out.size == 2 + 37 + 2 + 37 * 2
        del want["d"]
    for name, value in want.items():
        np.testing.assert_allclose(got[name][0], value, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_each_fold_gets_the_sums_of_its_rows(monkeypatch, weighted, sparse):
    """With folds, every row adds into its own fold's sums (the CV search by CG)."""
    monkeypatch.setattr(cg_stats, "STATS_COLUMNS", 7)
    monkeypatch.setattr(cg_stats, "STATS_ROWS", 60)
    rng = np.random.default_rng(3)
    z = rng.normal(size=(60, 23)).astype(np.float32)
    z[z < 0.3] = 0
    y, folds = rng.normal(size=60), rng.integers(0, 3, size=60)
    w = rng.uniform(0.5, 2, size=60) if weighted else None
    layout = cg_stats.stats_layout(23, 1, 3)
    spec = RowSpec(layout=layout, targets=lambda v: v[:, None], n_folds=3).for_rows(y=y, w=w, folds=folds)
    out = np.zeros(layout.size)
    rows = (y, folds) if w is None else (y, w, folds)
    cg_stats.stats_chunk(sp.csr_matrix(z) if sparse else z, *rows, offset=0, spec=spec, out=out)
    got = layout.unpack(out)
    for k in range(3):
        mine = folds == k
        want = _whole_block_stats(z[mine], y[mine, None], None if w is None else w[mine])
        for name, value in want.items():
            np.testing.assert_allclose(got[name][k], value, rtol=1e-12, atol=1e-12, err_msg=f"{name}, fold {k}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_column_leaves_out_the_rows_of_its_fold(dtype):
    """``held_out``: column j sums Z'(C (Z v_j)) over the rows outside fold ``held_out[j]``."""
    rng = np.random.default_rng(4)
    z = rng.normal(size=(80, 19)).astype(np.float32)
    y, w, folds = rng.normal(size=80), rng.uniform(0.5, 2, size=80), rng.integers(0, 4, size=80)
    V = rng.normal(size=(19, 5)).astype(dtype)
    held_out = np.array([0, 1, 3, -1, 2])
    spec = cg.ProductSpec(layout=Layout(p=(19 * 5,)), V=V, held_out=held_out,
                          n_folds=4).for_rows(y=y, w=w, folds=folds)
    out = np.zeros(19 * 5)
    cg.product_chunk(z, y, w, folds, offset=0, spec=spec, out=out)
    z64 = z.astype(np.float64)
    for j, k in enumerate(held_out):
        keep = folds != k
        want = z64[keep].T @ (w[keep] * (z64[keep] @ V[:, j].astype(np.float64)))
        rtol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(out.reshape(19, 5)[:, j], want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_products_in_column_slices_give_the_whole_blocks_product(monkeypatch, weighted, dtype):
    """The product pass's float64 phase converts the block STATS_COLUMNS columns at a time;
    its Z'(C (Z V)) is the whole block's float64 product (float32 V: the float32 phase)."""
    monkeypatch.setattr(cg_stats, "STATS_COLUMNS", 7)
    monkeypatch.setattr(cg_stats, "STATS_ROWS", 50)
    rng = np.random.default_rng(1)
    z = rng.normal(size=(50, 37)).astype(np.float32)
    y = rng.normal(size=50)
    w = rng.uniform(0.5, 2, size=50) if weighted else None
    V = rng.normal(size=(37, 3)).astype(dtype)
    spec = cg.ProductSpec(layout=Layout(p=(37 * 3,)), V=V).for_rows(y=y, w=w)
    out = np.zeros(37 * 3)
    cg.product_chunk(z, *((y,) if w is None else (y, w)), offset=0, spec=spec, out=out)
    z64, c = z.astype(np.float64), np.ones(50) if w is None else w
    want = z64.T @ (c[:, None] * (z64 @ V.astype(np.float64)))
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out.reshape(37, 3), want, rtol=rtol, atol=rtol * np.abs(want).max())


def test_fewer_rows_are_converted_in_wider_slices(monkeypatch):
    """A sub-block of fewer rows than STATS_ROWS is converted in slices as many times wider:
    the same float64 work per slice, not more calls per row."""
    monkeypatch.setattr(cg_stats, "STATS_COLUMNS", 7)
    monkeypatch.setattr(cg_stats, "STATS_ROWS", 50)
    z = np.ones((25, 37), dtype=np.float32)
    assert [c for c, _ in cg_stats.float64_columns(z)] == [slice(0, 14), slice(14, 28), slice(28, 37)]
    assert [c for c, _ in cg_stats.float64_columns(np.ones((50, 37), np.float32))][0] == slice(0, 7)


def test_stream_rows_rule():
    """Sub-blocks of streaming passes: the weights and partials at most a quarter of the
    features, at least 2**20 features, at most FUSED_SUB_BLOCK rows (docs/wide.md)."""
    from rfstream.features.fused import FUSED_SUB_BLOCK, stream_rows

    assert stream_rows(8, 50_000, 50_000) == 40  # synthetic rows, one target
    assert stream_rows(108, 50_000, 50_000) == 440  # adult
    assert stream_rows(16, 50_000, 26 * 50_000) == 172  # letter, 26 targets
    assert stream_rows(108, 2_000, 2_000) == 525  # 2**20 features at least
    assert stream_rows(8, 8, 8) == FUSED_SUB_BLOCK and stream_rows(8, 2_000, 2_000**2) == FUSED_SUB_BLOCK


def test_a_product_pass_is_the_same_in_any_sub_blocks(monkeypatch):
    """Z'(Z V) of a task made in stream_rows' sub-blocks equals the one made in whole
    4,096-row sub-blocks, to float32 rounding."""
    from rfstream import RandomFourierFeatures
    from rfstream.features import fused

    rng = np.random.default_rng(2)
    x = rng.normal(size=(3000, 5)).astype(np.float32)
    fmap = RandomFourierFeatures(600, gamma=0.3, random_state=0).fit(x)
    V = rng.normal(size=(600, 2)).astype(np.float32)
    spec = cg.ProductSpec(layout=Layout(p=(600 * 2,)), V=V).for_rows()

    def product():
        return fused.fused_chunk(x, offset=0, features=fmap._block_into, dtype=np.float32, n_features=600,
                                 chunk=lambda z, offset, out: cg.product_chunk(z, offset=offset, spec=spec, out=out),
                                 size=600 * 2)

    small = product()
    assert fused.stream_rows(5, 600, 1200) < 3000  # several sub-blocks
    monkeypatch.setattr(fused, "stream_rows", lambda *a: fused.FUSED_SUB_BLOCK)
    whole = product()
    np.testing.assert_allclose(small, whole, rtol=1e-4, atol=1e-4 * np.abs(whole).max())


def test_work_arrays_are_reused_until_released():
    """The float64 passes' work memory: one array per name and thread, grown when too small,
    the same memory for every smaller request, freed by release_work_arrays."""
    cg_stats.release_work_arrays()
    first = cg_stats.work_array("columns", (40, 100))
    again = cg_stats.work_array("columns", (20, 50))
    assert np.shares_memory(first, again) and again.shape == (20, 50)
    bigger = cg_stats.work_array("columns", (80, 100))
    assert not np.shares_memory(first, bigger)
    assert not np.shares_memory(bigger, cg_stats.work_array("squares", (80, 100)))
    cg_stats.release_work_arrays()
    assert not np.shares_memory(bigger, cg_stats.work_array("columns", (80, 100)))
