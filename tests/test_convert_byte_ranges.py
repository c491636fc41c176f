"""One CSV file converted in byte ranges by Dask tasks (rfstream.io.csv_ranges) is the
dataset of the sequential reader, bit for bit: the same X, y, attributes and chunks, on
files with quoted fields, CRLF line ends, a header or none, comment and blank lines, a
last line without a newline, missing values, categories, and either kind of label.

Blocks of a few hundred bytes make dozens of ranges whose cuts fall inside lines, and
rows per chunk that are no multiple of a range's rows make ranges share output chunks."""
import dask
import distributed
import numpy as np
import pandas as pd
import pytest
from dask.callbacks import Callback

from rfstream.io import convert, dataset_info, open_dataset
from rfstream.io import convert_tasks
from rfstream.io.convert import runs_as_tasks
from rfstream.io.csv_layout import sniff
from rfstream.io.csv_ranges import range_offsets
from rfstream.io.location import as_location

BLOCK = 300  # bytes per range: every range holds a few lines, most cuts fall inside one
R = 37       # rows per chunk


def load(path):
    X, y = open_dataset(path)
    return X.compute(), None if y is None else y.compute(), dataset_info(path)["attrs"], X.chunks


def assert_same(a, b):
    """The same X, y, attributes (the source aside: one name each) and chunks, exactly."""
    (Xa, ya, aa, ca), (Xb, yb, ab, cb) = load(a), load(b)
    np.testing.assert_array_equal(Xa, Xb)
    assert Xa.dtype == Xb.dtype and Xa.tobytes() == Xb.tobytes()  # bit for bit, NaN-free
    if ya is None:
        assert yb is None
    else:
        assert ya.dtype == yb.dtype and ya.tobytes() == yb.tobytes()
    assert aa == ab and ca == cb


class Keys(Callback):
    """The keys of the tasks dask's local schedulers run."""

    def __init__(self):
        super().__init__()
        self.keys = []

    def _pretask(self, key, dsk, state):
        self.keys.append(str(key))

    def count(self, prefix):
        return sum(k.startswith(prefix) for k in self.keys)


def table(n, seed, regression=False, quoted=True):
    rng = np.random.default_rng(seed)
    cities = ["Paris, FR", "Rome", 'say "hi"', "Oslo, NO", "Lima"] if quoted else ["Paris", "Rome", "Oslo", "Lima"]
    df = pd.DataFrame({
        "x": rng.normal(size=n) * 10.0 ** rng.integers(-3, 4, n),  # full-precision numbers
        "city": rng.choice(cities, n),  # quoted where a value holds "," or '"'
        "k": rng.integers(-5, 5, n),
        "t": rng.choice(["a", "b", "c"], n),
        "label": rng.normal(size=n).round(3) if regression else rng.choice(["yes.", "no", "maybe"], n),
    })
    df.loc[rng.random(n) < 0.1, "x"] = np.nan
    df.loc[rng.random(n) < 0.1, "city"] = np.nan
    df.loc[rng.random(n) < 0.1, "t"] = np.nan
    return df


def csv_text(df, *, header=True, crlf=False, comments=False, blanks=False, last_newline=True, seed=0):
    text = df.to_csv(index=False, header=header, na_rep="")
    rng = np.random.default_rng(seed)
    lines = text.splitlines()
    lines = [line.replace(",,", ",?,", 1) if rng.random() < 0.5 else line for line in lines]  # '?' or empty
    if blanks:  # blank lines among the rows: skipped by both readers
        for k in sorted(rng.choice(np.arange(2, len(lines)), 5, replace=False), reverse=True):
            lines.insert(k, "")
    if comments:
        lines = ["# written by a test", "| a UCI-style comment", "", *lines]
    end = "\r\n" if crlf else "\n"
    return end.join(lines) + (end if last_newline else "")


FILES = {
    "quoted, header, classification": dict(),
    "CRLF, no header, regression, no last newline": dict(header=False, crlf=True, last_newline=False,
                                                         regression=True),
    "comments, blank lines, header": dict(comments=True, blanks=True),
    "CRLF, comments, header, no last newline": dict(crlf=True, comments=True, last_newline=False),
}


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


@pytest.mark.parametrize("name", FILES)
def test_unquoted_files_are_read_by_arrow(tmp_path, monkeypatch, name):
    """With no quote, Arrow parses every range's rows, the first range's after its
    comment lines and header, with CRLF line ends and blank lines: the same dataset."""
    options = dict(FILES[name])
    regression = options.pop("regression", False)
    path = tmp_path / "data.csv"
    path.write_bytes(csv_text(table(400, 5, regression, quoted=False), **options).encode())
    parsed = arrow_parses(monkeypatch)
    convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    with dask.config.set(scheduler="threads"):
        convert(path, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    n_ranges = len(range_offsets(as_location(path), sniff(as_location(path)), BLOCK))
    assert parsed.count("text") >= n_ranges - 1  # a last range may hold no row: pandas reads it
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")


def test_arrow_reads_pass_1_as_pandas_does(tmp_path, monkeypatch):
    """Ranges with no quote are parsed in pass 1 by Arrow, with pandas' rules applied:
    spaces after the separator skipped, pandas' missing-value markers, blank lines and
    lines of spaces skipped (Arrow refuses those: pandas reads that range), a short row
    (Arrow refuses it too), tabs kept in values.  The label is the first column."""
    rng = np.random.default_rng(6)
    markers = ["NA", "nan", "NULL", "N/A", "None", "", "?", "-nan", "#N/A"]
    lines = []
    for k in range(500):
        x = markers[k % len(markers)] if k % 4 == 0 else f"{rng.normal():.6g}"
        cat = rng.choice(["a", "b\tc", "NA ", "d", "None"])
        lines.append(f"{rng.choice(['yes', 'no'])}, {x},  {cat},{rng.integers(0, 9)}")
    lines[300] = "   "          # a line of spaces: skipped by pandas
    lines[200] = ""              # a blank line
    lines[400] = "no, 1.5"       # a short row: the missing fields are missing
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    parsed = arrow_parses(monkeypatch, numbers_first=False)
    convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, label_column="first", block_size=None)
    with dask.config.set(scheduler="threads"):
        convert(path, tmp_path / "par.zarr", rows_per_chunk=R, label_column="first", block_size=BLOCK)
    n_ranges = len(range_offsets(as_location(path), sniff(as_location(path)), BLOCK))
    assert n_ranges - 3 <= parsed.count("text") < n_ranges  # all but those Arrow refused
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")
    assert load(tmp_path / "seq.zarr")[2]["missing_filled"]["c1"] > 50


def arrow_parses(monkeypatch, numbers_first=True) -> list:
    """Each range Arrow parsed, as it returns: ``"text"`` or ``"numbers"`` (pass 2, and pass 1
    unless ``numbers_first`` is false: then pass 1 parses text only, once per range)."""
    from rfstream.io import csv_ranges

    monkeypatch.setattr(csv_ranges.CsvRanges, "numbers_first", numbers_first)
    parsed, parse = [], csv_ranges.arrow_table

    def counted(data, layout, numeric=frozenset()):
        table = parse(data, layout, numeric)
        parsed.append("numbers" if numeric else "text")
        return table

    monkeypatch.setattr(csv_ranges, "arrow_table", counted)
    return parsed


def test_arrow_reads_numbers_as_pandas_does(tmp_path, monkeypatch):
    """Pass 2 of a range parses its numeric columns with Arrow (pandas >= 3.1): the same
    bits as pandas' parser on numbers of up to 25 digits, exponents to the subnormals,
    -0, integers beyond 2**53, missing markers and a number in a column of text; a range
    whose numeric column holds text is read by pandas.  Chunks are cut inside ranges."""
    from rfstream.io import csv_ranges

    rng = np.random.default_rng(8)
    hard = ["-0", "-0.0", "4.9e-324", "2.2250738585072011e-308", "9007199254740993", "1e-320",
            "0.1000000000000000055511151231257827", "3.4028234663852886e+38", "1.17549435e-38"]
    lines = []
    for k in range(600):
        digits = str(rng.integers(10**17, 10**18)) + str(rng.integers(10**6, 10**7))
        cut = int(rng.integers(0, len(digits)))
        x = hard[k % len(hard)] if k % 5 == 0 else f"{digits[:cut]}.{digits[cut:]}e{rng.integers(-30, 12)}"
        y = "NA" if k % 7 == 0 else f"{rng.normal():.17g}"
        lines.append(f"{x},{y},{rng.choice(['a', 'b', '12'])},{rng.choice(['p', 'q'])}")
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    parsed = arrow_parses(monkeypatch, numbers_first=False)
    seq = convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    with dask.config.set(scheduler="threads"):
        convert(path, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    n_ranges = len(range_offsets(as_location(path), sniff(as_location(path)), BLOCK))
    assert parsed.count("text") == n_ranges  # the first range's rows too, after its header
    assert parsed.count("numbers") == (n_ranges if csv_ranges.ARROW_NUMBERS else 0)
    assert seq["missing_filled"] == {"c1": 86}
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")
    lines[450] = "1.5,x,a,p"  # text in a numeric column: the column is a category
    path.write_text("\n".join(lines) + "\n")
    seq = convert(path, tmp_path / "seq2.zarr", rows_per_chunk=R, block_size=None)
    with dask.config.set(scheduler="threads"):
        convert(path, tmp_path / "par2.zarr", rows_per_chunk=R, block_size=BLOCK)
    assert "c1" in seq["categorical"]
    assert_same(tmp_path / "seq2.zarr", tmp_path / "par2.zarr")


def number_scans(monkeypatch) -> dict:
    """What pass 1's :func:`~rfstream.io.csv_ranges.scan_numbers` returned (``"numbers"``, or
    ``"text"``: None), and how many times the file's pass 1 was read again (``"again"``)."""
    from rfstream.io import csv_ranges

    seen, scan, again = {"numbers": 0, "text": 0, "again": 0}, csv_ranges.scan_numbers, csv_ranges.CsvRanges.again

    def counted_scan(*args):
        out = scan(*args)
        seen["text" if out is None else "numbers"] += 1
        return out

    def counted_again(self, s):
        out = again(self, s)
        seen["again"] += out is not None
        return out

    monkeypatch.setattr(csv_ranges, "scan_numbers", counted_scan)
    monkeypatch.setattr(csv_ranges.CsvRanges, "again", counted_again)
    return seen


@pytest.mark.parametrize("case", ["numbers", "text in a later range", "text after the first lines",
                                  "nan(1)", "spaces and tabs"])
def test_pass_1_parses_numbers_first(tmp_path, monkeypatch, case):
    """Pass 1 parses the columns that look numeric in a range's first lines as numbers
    (:func:`~rfstream.io.csv_ranges.scan_numbers`); where one holds text further on (in
    that range: the range is read as text; in another: the file's pass 1 is read again as
    text, for the column's categories), or a number ``float()`` refuses, the dataset is
    still the one stream's, bit for bit."""
    from rfstream.io import csv_ranges

    monkeypatch.setattr(csv_ranges, "SAMPLE_BYTES", 40)  # a range's first two lines or so
    rng = np.random.default_rng(11)
    lines = [f"{rng.normal():.17g},{rng.integers(0, 5)},{rng.choice(['a', 'b'])},{rng.choice(['y', 'n'])}"
             for _ in range(500)]
    odd = {"text in a later range": "x", "text after the first lines": "x", "nan(1)": "nan(1)"}.get(case)
    if odd is not None:  # the second column's value on one line
        at = 151 if case == "text in a later range" else 6  # 6: in the first range, past its sample
        first, _, rest = lines[at].partition(",")
        lines[at] = f"{first},{odd},{rest.partition(',')[2]}"
    if case == "spaces and tabs":
        lines = [line.replace(",", ", ", 1).replace(",", "\t,", 1) if k % 3 else line
                 for k, line in enumerate(lines)]
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    seen = number_scans(monkeypatch)
    seq = convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    with dask.config.set(scheduler="threads"):
        convert(path, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")
    n_ranges = len(range_offsets(as_location(path), sniff(as_location(path)), BLOCK))
    if odd is None:
        assert "c1" not in seq["categorical"] and seen["again"] == 0
        assert seen["numbers"] >= n_ranges - 1  # a last range may hold no row
    else:
        assert "c1" in seq["categorical"] and seen["again"] == 1
        read_as_text = 1 if case != "text in a later range" else seen["text"]  # 0 there: its sample held it
        assert seen["text"] == read_as_text <= 1 and seen["numbers"] >= n_ranges - 2


def test_no_second_pass_1_when_the_file_is_read_as_one_stream(tmp_path, monkeypatch):
    """A range that does not parse alone sends the file to one stream: pass 1 is not read
    again as text for a column numbers-first left partial (the stream reads it whole)."""
    from rfstream.io import csv_ranges
    from rfstream.io.csv import FileScan

    lines = [f"{k * 0.5},{k % 7},{'ab'[k % 2]},{'yn'[k % 3 == 0]}" for k in range(400)]
    lines[300] = "1.5,x,a,y"  # text in the second column, in a late range only
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    seen = number_scans(monkeypatch)
    scan_part = csv_ranges.CsvRanges.scan_part

    def one_refused(self, loc, part):  # as a quoted line break across its end would
        out = scan_part(self, loc, part)
        return FileScan([[0]], out.columns, out.labels, stream_only=True) if part == 2 else out

    monkeypatch.setattr(csv_ranges.CsvRanges, "scan_part", one_refused)
    with dask.config.set(scheduler="threads"):
        convert(path, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    assert seen["numbers"] > 10 and seen["again"] == 0
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")


def test_a_partial_column_of_text_is_never_decided():
    """A column some range parsed as numbers only, holding text in another, has categories
    pass 1 did not collect: the schema refuses it rather than miss them."""
    from rfstream.io.csv import ColumnScan

    partial = ColumnScan(values={"1"}, partial=True).merge(ColumnScan(numeric=False, values={"a"}))
    with pytest.raises(RuntimeError, match="as numbers only"):
        partial.column("c1", "data.csv")
    assert ColumnScan(values={"1"}, partial=True).column("c1", "data.csv")[0] == "num"


def test_pandas_missing_markers():
    from pandas.io.parsers.readers import STR_NA_VALUES

    from rfstream.io.csv_ranges import PANDAS_NA

    assert set(PANDAS_NA) == set(STR_NA_VALUES)


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


def cuts(path, a, b):
    """``cut(block_size)``: whether a cut of ``path`` in ranges of at most ``block_size``
    bytes falls in ``[a, b]`` (None: it is one range).  The file is sniffed once: the
    tests try thousands of sizes."""
    where = as_location(path)
    layout = sniff(where)

    def cut(block_size):
        offsets = range_offsets(where, layout, block_size)
        return None if len(offsets) < 2 else any(a <= o <= b for o in offsets)
    return cut


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


def several_files(folder, rows, seed=0, **options):
    """CSV files of the same columns and ``rows`` rows each (``csv_text`` options: with a
    header each, unless told), in ``folder``; returns it."""
    folder.mkdir()
    for k, n in enumerate(rows):
        text = csv_text(table(n, seed + k, quoted=False), seed=k, **options)
        (folder / f"part-{k:02d}.csv").write_bytes(text.encode())
    return folder


@pytest.mark.parametrize("name", FILES)
def test_several_files_in_byte_ranges(tmp_path, monkeypatch, name):
    """Several files, each cut into its own byte ranges (one of a single range, one whole
    because compressed): the dataset of the files read whole, one after the other."""
    from rfstream.io import csv_files

    options = dict(FILES[name])
    options.pop("regression", None)
    folder = several_files(tmp_path / "parts", [60, 6, 90, 50, 30], **options)  # 6 rows: one range
    gz = folder / "part-03.csv"
    (folder / "part-03.csv.gz").write_bytes(__import__("gzip").compress(gz.read_bytes()))
    gz.unlink()
    seq = convert(folder, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    made = []
    monkeypatch.setattr(csv_files, "CsvRanges", lambda *a, **k: made.append(k) or csv_ranges_reader(*a, **k))
    keys = Keys()
    with dask.config.set(scheduler="threads"), keys:
        par = convert(folder, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    assert par["shape"] == seq["shape"]
    assert keys.count("rfstream-encode-") > 10  # ranges, not files
    assert any(k.get("one_range") for k in made) and any(not k.get("one_range") for k in made)
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")


def csv_ranges_reader(*args, **kwargs):
    from rfstream.io.csv_ranges import CsvRanges

    return CsvRanges(*args, **kwargs)


def test_several_files_read_again(tmp_path, monkeypatch):
    """A numeric column holding text in one file's range reads pass 1 again as text; a
    file whose range does not parse alone (a quoted line break at a cut) is read whole;
    a file with a header and no row is refused, as when each file is read whole."""
    from rfstream.io import csv_files

    CsvFiles_again = csv_files.CsvFiles.again
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
    monkeypatch.setattr(csv_files.CsvFiles, "again", lambda self, scan: again.append(
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
