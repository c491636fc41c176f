"""One CSV file converted in byte ranges by Dask tasks (rfstream.io.csv_ranges) is the
dataset of the sequential reader, bit for bit: the same X, y, attributes and chunks, on
files with quoted fields, CRLF line ends, a header or none, comment and blank lines, a
last line without a newline, missing values, categories, and either kind of label.

Blocks of a few hundred bytes make dozens of ranges whose cuts fall inside lines, and
rows per chunk that are no multiple of a range's rows make ranges share output chunks."""
import dask
import distributed
import numpy as np
import pytest
from helpers.byte_range_cases import BLOCK, FILES, R, Keys, assert_same, csv_text, cuts, load, several_files, table

from rfstream.io import convert
from rfstream.io import convert_tasks
from rfstream.io.convert import runs_as_tasks
from rfstream.io.csv import sniff
from rfstream.io.csv_ranges import range_offsets
from rfstream.io.location import as_location


@pytest.mark.parametrize("name", FILES)
def test_byte_ranges_equal_one_stream(tmp_path, name):
    options = dict(FILES[name])
    regression = options.pop("regression", False)
    path = tmp_path / "data.csv"
    path.write_bytes(csv_text(table(400, 1, regression), **options).encode())
    seq = convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    keys = Keys()
    with dask.config.set(scheduler="threads"), keys:
        par = convert(path, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    n_ranges = len(range_offsets(as_location(path), sniff(as_location(path)), BLOCK))
    assert n_ranges > 30 and keys.count("rfstream-scan-") >= n_ranges  # the tasks read the ranges
    assert keys.count("rfstream-encode-") == n_ranges
    assert par["task"] == seq["task"] == ("regression" if regression else "classification")
    assert par["shape"] == seq["shape"] == [400, seq["shape"][1]]
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")


def test_like_a_training_set(tmp_path):
    """A test file encoded with the training set's schema: unseen values counted alike."""
    train = tmp_path / "train.csv"
    train.write_text(csv_text(table(200, 2)))
    convert(train, tmp_path / "train.zarr", rows_per_chunk=R)
    test = table(300, 3)
    test.loc[::7, "city"], test.loc[::11, "label"] = "Quito, EC", "never seen"
    path = tmp_path / "test.csv"
    path.write_bytes(csv_text(test, crlf=True, last_newline=False).encode())
    like = tmp_path / "train.zarr"
    seq = convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, like=like, block_size=None)
    with dask.config.set(scheduler="threads"):
        par = convert(path, tmp_path / "par.zarr", rows_per_chunk=R, like=like, block_size=BLOCK)
    assert par["n_unseen_categories"] == seq["n_unseen_categories"] > 0
    assert par["n_unseen_labels"] == seq["n_unseen_labels"] > 0
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")


def test_a_quoted_line_break_at_a_cut_reads_one_stream(tmp_path, monkeypatch):
    """A cut inside a quoted field: that range ends inside quotes, pandas refuses it, and
    the file is read as one stream.  Away from the cuts, quoted line breaks are read in
    ranges."""
    df = table(300, 4)
    df["city"] = df["city"].astype(object)
    df.loc[150, "city"] = "two\nlines"
    text = csv_text(df)
    path = tmp_path / "data.csv"
    path.write_text(text)
    streams = []
    whole = convert_tasks.reader_plan
    monkeypatch.setattr(convert_tasks, "reader_plan", lambda *a: streams.append(a) or whole(*a))
    convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    newline = text.index("two\nlines") + 3  # the quoted line break; its line starts at `line`
    line = text.rindex("\n", 0, newline - 3) + 1  # a cut from there to the break is inside it
    cut_in_quotes = cuts(path, line, newline)
    cut = next(b for b in range(len(text), 20, -1) if cut_in_quotes(b))  # fewest ranges
    away = next(b for b in range(BLOCK, len(text)) if cut_in_quotes(b) is False)
    with dask.config.set(scheduler="threads"):
        convert(path, tmp_path / "cut.zarr", rows_per_chunk=R, block_size=cut)
        assert len(streams) == 1
        convert(path, tmp_path / "away.zarr", rows_per_chunk=R, block_size=away)
        assert len(streams) == 1  # the cuts away from the quoted field: ranges
        like = tmp_path / "seq.zarr"  # pass 1 only counts the rows: pandas still sees the quotes
        convert(path, tmp_path / "cut_like.zarr", rows_per_chunk=R, block_size=cut, like=like)
        assert len(streams) == 2
    assert_same(tmp_path / "seq.zarr", tmp_path / "cut.zarr")
    assert_same(tmp_path / "seq.zarr", tmp_path / "away.zarr")
    convert(path, tmp_path / "seq_like.zarr", rows_per_chunk=R, block_size=None, like=like)
    assert_same(tmp_path / "seq_like.zarr", tmp_path / "cut_like.zarr")


def test_a_file_at_a_url(tmp_path):
    """A file on a store (memory://): ranges read with fsspec, CRLF through universal newlines."""
    import fsspec

    text = csv_text(table(300, 7), crlf=True, comments=True, last_newline=False).encode()
    (tmp_path / "data.csv").write_bytes(text)
    fs = fsspec.filesystem("memory")
    fs.pipe("/ranges/data.csv", text)
    try:
        convert(tmp_path / "data.csv", tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
        keys = Keys()
        with dask.config.set(scheduler="threads"), keys:
            convert("memory://ranges/data.csv", tmp_path / "url.zarr", rows_per_chunk=R, block_size=BLOCK)
        assert keys.count("rfstream-encode-") > 10
    finally:
        fs.rm("/ranges", recursive=True)
    (Xa, ya, aa, ca), (Xb, yb, ab, cb) = load(tmp_path / "seq.zarr"), load(tmp_path / "url.zarr")
    assert Xa.tobytes() == Xb.tobytes() and ya.tobytes() == yb.tobytes() and ca == cb
    assert {k: v for k, v in aa.items() if k != "source"} == {k: v for k, v in ab.items() if k != "source"}


def test_on_a_distributed_cluster(tmp_path):
    """The ranges read and written by two worker processes."""
    path = tmp_path / "data.csv"
    path.write_bytes(csv_text(table(400, 5), crlf=True, comments=True).encode())
    convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client, distributed.get_task_stream(client) as stream:
        convert(path, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK * 4)
    assert sum(str(t["key"]).startswith("rfstream-encode") for t in stream.data) > 5
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")


def test_which_files_are_cut(tmp_path):
    """A header longer than a block stays in the first range; a compressed file, a small
    one, or block_size=None is one stream; the CLI connects for several blocks."""
    names = [f"column_{j}_with_a_long_name" for j in range(12)]
    path = tmp_path / "wide.csv"
    path.write_text(",".join(names) + "\n" + "".join(f"{k}," * 11 + "x\n" for k in range(50)))
    loc = as_location(path)
    offsets = range_offsets(loc, sniff(loc), 100)
    header_end = len(",".join(names)) + 1
    assert offsets[0] == 0 and offsets[1] >= header_end and len(offsets) > 3
    assert range_offsets(loc, sniff(loc), None) == [0]
    assert runs_as_tasks(path, block_size=100) and not runs_as_tasks(path)
    import gzip

    gz = tmp_path / "wide.csv.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert not runs_as_tasks(gz, block_size=100)
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        convert(path, tmp_path / "x.zarr", block_size=0)


def test_a_bad_number_names_its_row_in_the_file(tmp_path):
    """Pass 2 errors count rows from the file's first, not the range's."""
    convert_path = tmp_path / "train.csv"
    convert_path.write_text("1,a,x\n2,b,y\n")
    convert(convert_path, tmp_path / "train.zarr")
    path = tmp_path / "test.csv"
    path.write_text("1,a,x\n" * 150 + "1e400,a,x\n" + "2,b,y\n" * 20)
    with dask.config.set(scheduler="threads"), pytest.raises(ValueError, match="data row 151: inf"):
        convert(path, tmp_path / "test.zarr", like=tmp_path / "train.zarr", block_size=BLOCK)


@pytest.mark.parametrize("name", FILES)
def test_several_files_in_byte_ranges(tmp_path, monkeypatch, name):
    """Several files, each cut into its own byte ranges (one of a single range, one whole
    because compressed): the dataset of the files read whole, one after the other."""
    from rfstream.io import csv_ranges

    options = dict(FILES[name])
    options.pop("regression", None)
    folder = several_files(tmp_path / "parts", [60, 6, 90, 50, 30], **options)  # 6 rows: one range
    gz = folder / "part-03.csv"
    (folder / "part-03.csv.gz").write_bytes(__import__("gzip").compress(gz.read_bytes()))
    gz.unlink()
    seq = convert(folder, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    made, CsvRanges = [], csv_ranges.CsvRanges
    monkeypatch.setattr(csv_ranges, "CsvRanges", lambda *a, **k: made.append(k) or CsvRanges(*a, **k))
    keys = Keys()
    with dask.config.set(scheduler="threads"), keys:
        par = convert(folder, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    assert par["shape"] == seq["shape"]
    assert keys.count("rfstream-encode-") > 10  # ranges, not files
    assert any(k.get("one_range") for k in made) and any(not k.get("one_range") for k in made)
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")


def test_several_files_read_again(tmp_path, monkeypatch):
    """A numeric column holding text in one file's range reads pass 1 again as text; a
    file whose range does not parse alone (a quoted line break at a cut) is read whole;
    a file with a header and no row is refused, as when each file is read whole."""
    from rfstream.io import csv_ranges

    CsvFiles_again = csv_ranges.CsvFiles.again
    folder = several_files(tmp_path / "parts", [40, 50, 60, 30], seed=3)
    path = folder / "part-02.csv"
    lines = path.read_text().splitlines()
    lines[-2] = "1.5,Paris,x,a,yes."  # text in the numeric column "k"
    lines[3] = '2.5,"Oslo\nNO",1,b,no'  # a quoted line break
    path.write_text("\n".join(lines) + "\n")
    seq = convert(folder, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    assert "k" in seq["categorical"]
    text = path.read_text()
    newline = text.index("Oslo\n") + 4
    line = text.rindex("\n", 0, newline - 4) + 1
    cut_in_quotes = cuts(path, line, newline)
    inside = next(b for b in range(BLOCK, 20, -1) if cut_in_quotes(b))
    again = []
    monkeypatch.setattr(csv_ranges.CsvFiles, "again", lambda self, scan: again.append(
        (scan.refused, self.numbers_first)) or CsvFiles_again(self, scan))
    for block_size in (BLOCK, inside):  # the second cuts inside the quoted field
        with dask.config.set(scheduler="threads"):
            convert(folder, tmp_path / f"par{block_size}.zarr", rows_per_chunk=R, block_size=block_size)
        assert_same(tmp_path / "seq.zarr", tmp_path / f"par{block_size}.zarr")
    refused = frozenset({str(path)})  # read again once: BLOCK as text; inside: part-02 whole, all as text
    assert again == [(frozenset(), True), (frozenset(), False), (refused, True), (frozenset(), False)]
    (folder / "part-04.csv").write_text("x,city,k,t,label\n")
    for block_size in (None, BLOCK):
        with pytest.raises(ValueError, match="part-04.csv: no data rows after the header"):
            convert(folder, tmp_path / "empty.zarr", rows_per_chunk=R, block_size=block_size, header=True)


def test_range_count_gives_every_worker_a_share():
    """A file is cut into whole rounds of the workers' threads, at least two each, none
    bigger than a block nor smaller than MIN_RANGE; one thread, or a file too small for a
    round, keeps ceil(size / block_size) (docs/io.md, "Ranges and workers")."""
    from rfstream.io.csv_ranges import MIN_RANGE, range_count, worker_threads

    block = 64 * 2**20
    assert range_count(749_000_000, block, 16) == 32  # was 12: four of 16 workers idle
    assert range_count(749_000_000, block, 2) == 12
    assert range_count(150_000_000, block, 2) == 4 and range_count(150_000_000, block, 1) == 3
    assert range_count(1000, 100, 2) == 10  # tiny ranges as asked: the tests' cuts stay where they were
    rng = np.random.default_rng(5)
    for size, threads in zip(rng.integers(1, 10**10, 300), rng.integers(1, 64, 300)):
        size, threads = int(size), int(threads)
        n, least = range_count(size, block, threads), -(-size // block)
        assert n >= least and -(-size // n) <= block
        if n > least:  # whole rounds, two at least where the size allows
            assert threads > 1 and n % threads == 0 and size // n >= MIN_RANGE
            assert n >= 2 * threads or size // (2 * threads) < MIN_RANGE
    with dask.config.set(scheduler="synchronous"):
        assert worker_threads() == 1
    with dask.config.set(scheduler="threads", num_workers=3):
        assert worker_threads() == 3
