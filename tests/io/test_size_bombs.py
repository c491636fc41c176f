"""Every reader fed its size bomb under ``RLIMIT_AS`` (tests/helpers/capped.py): a size read
from a file, a schema or Zarr metadata is bounded (rfstream/sizes.py) before anything of that
size is allocated, and the command ends in one line, exit 2; or, where the size is honest and
only rows per block were too many, it converts within the cap."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import zarr

from helpers.capped import one_line_exit_2, run_capped

from rfstream import sizes


def _gz_member(text: bytes) -> bytes:
    return gzip.compress(text, compresslevel=1)


def _repeated_gz(path: Path, head: bytes, block: bytes, times: int, tail: bytes = b"") -> Path:
    """A gzip file of ``head``, ``block`` ``times`` over and ``tail``: members compressed once
    and repeated, so that a multi-GB text costs a few MB and milliseconds."""
    member = _gz_member(block)
    with open(path, "wb") as f:
        f.write(_gz_member(head))
        for _ in range(times):
            f.write(member)
        if tail:
            f.write(_gz_member(tail))
    return path


def test_a_libsvm_index_of_2_40_is_refused_before_its_names(tmp_path):
    src = tmp_path / "bomb.svm"
    src.write_text("1 1:0.5 1099511627776:1\n0 2:1\n" + "1 3:1\n" * 40)  # about 1.1 KB... with padding
    line = one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "1,099,511,627,776",
                           f"{sizes.MAX_FEATURES:,}")
    assert not (tmp_path / "o.zarr").exists(), line


def test_a_gzip_line_of_2_gib_is_refused_by_the_sniffer(tmp_path):
    src = _repeated_gz(tmp_path / "line.csv.gz", b"a,b\n", b"1" * 2**24, 128)  # 2 GiB, no newline
    one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "line", f"{sizes.MAX_LINE_BYTES:,}")


def test_a_huge_csv_line_after_short_ones_is_refused(tmp_path):
    rows = b"a,b,y\n" + b"1,2,0\n3,4,1\n" * 100
    src = _repeated_gz(tmp_path / "late.csv.gz", rows, b"7" * 2**24, 40, b",1,0\n")  # a 640 MiB field
    one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "line", f"{sizes.MAX_LINE_BYTES:,}")


def test_a_huge_libsvm_line_is_refused(tmp_path):
    src = _repeated_gz(tmp_path / "late.svm.gz", b"1 1:1\n0 2:1\n" * 100, b"1:0.5 " * 2**21, 64, b"\n")
    one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "line", f"{sizes.MAX_LINE_BYTES:,}")


def test_a_csv_of_two_million_fields_is_refused_by_the_sniffer(tmp_path):
    """A 4 MB line of 2,000,000 fields: a column summary each would be GBs before a row is read."""
    src = tmp_path / "fields.csv"
    src.write_text(",".join(["1"] * 2_000_000) + "\n" + ",".join(["2"] * 2_000_000) + "\n")
    one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "2,000,000", f"{sizes.MAX_FEATURES:,}")


def test_a_block_of_long_rows_after_short_ones_is_refused(tmp_path):
    """Lines under the limit, but more text in a block of rows than a block may hold: 1,200 short
    rows (more than the sniffer's sample of 1,000 lines), then 40 rows of 8 MiB (a 320 MiB block for
    pandas, a 300 KB gzip); refused as a block, never parsed together.  (Where the sniffed lines are long, the
    rows per block are chosen from them and such a file converts.)"""
    src = _repeated_gz(tmp_path / "long.csv.gz", b"t,y\n" + b"1,0\n2,1\n" * 600,
                       b"x" * (8 * 2**20) + b",1\n", 40)
    one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "--rows-per-chunk")


def test_wide_rows_are_written_in_chunks_chosen_from_their_width(tmp_path):
    """200 rows of 100,000 columns (a 7 KB LIBSVM file): 65,536-row chunks of that width would be
    24 GiB each; the chunks hold :func:`rfstream.sizes.block_rows` rows instead."""
    src = tmp_path / "wide.svm"
    lines = [f"{k % 2} {1 + (k * 7919) % 100_000}:{k}" for k in range(199)] + ["1 100000:1"]
    src.write_text("\n".join(lines) + "\n")
    code, lines = run_capped(["convert", src, tmp_path / "o.zarr"])
    assert code == 0, lines[-5:]
    X = zarr.open_group(str(tmp_path / "o.zarr"), mode="r")["X"]
    assert X.shape == (200, 100_000) and X.chunks[0] == sizes.block_rows(100_000, 65536) == 167
    assert X[199, 99_999] == 1 and X[5, (5 * 7919) % 100_000] == 5 and float(X[:].sum()) == sum(range(199)) + 1


def test_csv_rows_per_parsed_block_follow_the_fields_and_the_lines(tmp_path):
    from rfstream.io.csv import read_rows, sniff
    from rfstream.io.location import as_location

    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(["1"] * 20_000) + "\n")
    assert read_rows(sniff(as_location(wide)), 65536) == sizes.BLOCK_BYTES // (20_000 * sizes.TEXT_CELL_BYTES)
    long = tmp_path / "long.csv"
    long.write_text(("x" * 2**20 + ",1\n") * 3)
    assert read_rows(sniff(as_location(long)), 65536) == sizes.BLOCK_BYTES // (2**20 + 2)
    narrow = tmp_path / "narrow.csv"
    narrow.write_text("1,2\n" * 3)
    assert read_rows(sniff(as_location(narrow)), 65536) == 65536


def _like(tmp_path, categories):
    src = tmp_path / "train.csv"
    src.write_text("c,x,y\na,1,0\nb,2,1\n")
    code, lines = run_capped(["convert", src, tmp_path / "train.zarr", "--label-column", "last"])
    assert code == 0, lines
    meta_path = tmp_path / "train.zarr" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    attrs = meta["attributes"]
    attrs["categorical"]["c"] = [f"v{k}" for k in range(categories)]
    attrs["feature_names"] = [f"c=v{k}" for k in range(categories)] + ["x"]
    meta_path.write_text(json.dumps(meta))
    return src


def test_a_like_schema_with_200_000_categories_is_refused(tmp_path):
    src = _like(tmp_path, 200_000)
    one_line_exit_2(["convert", src, tmp_path / "test.zarr", "--like", tmp_path / "train.zarr"],
                    "200,000", "categories")


def _zstd_zeros(n_bytes: int) -> bytes:
    """A zstd frame of ``n_bytes`` zero bytes in RLE blocks of 128 KiB: 1.6 GB in 50 KB."""
    block = 2**17
    out = bytearray(b"\x28\xb5\x2f\xfd\xe0" + n_bytes.to_bytes(8, "little"))  # single segment, 8-byte size
    while n_bytes:
        size = min(block, n_bytes)
        n_bytes -= size
        out += ((size << 3) | (1 << 1) | (n_bytes == 0)).to_bytes(3, "little") + b"\0"  # RLE, last
    return bytes(out)


def _lying_zarr(path, rows, chunk_rows, columns=3):
    """X (``rows`` x ``columns``) and y whose metadata declare ``chunk_rows``-row chunks; with a
    chunk of all the rows, its data are a zstd frame of zeros of the declared size."""
    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    X = group.create_array("X", shape=(rows, columns), chunks=(chunk_rows, columns), dtype="float32")
    y = group.create_array("y", shape=(rows,), chunks=(chunk_rows,), dtype="int32")
    if chunk_rows >= rows:
        (path / "X" / "c" / "0").mkdir(parents=True)
        (path / "X" / "c" / "0" / "0").write_bytes(_zstd_zeros(4 * rows * columns))
        (path / "y" / "c").mkdir(parents=True)
        (path / "y" / "c" / "0").write_bytes(_zstd_zeros(4 * rows))
    else:
        X[:1000] = np.random.default_rng(0).normal(size=(1000, columns))
        y[:1000] = np.arange(1000) % 2
    return path


@pytest.mark.parametrize("rows, chunk_rows, columns, needle", [
    (10**12, 1000, 3, "row chunks"),                      # 10^12 rows of a 1,000-row dataset
    (25_000_000, 25_000_000, 16, "a chunk of shape"),      # a 50 KB chunk that declares 25 M rows
])
def test_zarr_metadata_that_lie_are_refused(tmp_path, rows, chunk_rows, columns, needle):
    data = _lying_zarr(tmp_path / "lie.zarr", rows, chunk_rows, columns)
    assert sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) < 200_000
    one_line_exit_2(["fit", data, "--out", tmp_path / "m", "--n-components", "8", "--no-checkpoint"],
                    needle, f"{sizes.MAX_ROW_CHUNKS if chunk_rows < rows else sizes.MAX_CHUNK_BYTES:,}")
    assert not (tmp_path / "m").exists()


def _npy_header(shape, dtype="<f4") -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def test_an_npy_of_2_28_columns_is_refused_before_its_names(tmp_path):
    """A sparse file of one row of 2^28 columns (1 GiB, no disk): 2^28 feature names would be ~20 GB."""
    src = tmp_path / "wide.npy"
    header = _npy_header((1, 2**28))
    with open(src, "wb") as f:
        f.write(header)
        f.truncate(len(header) + 4 * 2**28)
    one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "268,435,456", f"{sizes.MAX_FEATURES:,}")


def test_an_npz_member_declaring_80_gb_is_refused_before_it_is_read(tmp_path):
    import zipfile

    src = tmp_path / "big.npz"
    with zipfile.ZipFile(src, "w") as archive:
        archive.writestr("X.npy", _npy_header((10**6, 10**4), "<f8") + b"\0" * 64)
    one_line_exit_2(["convert", src, tmp_path / "o.zarr"], "80,000,000,000")


def test_split_writes_wide_rows_in_chunks_chosen_from_their_width(tmp_path, monkeypatch):
    """With blocks of 1 MiB (monkeypatched, to keep the data small), 2,000 columns take 131-row
    chunks; split asked for 1,000-row chunks writes 131-row ones, each from whole source blocks."""
    from rfstream.io import open_dataset, split_dataset, write_dataset

    monkeypatch.setattr(sizes, "BLOCK_BYTES", 2**20)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2000)).astype(np.float32)
    write_dataset(tmp_path / "wide.zarr", X, np.arange(600) % 2)
    split_dataset(tmp_path / "wide.zarr", tmp_path / "train.zarr", tmp_path / "test.zarr", test_size=0.5,
                  rows_per_chunk=1000)
    for name in ("wide", "train", "test"):
        assert (name, zarr.open_group(str(tmp_path / f"{name}.zarr"), mode="r")["X"].chunks[0]) == (name, 131)
    train, _ = open_dataset(tmp_path / "train.zarr")
    test, _ = open_dataset(tmp_path / "test.zarr")
    got = np.concatenate([train.compute(), test.compute()])
    np.testing.assert_array_equal(got[np.argsort(got[:, 0])], X[np.argsort(X[:, 0])])
