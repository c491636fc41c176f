"""Byte ranges parsed by Arrow (rfstream.io.csv_ranges): ranges with no quote are parsed
in pass 1 by Arrow under pandas' rules, and the columns that look numeric are parsed as
numbers first; the dataset is still the sequential reader's, bit for bit
(tests/io/test_convert_byte_ranges.py)."""
import dask
import numpy as np
import pytest
from helpers.byte_range_cases import BLOCK, FILES, R, arrow_parses, assert_same, csv_text, load, table

from rfstream.io import convert
from rfstream.io.csv import sniff
from rfstream.io.csv_ranges import range_offsets
from rfstream.io.location import as_location


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

    monkeypatch.setattr(csv_ranges, "SINGLE_PASS", False)  # pass 1 reads every column (below: not)
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


def odd_lines(case: str, n: int = 500) -> list[str]:
    """Lines of a float, a small integer (the odd value's column), a category and a label;
    missing floats every 9th line."""
    rng = np.random.default_rng(12)
    lines = [f"{'' if k % 9 == 0 else repr(float(rng.normal()))},{rng.integers(0, 5)},"
             f"{rng.choice(['a', 'b'])},{rng.choice(['y', 'n'])}" for k in range(n)]
    odd = {"text in a later range": "x", "text after the first lines": "x", "nan(1)": "nan(1)",
           "inf": "inf", "a quote": '"3"'}.get(case)
    if odd is not None:
        at = 151 if case == "text in a later range" else 6  # 6: in the first range, past its sample
        first, _, rest = lines[at].partition(",")
        lines[at] = f"{first},{odd},{rest.partition(',')[2]}"
    return lines


@pytest.mark.parametrize("case", ["numbers", "text in a later range", "text after the first lines",
                                  "nan(1)", "inf", "a quote"])
def test_pass_2_sums_the_numbers_pass_1_left(tmp_path, monkeypatch, case):
    """Pass 1 reads only the columns that are not numbers in a range's first lines
    (:func:`~rfstream.io.csv_ranges.scan_deferring`); pass 2 sums the others as it writes
    them and fills their missing fields after, from their means.  Where such a column holds
    text further on (in that range or another), a number ``float()`` refuses, an infinity
    or a quoted field, the file is converted again with a whole pass 1
    (:class:`~rfstream.io.csv_ranges.SchemaChanged`, or a pass 1 read again): the dataset,
    its fill values and its counts of missing fields are still the one stream's, bit for
    bit, or the same error."""
    from rfstream.io import convert_tasks, csv_ranges

    if not csv_ranges.ARROW_NUMBERS:
        pytest.skip("pass 1 leaves no column to pass 2 before pandas 3.1")
    monkeypatch.setattr(csv_ranges, "SAMPLE_BYTES", 40)
    path = tmp_path / "data.csv"
    path.write_text("\n".join(odd_lines(case)) + "\n")
    seen, scan, fill = {"deferred": 0, "filled": 0}, csv_ranges.scan_deferring, convert_tasks.fill_missing

    def counted_scan(*args):
        out = scan(*args)
        seen["deferred"] += out is not None
        return out

    def counted_fill(*args):
        seen["filled"] += 1
        return fill(*args)

    monkeypatch.setattr(csv_ranges, "scan_deferring", counted_scan)
    monkeypatch.setattr(convert_tasks, "fill_missing", counted_fill)
    if case == "inf":
        for block_size in (None, BLOCK):
            with dask.config.set(scheduler="threads"), pytest.raises(ValueError, match="data row 7: inf is not a finite"):
                convert(path, tmp_path / "x.zarr", rows_per_chunk=R, block_size=block_size)
        return
    seq = convert(path, tmp_path / "seq.zarr", rows_per_chunk=R, block_size=None)
    with dask.config.set(scheduler="threads"):
        par = convert(path, tmp_path / "par.zarr", rows_per_chunk=R, block_size=BLOCK)
    assert_same(tmp_path / "seq.zarr", tmp_path / "par.zarr")
    assert par["missing_filled"] == seq["missing_filled"] and seq["missing_filled"]["c0"] == 56
    assert par["fill_values"] == seq["fill_values"]
    n_ranges = len(range_offsets(as_location(path), sniff(as_location(path)), BLOCK))
    assert seen["deferred"] >= n_ranges - (1 if case in ("numbers", "text in a later range") else 2)
    if case == "numbers":
        assert "c1" not in seq["categorical"] and seen["filled"] == 1
        assert not np.isnan(load(tmp_path / "par.zarr")[0]).any()
    elif case != "a quote":
        assert "c1" in seq["categorical"]


@pytest.mark.parametrize("single_pass", [False, True])
def test_no_second_pass_1_when_the_file_is_read_as_one_stream(tmp_path, monkeypatch, single_pass):
    """A range that does not parse alone sends the file to one stream: pass 1 is not read
    again as text for a column numbers-first left partial, or left to pass 2 (the stream
    reads it whole)."""
    from rfstream.io import csv_ranges
    from rfstream.io.csv import FileScan

    monkeypatch.setattr(csv_ranges, "SINGLE_PASS", single_pass)

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
    assert (seen["numbers"] == 0 if single_pass else seen["numbers"] > 10) and seen["again"] == 0
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


def test_arrow_columns_encode_as_the_pandas_frames_of_them(tmp_path):
    """Pass 2 encodes a range's Arrow columns without building pandas frames of them
    (ArrowColumns): the same float32 block, exact sums, missing counts and unseen categories
    as the DataFrame of the same columns (FrameColumns), with nulls among numbers and text,
    padded text, and columns of several Arrow chunks (the CSV reader makes one a block)."""
    import pandas as pd
    import pyarrow as pa

    from rfstream.io.csv import Encoder, FrameColumns, Layout
    from rfstream.io.csv_ranges import ArrowColumns, table_chunks

    rng = np.random.default_rng(11)
    n = 900
    numbers = [None if k % 9 == 0 else float(rng.normal()) for k in range(n)]
    counts = [float(rng.integers(0, 40)) for _ in range(n)]
    text = [None if k % 7 == 0 else str(rng.choice(["a", " b", "c ", "zz", "new"])) for k in range(n)]
    label = [str(rng.choice(["x", "y"])) for _ in range(n)]

    def chunked(values, kind):
        return pa.chunked_array([pa.array(values[a:a + 250], kind) for a in range(0, n, 250)])

    table = pa.table({"0": chunked(numbers, pa.float64()), "1": chunked(text, pa.large_string()),
                      "2": chunked(counts, pa.float64()), "3": chunked(label, pa.large_string())})
    assert table.column(1).num_chunks == 4
    layout = Layout(as_location(tmp_path / "data.csv"), ",", 0, False, ["0", "1", "2", "3"], 3, None)
    columns = [("num", None), ("cat", ["a", "b", "c", "zz"]), ("num", 1.5)]
    by_arrow, by_pandas = Encoder(layout, columns), Encoder(layout, columns)
    first_row, rows_per_chunk, at = 40, 128, 100  # a chunk cut at 28 rows, then every 128
    pieces = list(table_chunks(table, first_row, rows_per_chunk, at))
    assert [len(p) for p in pieces[:2]] == [28, 128] and sum(len(p) for p in pieces) == n
    for piece in pieces:
        frame = pd.DataFrame({j: c.to_pandas() for j, c in enumerate(piece.table.columns)})
        frame.index = pd.RangeIndex(piece.rows.start, piece.rows.stop)
        assert list(piece.labels(3)) == list(FrameColumns(frame).labels(3))
        got, want = by_arrow.encode(piece), by_pandas.encode(frame)
        assert got.dtype == want.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert by_arrow.n_unseen == by_pandas.n_unseen == sum(t == "new" for t in text)
    (s_arrow, count_arrow, missing_arrow), (s_pandas, count_pandas, missing_pandas) = \
        by_arrow.numbers[0], by_pandas.numbers[0]
    assert (count_arrow, missing_arrow) == (count_pandas, missing_pandas) == (n - 100, 100)
    assert s_arrow.mean(count_arrow) == s_pandas.mean(count_pandas)
    full = ArrowColumns(table, 0)
    codes, uniques = full.codes(1)
    assert codes.tolist() == [-1 if t is None else uniques.index(t) for t in text]
