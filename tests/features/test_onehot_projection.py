"""The RFF projection with 0/1 columns summed as rows of W (rfstream.features.onehot)."""
import dask.array as da
import numpy as np
import pytest

from rfstream.features import RandomFourierFeatures
from rfstream.features import onehot as onehot_mod
from rfstream.features.fourier import project_with_offset
from rfstream.features.fused import feature_sub_blocks, fused_buffer
from rfstream.features.onehot import pattern_sums, project_split
from rfstream.preprocess import Standardizer, binary_passthrough

ONEHOT = (1, 2, 3, 5, 6, 7, 8)  # two fields: columns 1-3 and 5-8


def mixed_rows(n, seed=0):
    """Numeric columns 0, 4, 9 (scaled up, as raw counts) and two one-hot fields; row 0 has no
    ones, row 1 two ones in the first field, row 2 every one-hot column set."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 10))
    x[:, [0, 4, 9]] = rng.normal(size=(n, 3)) * [1.0, 30.0, 0.1]
    x[np.arange(n), rng.choice([1, 2, 3], n)] = 1.0
    x[np.arange(n), rng.choice([5, 6, 7, 8], n)] = 1.0
    x[0, list(ONEHOT)] = 0.0
    x[1, [1, 3]] = 1.0
    x[2, list(ONEHOT)] = 1.0
    return x


def weights(d, m, dtype, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(d, m))).astype(dtype), rng.uniform(0, 2 * np.pi, m).astype(dtype)


def tol(dtype):
    return {"rtol": 1e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-11}


@pytest.fixture
def counted(monkeypatch):
    """Calls of the sums of selected rows (the fast path)."""
    calls = []
    real = onehot_mod.pattern_sums

    def spy(xo, W):
        calls.append(xo.shape)
        return real(xo, W)

    monkeypatch.setattr(onehot_mod, "pattern_sums", spy)
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("contiguous", [True, False])
def test_split_projection_equals_dense(dtype, contiguous, counted):
    x = mixed_rows(300)
    W, b = weights(10, 40, dtype)
    if contiguous:
        out = np.empty((300, 40), dtype=dtype)
    else:  # a view of a wider buffer, as the Gram pass gives
        out = np.empty((300, 47), dtype=dtype)[:, :40]
    got = project_split(x, W, b, ONEHOT, out=out)
    assert np.shares_memory(got, out)
    np.testing.assert_allclose(got, project_with_offset(x, W, b), **tol(dtype))
    assert counted == [(300, len(ONEHOT))]  # the fast path was taken


@pytest.mark.parametrize("rows", [[0], [0, 1, 2], []])
def test_blocks_with_no_ones_or_no_rows(rows, counted):
    x = mixed_rows(3)[rows]
    W, b = weights(10, 20, np.float64)
    got = project_split(x, W, b, ONEHOT)
    assert got.shape == (len(rows), 20)
    np.testing.assert_allclose(got, project_with_offset(x, W, b), **tol(np.float64))
    assert len(counted) == (1 if rows else 0)


def test_not_binary_block_falls_back(counted):
    x = mixed_rows(100)
    x[7, 6] = 0.5  # a "one-hot" column with a value that is not 0 or 1: multiplied
    W, b = weights(10, 30, np.float32)
    np.testing.assert_allclose(project_split(x, W, b, ONEHOT), project_with_offset(x, W, b), **tol(np.float32))
    x[7, 6] = np.nan
    assert np.isnan(project_split(x, W, b, ONEHOT)[7]).all()
    assert counted == []


def test_row_does_not_depend_on_its_block():
    """Fast path and fallback add the same two sums: a row's projection is the same in a
    0/1 block and in a block the fallback multiplies."""
    x = mixed_rows(64)
    W, b = weights(10, 30, np.float64)
    other = x.copy()
    other[-1, 2] = 0.5
    np.testing.assert_allclose(project_split(x, W, b, ONEHOT)[:-1], project_split(other, W, b, ONEHOT)[:-1],
                               rtol=1e-14, atol=1e-13)


def test_pattern_sums():
    xo = np.array([[0, 1, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]], dtype=np.float32)
    W = np.vstack([np.arange(16, dtype=np.float32).reshape(4, 4) ** 2, np.zeros((1, 4), np.float32)])
    P, inv = pattern_sums(xo, W)
    assert P.shape[0] == 3  # rows 0 and 3 share a pattern
    np.testing.assert_array_equal(P[inv], xo @ W[:-1])
    assert pattern_sums(np.ones((2, 40)), np.zeros((41, 3))) is None  # codes past 63 bits


def test_map_learns_passthrough_and_matches_dense(counted):
    x = mixed_rows(400)
    X = da.from_array(x, chunks=100)
    std = Standardizer(passthrough=[*ONEHOT, 9]).fit(X)  # column 9 is not within [0, 1]
    Xs = std.transform(X)
    assert binary_passthrough(Xs) == ONEHOT
    assert binary_passthrough(X) == () and binary_passthrough(Standardizer().fit(X).transform(X)) == ()
    rff = RandomFourierFeatures(64, gamma=0.3, random_state=0).fit(Xs)
    dense = RandomFourierFeatures(64, gamma=0.3, random_state=0).fit(Xs.compute())
    np.testing.assert_array_equal(rff.random_weights_, dense.random_weights_)  # the same draw
    xs = Xs.compute()
    Z = rff.transform(Xs).compute()
    np.testing.assert_allclose(Z, dense.transform(xs), rtol=1e-5, atol=1e-5)
    assert counted  # made by the fast path
    np.testing.assert_array_equal(rff.transform(xs[50:90]), Z[50:90])  # whatever the chunking
    buf = fused_buffer(400, 64, np.float32, 128)  # the fused passes' sub-blocks
    for start, stop, z in feature_sub_blocks(xs, rff._fused_block(), buf, 128):
        np.testing.assert_array_equal(z, Z[start:stop])


def test_fit_pipeline_gets_the_columns():
    """The model ``rfstream fit`` makes (a Standardizer passing the one-hot columns through)
    hands them to its map."""
    from rfstream.catalog import make_model

    x = mixed_rows(600)
    X, y = da.from_array(x, chunks=200), da.from_array((x[:, 0] > 0).astype(np.int64), chunks=200)
    model = make_model("classification", passthrough=list(ONEHOT),
                       feature_params={"n_components": 32, "random_state": 0}, solver_params={"alpha": 1.0})
    model.fit(X, y)
    assert model.named_steps["features"]._binary_columns_ == ONEHOT
