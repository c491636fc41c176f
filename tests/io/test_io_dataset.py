"""The Zarr dataset layout (rfstream.io.dataset): write_dataset, open_dataset, dataset_info,
row chunks, refusals; writes staged and renamed (nothing half-written)."""
import dask.array as da
import numpy as np
import pytest
from helpers.io import siblings, write

from rfstream.io import convert, dataset_info, iter_row_chunks, open_dataset, write_dataset


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_write_open_round_trip(tmp_path, kind):
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(103, 4)), rng.integers(0, 3, 103)
    if kind == "dask":
        X, y = da.from_array(X, chunks=((50, 30, 23), (2, 2))), da.from_array(y, chunks=17)
    attrs = write_dataset(tmp_path / "d.zarr", X, y, attrs={"classes": ["a", "b", "c"]},
                          rows_per_chunk=40)
    assert attrs["task"] == "classification" and attrs["n_rows"] == 103
    Xo, yo = open_dataset(tmp_path / "d.zarr")
    # stored in chunks of 40 rows; opened in 3 equal blocks (40, 40, 23 would leave a
    # worker idle through part of the last round, reductions.even_row_chunks)
    assert Xo.chunks == ((35, 34, 34), (4,)) and yo.chunks == ((35, 34, 34),)
    assert Xo.dtype == np.float32 and yo.dtype == np.int32
    np.testing.assert_array_equal(Xo.compute(), np.asarray(X, dtype=np.float32))
    np.testing.assert_array_equal(yo.compute(), np.asarray(y))
    info = dataset_info(tmp_path / "d.zarr")
    assert info["shape"] == (103, 4) and info["chunks"] == (40, 4)
    assert info["attrs"]["classes"] == ["a", "b", "c"]
    offsets = [a for a, _, _ in iter_row_chunks(tmp_path / "d.zarr")]
    assert offsets == [0, 40, 80]


def test_write_regression_and_no_y(tmp_path):
    write_dataset(tmp_path / "r.zarr", np.ones((5, 2)), np.linspace(0, 1, 5))
    assert dataset_info(tmp_path / "r.zarr")["y_dtype"] == "float32"
    write_dataset(tmp_path / "n.zarr", np.ones((5, 2)))
    assert open_dataset(tmp_path / "n.zarr")[1] is None


def test_write_errors(tmp_path):
    with pytest.raises(ValueError, match=r"X must be 2-D .* got shape \(5,\)"):
        write_dataset(tmp_path / "e.zarr", np.ones(5))
    with pytest.raises(ValueError, match=r"one value per row of X \(5\); got shape \(4,\)"):
        write_dataset(tmp_path / "e.zarr", np.ones((5, 2)), np.ones(4))
    with pytest.raises(ValueError, match="rows_per_chunk must be a positive int; got 0"):
        write_dataset(tmp_path / "e.zarr", np.ones((5, 2)), rows_per_chunk=0)
    with pytest.raises(ValueError, match="not JSON-serializable"):
        write_dataset(tmp_path / "e.zarr", np.ones((5, 2)), attrs={"f": object()})
    assert siblings(tmp_path / "e.zarr") == []


def test_exists_and_overwrite(tmp_path):
    dst = tmp_path / "d.zarr"
    write_dataset(dst, np.ones((3, 2)))
    with pytest.raises(FileExistsError, match=r"d\.zarr already exists.*overwrite=True"):
        write_dataset(dst, np.zeros((3, 2)))
    with pytest.raises(FileExistsError, match="--overwrite"):
        convert(write(tmp_path / "a.csv", "1,2\n"), dst)
    write_dataset(dst, np.zeros((4, 2)), overwrite=True)
    assert open_dataset(dst)[0].shape == (4, 2) and siblings(dst) == ["d.zarr"]
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="refusing to overwrite .*plain.*not a Zarr dataset"):
        write_dataset(tmp_path / "plain", np.ones((3, 2)), overwrite=True)


def test_open_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"dataset .*nope\.zarr does not exist"):
        open_dataset(tmp_path / "nope.zarr")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty is not a Zarr dataset"):
        open_dataset(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=r"source file .*missing\.csv does not exist"):
        convert(tmp_path / "missing.csv", tmp_path / "m.zarr")


def _codecs(path):
    import json

    return json.loads(path.read_text())["codecs"]


def test_every_chunk_rfstream_writes_carries_a_checksum(tmp_path):
    """zstd's frame checksum on every array rfstream writes (datasets, splits, predictions)."""
    from rfstream.io.predictions import write_predictions
    from rfstream.io.split import split_dataset

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(80, 3)), np.arange(80) % 2
    write_dataset(tmp_path / "d.zarr", X, y, rows_per_chunk=20)
    split_dataset(tmp_path / "d.zarr", tmp_path / "train.zarr", tmp_path / "test.zarr")
    write_predictions(da.from_array(X[:, 0], chunks=20), tmp_path / "p.zarr", scores=X[:, :2])
    metas = [tmp_path / f for f in ("d.zarr/X/zarr.json", "d.zarr/y/zarr.json", "train.zarr/X/zarr.json",
                                     "test.zarr/y/zarr.json", "p.zarr/y_pred/zarr.json")]
    for meta in metas:
        assert {"name": "zstd", "configuration": {"level": 0, "checksum": True}} in _codecs(meta), meta


def test_one_flipped_bit_in_a_chunk_is_one_line(tmp_path):
    """A chunk with one bit flipped fails to decode: one line naming the dataset and rows, never
    other numbers (random floats are stored nearly raw by zstd, so the flip would read silently)."""
    rng = np.random.default_rng(0)
    path = tmp_path / "d.zarr"
    write_dataset(path, rng.normal(size=(200, 4)), np.arange(200) % 2, rows_per_chunk=100)
    chunk = path / "X" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x01
    chunk.write_bytes(bytes(data))
    X, _ = open_dataset(path)
    with pytest.raises(ValueError, match=r"rows 0-100 of array 'X' cannot be read .*checksum") as refused:
        X.compute(scheduler="synchronous")
    assert "\n" not in str(refused.value)
