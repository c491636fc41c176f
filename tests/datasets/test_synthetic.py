"""The synthetic KDD99-shaped generator: shape, schema, chunk invariance, a learnable label."""
import dask
import numpy as np
import pytest

from rfstream import io
from rfstream.datasets.synthetic import (
    N_FEATURES,
    kdd_like_rows,
    make_kdd_like,
    write_kdd_like,
)
from rfstream.io import onehot_columns


def test_rows_do_not_depend_on_how_they_are_requested():
    # virtual blocks of 4096 rows: a range split at any point gives the same rows
    X, y = kdd_like_rows(1000, 9000, seed=5)
    X1, y1 = kdd_like_rows(1000, 4100, seed=5)
    X2, y2 = kdd_like_rows(4100, 9000, seed=5)
    assert np.array_equal(X, np.concatenate([X1, X2])) and np.array_equal(y, np.concatenate([y1, y2]))
    assert not np.array_equal(X, kdd_like_rows(1000, 9000, seed=6)[0])


def test_kdd_shape_one_hot_blocks_and_label_balance():
    X, y = kdd_like_rows(0, 20_000)
    assert X.shape == (20_000, N_FEATURES) == (20_000, 118) and X.dtype == np.float32
    # every row has exactly one protocol, one service and one flag indicator
    assert np.array_equal(X[:, 38:].sum(axis=1), np.full(20_000, 3.0))
    assert 0.3 < y.mean() < 0.8


def test_written_dataset_equals_lazy_one_and_has_the_schema(tmp_path):
    with dask.config.set(scheduler="threads"):
        attrs = write_kdd_like(tmp_path / "s.zarr", 10_000, rows_per_chunk=3000)
        X, y = io.open_dataset(tmp_path / "s.zarr")
        assert io.dataset_info(tmp_path / "s.zarr")["chunks"] == (3000, 118)
        assert X.chunks[0] == (2500,) * 4  # opened in equal blocks: the last chunk is short
        Xl, yl = make_kdd_like(10_000, rows_per_chunk=7000)
        assert np.array_equal(X.compute(), Xl.compute()) and np.array_equal(y.compute(), yl.compute())
    assert attrs["classes"] == ["normal", "attack"]
    assert len(onehot_columns(attrs)) == 118 - 38


def test_bad_size():
    with pytest.raises(ValueError, match="n_rows must be a positive int"):
        make_kdd_like(0)
