"""CSV files read in byte ranges by Dask tasks: the dataset of one stream, bit for bit.

Behind :func:`rfstream.io.convert` for one uncompressed CSV file bigger than ``block_size``
(:data:`BLOCK_SIZE`) and for several CSV files (:class:`CsvFiles`).  A file is cut into equal
ranges at newlines as ``dask.dataframe.read_csv`` cuts (``fsspec.utils.read_block``), each a
task of both passes, as many as give every worker a share (:func:`range_count`); rows without
quotes are parsed by Arrow with pandas' rules applied, pass 1 reading only the columns that are
not numbers (their sums come from pass 2: :data:`SINGLE_PASS`).  A
range that does not parse alone (a quoted line break across a cut), a compressed file or a
header the cuts cannot find is read as one stream.  Narrative: docs/io.md.
"""
from __future__ import annotations

import copy
import io
import os
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from fsspec.utils import read_block, seek_delimiter
from packaging.version import Version

from .. import sizes
from .convert_tasks import Job, Schema, parts_plan, readers_plan
from .csv import NA_VALUES, ColumnScan, CsvReader, FileScan, Layout, read_chunks, scan_frames
from .ingest import BLOCK_SIZE, LabelScanner, Plan, compression_of, long_line
from .location import Location, storage_errors

__all__ = ["BLOCK_SIZE", "CsvFiles", "CsvRanges", "SchemaChanged", "check_block_size", "plan", "range_count",
           "range_offsets", "several_blocks", "several_plan", "worker_threads"]


def range_offsets(src: Location, layout: Layout, block_size: int | None) -> list[int]:
    """The nominal first byte of each range of ``src``; ``[0]``: one stream (no block size, a
    compressed file or one block, a bare carriage return before the rows, a line break in a name)."""
    return ranges(src, layout, block_size)[0]


def ranges(src: Location, layout: Layout, block_size: int | None,
           one_range: bool = False) -> tuple[list[int], int | None]:
    """``(range_offsets, data_start)``: the offsets of :func:`range_offsets`, and the bytes of
    the leading comment lines and header, the lines pandas skips before the first row,
    read once (None: one stream).  The ranges are as many as :func:`range_count` says for
    the current workers.  With ``one_range`` (several files, :class:`CsvFiles`, whose
    parallelism is the files'), a file of one block is one range rather than one stream,
    and a bigger one is cut into ``ceil(size / block_size)`` ranges."""
    if block_size is None or layout.compression is not None:
        return [0], None
    with storage_errors(src, "cannot be read"):
        size = src.fs.size(src.path)
    if (size <= block_size and not one_range) or (layout.header and any("\n" in n or "\r" in n
                                                                      for n in layout.names)):
        return [0], None
    data_start = 0
    with storage_errors(src, "cannot be read"), src.open("rb") as f:
        for _ in range(layout.skiprows + layout.header):
            line = f.readline()
            if b"\r" in line.removesuffix(b"\n").removesuffix(b"\r"):
                return [0], None
            data_start += len(line)
    n = range_count(size, block_size, 1 if one_range else worker_threads())  # ranges of equal size, none bigger than a block
    return [0] + [o for o in (k * size // n for k in range(1, n)) if o >= data_start], data_start


MIN_RANGE = 8 * 2**20
"""The fewest bytes of a range that :func:`range_count` cuts to give every worker a share."""

ROUNDS = 2
"""Ranges per worker thread that :func:`range_count` asks for at least (file size allowing)."""


def range_count(size: int, block_size: int, threads: int) -> int:
    """How many equal ranges a file of ``size`` bytes is cut into for ``threads`` worker threads.

    The rule (docs/io.md, "Ranges and workers"), set before measuring: at least
    ``ceil(size / block_size)`` (no range bigger than a block, for memory); as many as a
    whole number of rounds of the workers, at least :data:`ROUNDS` (each worker busy to
    the end of a pass: 12 ranges on 16 workers left 4 idle, 3 on 2 workers one for a third
    of each pass); but no range smaller than :data:`MIN_RANGE` bytes (each task's fixed
    costs, and the seam chunk it shares, small against its parse); a file too small for one
    round of such ranges, or one worker thread, keeps ``ceil(size / block_size)``."""
    n = max(1, -(-size // block_size))
    threads = int(threads)
    if threads <= 1:
        return n
    rounds = max(ROUNDS, -(-n // threads))
    while rounds > 1 and size // (threads * rounds) < MIN_RANGE:
        rounds -= 1
    if threads * rounds <= n or size // (threads * rounds) < MIN_RANGE:
        return n
    return threads * rounds


def worker_threads() -> int:
    """The threads that run the tasks of a pass: the workers' of the current
    ``distributed`` client, else the local scheduler's (``num_workers`` or the cores; 1 for
    "synchronous")."""
    import dask

    from ..cluster import LOCAL_SCHEDULERS, current_client

    scheduler = dask.config.get("scheduler", None)
    if scheduler == "synchronous" or scheduler == "sync":
        return 1
    client = None if scheduler in LOCAL_SCHEDULERS else current_client()
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return dask.config.get("num_workers", None) or os.cpu_count() or 1


PANDAS_NA = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
             "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")
"""pandas' default missing-value markers (its ``read_csv`` docs; checked against pandas by a test)."""

_MISSING_VALUES = sorted({*PANDAS_NA, *NA_VALUES})
_MISSING = pa.array(_MISSING_VALUES, pa.large_string())

ARROW_NUMBERS = Version(pd.__version__) >= Version("3.1")
"""Whether pass 2 of a range may parse its numbers with Arrow: from pandas 3.1 on, pandas'
parser reads numbers with fast_float (pandas-dev/pandas#64432), correctly rounded, as
Arrow's CSV reader does, so the two give the same float64 for every number both accept.
Before it, pandas' own parser may differ in the last bit on numbers of 16 digits or more,
and the one stream's dataset would not be matched bit for bit."""


def arrow_table(data: bytes, layout: Layout, numeric=frozenset(), include=None) -> pa.Table:
    """The rows of a range with no header, no quote and no NUL, as pandas reads them
    (leading spaces of a field skipped, missing-value markers missing, blank lines
    skipped), parsed by Arrow: columns ``"0"``, ``"1"``, ... of text, except the indices in
    ``numeric``, parsed as float64 (a missing value null); only the indices in ``include``
    when given (every row still split and its fields counted); raises
    ``pyarrow.ArrowInvalid`` where Arrow cannot read it (or a numeric column holds text)."""
    names = [str(j) for j in range(len(layout.names))]
    text = pa.large_string()  # what pandas' "str" columns hold: taken without a copy
    types = {name: pa.float64() if j in numeric else text for j, name in enumerate(names)}
    table = pacsv.read_csv(
        io.BytesIO(data), read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
        parse_options=pacsv.ParseOptions(delimiter=layout.sep, quote_char=False, double_quote=False,
                                         escape_char=False, ignore_empty_lines=True),
        convert_options=pacsv.ConvertOptions(
            column_types=types, null_values=_MISSING_VALUES, strings_can_be_null=True,
            quoted_strings_can_be_null=False, include_columns=None if include is None else [names[j] for j in include]))
    if b" " not in data:  # each field as pandas sees it: Arrow's nulls are pandas' markers
        return table
    columns = []  # pandas skips the spaces before a field, then looks for a marker
    for name, col in zip(table.column_names, table.columns):
        if int(name) not in numeric:  # (a float column's " NA" is refused above: pandas reads that range)
            col = pc.utf8_ltrim(col, characters=" ")
            col = pc.if_else(pc.is_in(col, value_set=_MISSING), pa.scalar(None, text), col)
        columns.append(col)
    return pa.table(columns, names=table.column_names)


SAMPLE_BYTES = 64 * 2**10
"""Bytes of a range's first lines that pass 1 reads as text to choose the columns it asks
Arrow to parse as numbers (:func:`scan_numbers`)."""


def scan_numbers(rows: bytes, layout: Layout, labels: LabelScanner | None) -> FileScan | None:
    """Pass 1 over a range's rows with the feature columns whose first lines
    (:data:`SAMPLE_BYTES`) all parse as numbers parsed by Arrow as float64; None where
    that may differ from pass 1 over text (:func:`arrow_table`): a column of those holds
    text further on, or a number that is not finite (text such as ``nan(1)`` that
    ``float()`` refuses), or Arrow cannot read the rows.

    Those columns' values are not kept (their scans are ``partial``; a column holding text
    in another range makes :meth:`CsvRanges.again` read pass 1 again as text)."""
    head = rows[:rows.find(b"\n", SAMPLE_BYTES) + 1] or rows
    try:
        sample = arrow_table(head, layout)
        numeric = {j for j in layout.features if _numbers(sample.column(j))}
        table = arrow_table(rows, layout, numeric) if numeric else None
    except pa.ArrowInvalid:
        return None
    if table is None or not all(_finite(table.column(j)) for j in numeric):
        return None
    return scan_frames(layout, [table], labels)


SINGLE_PASS = ARROW_NUMBERS
"""Whether pass 1 of a range leaves the columns whose first lines hold numbers only to pass 2
(:func:`scan_deferring`): pass 2 parses them anyway, so it sums them as it writes and fills
their missing fields after (:func:`~rfstream.io.convert_tasks.fill_missing`); pass 1 reads
only the other columns.  Needs pass 2's numbers to be pass 1's (:data:`ARROW_NUMBERS`)."""


class SchemaChanged(Exception):
    """Pass 2 found that a column pass 1 left to it (:func:`scan_deferring`) is not numbers
    throughout: :func:`rfstream.io.convert` converts again with a whole pass 1
    (``single_pass=False``); the message is for no one."""


def scan_deferring(rows: bytes, layout: Layout, labels: LabelScanner | None) -> FileScan | None:
    """Pass 1 over a range's rows reading only the columns that are not numbers in its first
    lines (:data:`SAMPLE_BYTES`), and the label: every row still split and its fields counted
    by Arrow; the others' scans are ``deferred`` (and ``partial``: their text is not kept).
    None where the first lines do not parse as pass 2 will parse the range (:func:`arrow_table`)."""
    head = rows[:rows.find(b"\n", SAMPLE_BYTES) + 1] or rows
    try:
        sample = arrow_table(head, layout)
        numeric = {j for j in layout.features if _numbers(sample.column(j))}
        if not numeric:
            return None
        if not all(_finite(c) for c in arrow_table(head, layout, numeric, numeric).columns):
            return None
        table = arrow_table(rows, layout, include=[j for j in range(len(layout.names)) if j not in numeric])
    except pa.ArrowInvalid:
        return None
    scans = {}
    for j in layout.features:
        scans[j] = ColumnScan(partial=True, deferred=True) if j in numeric else ColumnScan()
        if j not in numeric:
            scans[j].update(table.column(str(j)))
    if labels is not None:
        label = table.column(str(layout.label_index))
        labels.add(label.null_count, pc.unique(label.drop_null()).to_pylist())
    return FileScan([[table.num_rows]], scans, labels, deferring=True)


def _numbers(column: pa.ChunkedArray) -> bool:
    try:
        return _finite(pc.cast(column, pa.float64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False


def _finite(column: pa.ChunkedArray) -> bool:
    return pc.all(pc.is_finite(column), min_count=0).as_py()


class ArrowColumns:
    """Rows of a range's Arrow table as :meth:`rfstream.io.csv.Encoder.encode` reads a chunk
    (:class:`rfstream.io.csv.FrameColumns`' methods), without pandas: numbers as float64 (a
    null NaN) and text as codes of its distinct values, the values pandas' frames of the same
    columns give (the label column alone goes through pandas, for the label encoder)."""

    def __init__(self, table: pa.Table, first_row: int):
        self.table = table
        self.rows = range(first_row, first_row + table.num_rows)

    def __len__(self) -> int:
        return self.table.num_rows

    def numbers(self, j) -> np.ndarray:
        return self.table.column(j).to_numpy()

    def codes(self, j):
        column = self.table.column(j)
        coded = pc.dictionary_encode(column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
        return coded.indices.fill_null(-1).to_numpy(), coded.dictionary.to_pylist()

    def labels(self, j):
        return self.table.column(j).to_pandas()


def table_chunks(table: pa.Table, first_row: int, rows_per_chunk: int, at: int):
    """:class:`ArrowColumns` of ``table``'s rows, cut where the output's chunks of
    ``rows_per_chunk`` rows are (its first row is row ``first_row`` of the file, row ``at``
    of the output)."""
    a, n = 0, table.num_rows
    while a < n:
        b = min(n, a + rows_per_chunk - (at + a) % rows_per_chunk)
        yield ArrowColumns(table.slice(a, b - a), first_row + a)
        a = b


def by_arrow(layout: Layout) -> bool:
    """Whether a range's rows may be parsed by Arrow (:func:`arrow_table`), as far as the
    layout says: one separator character, two columns or more."""
    sep = layout.sep
    return len(sep) == 1 and sep not in ' "\0' and len(layout.names) >= 2


def plain(data: bytes) -> bool:
    """Whether a range's bytes hold no double quote and no NUL byte (Arrow may parse it)."""
    return b'"' not in data and b"\0" not in data


def check_block_size(block_size) -> int | None:
    if block_size is None:
        return None
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int (bytes) or None (one stream); "
                         f"got {block_size!r}")
    return block_size


class CsvRanges:
    """A CSV file read in byte ranges: the reader of parts of
    :func:`~rfstream.io.convert_tasks.parts_plan` (``scan_part``, ``decide``, ``encode``)
    over a :class:`~rfstream.io.csv.CsvReader` (``whole``, the reader of one stream)."""

    counts_are_free = False
    numbers_first = True  # pass 1 tries :func:`scan_deferring` or :func:`scan_numbers` first (:meth:`again`: not)

    def __init__(self, src: Location, block_size: int | None, *, whole: CsvReader | None = None,
                 one_range: bool = False, single_pass: bool | None = None, **options):
        """``whole``: the reader of the first of several files, whose rules this one follows
        (:class:`CsvFiles`); ``one_range``: as for :func:`ranges`; ``single_pass``: pass 1 may
        leave numeric columns to pass 2 (:func:`scan_deferring`; None: :data:`SINGLE_PASS`)."""
        self.single_pass = SINGLE_PASS if single_pass is None else single_pass
        self.whole = whole if whole is not None else CsvReader(src, **options)
        self.like = self.whole.like
        self.rows_per_chunk = self.whole.rows_per_chunk
        self.file = self.whole.file_layout(src)
        self.offsets, self.data_start = ranges(src, self.file, block_size, one_range)

    def layout(self, part: int) -> Layout:
        """The first range is read as the file (comment lines, header); the others hold rows only."""
        return self.file if part == 0 else replace(self.file, skiprows=0, header=False)

    def read(self, loc: Location, part: int) -> bytes:
        """The bytes of range ``part``: whole lines, cut as ``read_block`` cuts them."""
        start = self.offsets[part]
        length = self.offsets[part + 1] - start if part + 1 < len(self.offsets) else None
        with storage_errors(loc, "cannot be read"), loc.open("rb") as f:
            for at in (start, None if length is None else start + length):
                _check_cut(f, at, loc)
            return read_block(f, start, length, delimiter=b"\n")

    def arrow_rows(self, part: int, data: bytes) -> bytes | None:
        """The rows of a range's bytes that Arrow may parse (the first range's after its
        comment lines and header), or None: pandas reads the range (:func:`by_arrow`, :func:`plain`)."""
        rows = data[self.data_start:] if part == 0 else data
        return rows if by_arrow(self.file) and plain(rows) else None

    def source(self, loc: Location, part: int, data: bytes | None = None):
        """A context manager: the range's bytes (``data``, else read) as a file, as the one
        stream's reader sees the file (pandas reads a local file as bytes, a URL through
        universal newlines)."""

        @contextmanager
        def opened():
            raw = io.BytesIO(self.read(loc, part) if data is None else data)
            if loc.is_local:
                yield raw
            else:
                with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None) as text:
                    yield text

        return opened

    def scan_part(self, loc: Location, part: int) -> FileScan:
        """Pass 1 over one range: its summary, or ``stream_only`` when it does not parse alone."""
        layout = self.layout(part)
        labels = LabelScanner(self.whole.positive) if self.whole.labeled and self.like is None else None
        data = self.read(loc, part)
        rows = self.arrow_rows(part, data)
        if rows is not None:
            scan = None
            if self.numbers_first and self.like is None:
                scan = scan_deferring(rows, layout, labels) if self.single_pass else None
                scan = scan or scan_numbers(rows, layout, labels)
            if scan is not None:
                return scan
            try:
                table = arrow_table(rows, layout)
            except pa.ArrowInvalid:  # a row of another width, a line of spaces, not UTF-8: pandas reads it
                pass
            else:
                if self.like is not None:
                    return FileScan([[table.num_rows]], None, None)
                return scan_frames(layout, [table], labels)
        with self.source(loc, part, data)() as source:
            try:
                if self.like is not None:  # the rows only: where pass 2 writes them
                    frames = read_chunks(layout, self.whole.read_rows, str, usecols=[0], source=source)
                    return FileScan([[sum(len(df) for df in frames)]], None, None)
                frames = read_chunks(layout, self.whole.read_rows, str, source=source)
                return scan_frames(layout, frames, labels)
            except ValueError:  # a quoted field across a cut, or a malformed row: one stream decides
                columns = None if self.like is not None else {j: ColumnScan() for j in layout.features}
                fresh = None if labels is None else LabelScanner(self.whole.positive)
                return FileScan([[0]], columns, fresh, stream_only=True)

    def again(self, scan: FileScan) -> CsvRanges | None:
        """A reader to read pass 1 again with, as text, where ``scan`` lacks the values of a
        column that holds text (:func:`scan_numbers` parsed it as numbers in some range); else None."""
        if not scan.lacks_categories:
            return None
        reader = copy.copy(self)
        reader.numbers_first = False
        return reader

    def decide(self, scan: FileScan) -> Schema:
        """The one stream's schema; with each range's first row, in the file and in the output
        (``spec = (csv spec, starts, starts)``; they differ where several files are converted)."""
        schema = self.whole.decide(scan)
        starts = first_rows(scan.rows)
        return replace(schema, spec=(schema.spec, starts, starts))

    def filled(self, schema: Schema, numbers: dict) -> dict:
        """:meth:`~rfstream.io.csv.CsvReader.filled` of the file."""
        return self.whole.filled(replace(schema, spec=schema.spec[0]), numbers)

    def encode(self, loc: Location, part: int, schema: Schema):
        """Pass 2 over one range: parsed by Arrow where pass 1's rules allow and its numbers
        are pandas' (:data:`ARROW_NUMBERS`), with the numeric columns parsed as float64 and
        encoded from Arrow's columns, cut at the output's chunks (:func:`table_chunks`); by
        pandas otherwise, or where Arrow refuses."""
        spec, starts, outputs = schema.spec
        layout = self.layout(part)
        data = self.read(loc, part)
        frames = None
        rows = self.arrow_rows(part, data)
        deferred = {j for j, (kind, info) in zip(layout.features, spec[0]) if kind == "num" and info is None}
        if ARROW_NUMBERS and rows is not None:
            numeric = {j for j, (kind, _) in zip(layout.features, spec[0]) if kind == "num"}
            try:
                table = arrow_table(rows, layout, numeric)
            except pa.ArrowInvalid:  # text in a numeric column, a row of another width: pandas reads it
                pass
            else:
                if not all(_finite(table.column(j)) for j in deferred):  # inf, or text such as nan(1)
                    raise SchemaChanged(f"{loc}: range {part}")
                frames = table_chunks(table, starts[part], self.rows_per_chunk, outputs[part])
        if frames is None and deferred:  # pandas would read it: pass 1 did not see its text
            raise SchemaChanged(f"{loc}: range {part}")
        return self.whole.encode(loc, part, replace(schema, spec=spec), layout=layout, frames=frames,
                                 source=self.source(loc, part, data), first_row=starts[part])


def _check_cut(f, at: int | None, loc: Location) -> None:
    """Refuse a range whose cut at byte ``at`` falls in a line longer than
    :data:`rfstream.sizes.MAX_LINE_BYTES`: ``read_block`` would read to its end (one block at
    a time here, so nothing of the line's size is held)."""
    if not at:
        return
    f.seek(at)
    seek_delimiter(f, b"\n", 2**16)
    if f.tell() - at > sizes.MAX_LINE_BYTES:
        raise long_line(loc)


def first_rows(rows) -> list[int]:
    """The first row of each part, from pass 1's ``[[rows of the part]]`` in order."""
    return [int(r) for r in np.cumsum([0] + [n for (n,) in rows[:-1]])]


def several_blocks(src: Location, block_size: int | None) -> bool:
    """Whether ``src`` is uncompressed and bigger than one block (read in byte ranges)."""
    if block_size is None or compression_of(src) is not None:
        return False
    with storage_errors(src, "cannot be read"):
        return src.fs.size(src.path) > block_size


def plan(src: Location, options: dict, block_size: int | None) -> Plan | None:
    """The plan of ``src`` read in byte ranges by tasks; None when it is one stream (one
    block, compressed, or a header the cuts cannot find).  ``options`` may hold
    ``single_pass`` (:class:`CsvRanges`)."""
    if not several_blocks(src, block_size):
        return None
    reader = CsvRanges(src, block_size, **options)
    if len(reader.offsets) < 2:
        return None
    return parts_plan(reader, src, len(reader.offsets), reader.rows_per_chunk)


class CsvFiles:
    """CSV files read in parts: a part is a byte range of an uncompressed file
    (:class:`CsvRanges`), or a whole file read by ``whole``, the
    :class:`~rfstream.io.csv.CsvReader` of the first file, whose rules every file follows."""

    counts_are_free = False

    def __init__(self, files: list[Location], block_size: int | None, *, single_pass: bool | None = None,
                 **options):
        self.single_pass = SINGLE_PASS if single_pass is None else single_pass
        self.whole = CsvReader(files[0], **options)
        self.like = self.whole.like
        self.rows_per_chunk = self.whole.rows_per_chunk
        self.files = files
        self.block_size = block_size
        self.numbers_first = True
        self.cut = {}          # path -> CsvRanges of a file of several ranges
        self.streams = set()   # paths of the files read whole, by pandas
        for f in files:
            if block_size is None or compression_of(f) is not None:
                self.streams.add(f.path)
            elif several_blocks(f, block_size):
                ranged = CsvRanges(f, block_size, whole=self.whole, single_pass=self.single_pass)
                if ranged.data_start is None:
                    self.streams.add(f.path)
                else:
                    self.cut[f.path] = ranged

    @property
    def units(self) -> list[Job]:
        """A :class:`~rfstream.io.convert_tasks.Job` per part, files in order."""
        return [Job(f, k) for f in self.files
                for k in range(len(self.cut[f.path].offsets) if f.path in self.cut else 1)]

    def ranges(self, loc: Location) -> CsvRanges | None:
        """The reader of ``loc``'s ranges (a file of one block: one range, found here, in the
        task), or None: the file is read whole."""
        if loc.path in self.streams:
            return None
        ranged = self.cut.get(loc.path)
        if ranged is None:
            ranged = CsvRanges(loc, self.block_size, whole=self.whole, one_range=True,
                               single_pass=self.single_pass)
            ranged.numbers_first = self.numbers_first
        return None if ranged.data_start is None else ranged

    def scan_part(self, loc: Location, part: int) -> FileScan:
        ranged = self.ranges(loc)
        if ranged is None:
            return self.whole.scan(loc)
        scan = ranged.scan_part(loc, part)
        if scan.stream_only:
            return replace(scan, stream_only=False, refused=frozenset({loc.path}))
        if loc.path not in self.cut and scan.rows == [[0]]:  # as the file read whole says
            raise ValueError(f"{loc}: no data rows after the header")
        return scan

    def again(self, scan: FileScan) -> CsvFiles | None:
        """A reader to read pass 1 again with: the files with a range that did not parse
        alone read whole, and every range as text if a column parsed as numbers in some
        range holds text (its categories were not all collected); None when neither."""
        partial = self.numbers_first and scan.lacks_categories
        if not scan.refused and not partial:
            return None
        other = copy.copy(self)
        other.streams = self.streams | scan.refused
        other.numbers_first = self.numbers_first and not partial
        other.cut = {}
        for path, ranged in self.cut.items():
            if path not in scan.refused:
                other.cut[path] = copy.copy(ranged)
                other.cut[path].numbers_first = other.numbers_first
        return other

    def decide(self, scan: FileScan):
        """The files' schema (the first file's reader decides it); with each range's first
        row in its file and in the output (``spec = (csv spec, {path: (starts, outputs)})``)."""
        schema = self.whole.decide(scan)
        rows = {}
        read = {}  # the rows of a file's parts so far
        for unit, out, (n,) in zip(self.units, first_rows(scan.rows), scan.rows):
            path = unit.loc.path
            starts, outputs = rows.setdefault(path, ([], []))
            starts.append(read.get(path, 0))
            outputs.append(out)
            read[path] = starts[-1] + n
        return replace(schema, spec=(schema.spec, rows))

    def filled(self, schema, numbers: dict) -> dict:
        """:meth:`~rfstream.io.csv.CsvReader.filled` of the files (the first file's reader)."""
        return self.whole.filled(replace(schema, spec=schema.spec[0]), numbers)

    def encode(self, loc: Location, part: int, schema):
        spec, rows = schema.spec
        ranged = self.ranges(loc)
        if ranged is None:
            return self.whole.encode(loc, part, replace(schema, spec=spec))
        starts, outputs = rows[loc.path]
        return ranged.encode(loc, part, replace(schema, spec=(spec, starts, outputs)))


def several_plan(files: list[Location], options: dict, block_size: int | None) -> Plan:
    """The plan of several CSV files, read in parts by tasks (:class:`CsvFiles`)."""
    reader = CsvFiles(files, block_size, **options)
    return readers_plan(reader, reader.rows_per_chunk,
                        f"no data rows in any of the {len(files)} files ({files[0]}, ...)")
