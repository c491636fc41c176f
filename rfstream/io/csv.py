"""CSV (and .data/.test/.txt, plain or compressed) -> dense float32 rows, in two passes.

Read behind :func:`rfstream.io.convert`, streamed by ``pandas.read_csv(chunksize=...)`` (a
compressed file cannot be split, so not ``dask.dataframe.read_csv``).  Pass 1
(:func:`scan_file`, :class:`ColumnScan`) summarises each column in memory that does not grow
with the rows; pass 2 (:meth:`CsvReader.encode`) fills missing numbers with the pass-1 mean
and one-hot encodes the other columns.  How to read a file is its :class:`Layout`, from
:func:`sniff`.  Parquet encodes with the same classes.  Narrative: docs/io.md.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .. import sizes
from ..options import ParameterError
from . import guess
from .convert_tasks import Encoding, Schema
from .ingest import (
    BoundedText,
    ExactSum,
    LabelEncoder,
    LabelScanner,
    check_text,
    compression_of,
    encoding_stats,
    first_data_lines,
    like_label_schema,
    open_binary,
    open_text,
    resolve_label_column,
)
from .location import Location

NA_VALUES = ["?"]
"""Missing-value markers on top of pandas' defaults ("", "NA", "NaN", "nan", ...)."""

MAX_CATEGORIES = 1000
"""A text column with more distinct values than this is rejected (one-hot too wide)."""

#: the largest magnitude a float32 feature holds; larger numbers (and inf) are refused
F32_MAX = float(np.finfo(np.float32).max)


# ----------------------------------------------------------------- layout
@dataclass
class Layout:
    """How to read one CSV file: separator, lines to skip, header, label position."""

    path: Location
    sep: str
    skiprows: int
    header: bool
    names: list
    label_index: int | None
    compression: str | None
    line_chars: int = 0  # the longest of the sniffed lines: rows per parsed block (:func:`read_rows`)

    @property
    def features(self) -> list[int]:
        return [j for j in range(len(self.names)) if j != self.label_index]

    @property
    def label_name(self):
        if self.label_index is None:
            return None
        return self.names[self.label_index] if self.header else self.label_index


#: data lines read to find the first two records (a quoted field may span lines)
SNIFF_LINES = 64


def _records(lines: list[str], sep: str, path) -> list[list[str]]:
    """The first two records of ``lines`` as stripped text fields: a quoted field may hold
    line breaks, as CSV allows, so as many lines are joined as the records take."""
    error = None
    for n in range(min(2, len(lines)), len(lines) + 1):
        try:
            rows = pd.read_csv(io.StringIO("\n".join(lines[:n])), sep=sep, header=None, dtype=str,
                               keep_default_na=False, skipinitialspace=True, nrows=2)
        except pd.errors.ParserError as exc:  # the window ends inside a quoted field: read on
            error = exc
            continue
        if len(rows) >= min(2, len(lines)) or n == len(lines):
            return [[str(v).strip() for v in row] for row in rows.to_numpy(dtype=object).tolist()]
    raise ValueError(f"{path}: cannot read as CSV: {error}. A quoted field must end within "
                     f"{SNIFF_LINES} lines of where it starts")


def _unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        k = seen.get(name, 0)
        seen[name] = k + 1
        out.append(name if k == 0 else f"{name}.{k}")
    return out


def _fields(line: str, sep: str) -> int:
    """The fields of ``line`` at most (quotes not honoured), counted without making them."""
    if len(sep) == 1:
        return line.count(sep) + 1
    return sum(1 for _ in re.finditer(sep, line)) + 1


def sniff(path: Location, sep="auto", header="auto", label_column="auto") -> Layout:
    """Leading comment lines, separator, header and label column of a CSV file.

    Lines at the top that are blank or start with ``#`` or ``|`` are skipped.
    ``sep="auto"``: ``","`` if the first data line has a comma, else tab, else ``";"``,
    else runs of whitespace.  ``header="auto"`` and ``label_column="auto"`` follow the
    rules of :mod:`rfstream.io.guess` over the first data lines (a first row that is not
    numbers throughout where the rest are is a header; the label is the first or the last
    column).
    """
    skip, lines = first_data_lines(path, guess.SAMPLE_LINES)
    if not lines:
        raise ValueError(f"{path}: no data rows (the file is empty or only comments)")
    if sep == "auto":
        sep = next((s for s in (",", "\t", ";") if s in lines[0]), r"\s+")
    sizes.check_width(max(_fields(line, sep) for line in lines), path)
    rows = _records(lines[:SNIFF_LINES], sep, path)
    sample = guess.sample_records(lines, sep) if "auto" in (header, label_column) else rows
    sample = sample if len(sample) >= len(rows) else rows
    if header == "auto":
        header = guess.first_row_is_header(sample)
    elif header not in (True, False):
        raise ValueError(f"header={header!r} is not valid; use 'auto', True or False")
    names = _unique_names(rows[0]) if header else [f"c{j}" for j in range(len(rows[0]))]
    if label_column == "auto":
        index = guess.guess_label(sample[1:] if header else sample, names, bool(header), path)
    else:
        index = resolve_label_column(label_column, names, header, path, rows[0])
    return Layout(path, sep, skip, bool(header), names, index, compression_of(path),
                  max(len(line) for line in lines))


# ----------------------------------------------------------------- reading
#: the text one parsed block of rows may hold (pandas holds it whole, and several times over)
BLOCK_TEXT = 2 * sizes.BLOCK_BYTES


def read_rows(layout: Layout, rows_per_chunk: int) -> int:
    """Rows per parsed block: ``rows_per_chunk``, or fewer so that a block of the file's fields
    (:data:`rfstream.sizes.TEXT_CELL_BYTES` each once parsed) and of its sniffed lines stays
    within :data:`rfstream.sizes.BLOCK_BYTES`."""
    rows = sizes.block_rows(len(layout.names), rows_per_chunk, sizes.TEXT_CELL_BYTES)
    return sizes.block_rows(1, rows, max(1, layout.line_chars))


def read_chunks(layout: Layout, rows_per_chunk: int, dtype, usecols=None,
                source=None) -> Iterator[pd.DataFrame]:
    """Stream the file in DataFrames of ``rows_per_chunk`` rows, columns named 0..n-1; a line
    longer than :data:`rfstream.sizes.MAX_LINE_BYTES`, or a block of more than :data:`BLOCK_TEXT`
    characters, is refused before pandas holds it (:class:`~rfstream.io.ingest.BoundedText`).

    ``source``: an open file to read instead of the layout's (a byte range of it,
    :mod:`rfstream.io.csv_ranges`), uncompressed."""
    with ExitStack() as stack:
        if source is None:  # pandas parses a local file's bytes fastest; a URL's text as before
            source = stack.enter_context((open_binary if layout.path.is_local else open_text)(layout.path))
        bounded = BoundedText(source, layout.path, BLOCK_TEXT, rows_per_chunk)
        yield from _parse(layout, bounded, rows_per_chunk, dtype, usecols)


def _parse(layout: Layout, source: BoundedText, rows_per_chunk: int, dtype, usecols):
    reader = pd.read_csv(
        source, sep=layout.sep, header=0 if layout.header else None,
        names=list(range(len(layout.names))), skiprows=layout.skiprows, dtype=dtype,
        chunksize=rows_per_chunk, skipinitialspace=True, na_values=NA_VALUES,
        skip_blank_lines=True, index_col=False, usecols=usecols,
    )
    try:
        with reader:
            for frame in reader:
                source.block_done()
                yield frame
    except sizes.SizeError:
        raise
    except pd.errors.ParserError as exc:
        raise ParameterError(
            f"{layout.path}: cannot read as CSV: {exc}. Every row must have "
            f"{len(layout.names)} fields separated by {layout.sep!r} (pass " "{sep=*} if that is wrong)",
            sep=layout.sep) from exc
    except ValueError as exc:
        raise ParameterError(
            f"{layout.path}: {exc}. A column read as numbers holds text; with " "{like=*}, the "
            "columns that were numeric in the training file must be numeric here too", like=None) from exc


# ----------------------------------------------------------------- pass 1
def as_floats(s: pd.Series | pa.ChunkedArray) -> np.ndarray:
    """``s.astype("float64")`` as numpy (NaN where missing), text parsed as Python's
    ``float()`` parses it; ValueError where a value is not a number.  ``s`` is a pandas
    Series, or a column of text as Arrow parsed it (a byte range's, :mod:`rfstream.io.csv_ranges`).

    Text is cast by Arrow (fast_float: correctly rounded, as ``float()``; docs/io.md) when
    Arrow reads every value and each is finite; otherwise (spaces, underscores, non-ASCII
    digits, ``nan``, ``inf``: forms where the two may disagree on what is a number) by
    ``float()``, after its distinct values (a column of text fails on one of the first,
    without a float made per row).
    """
    arrow = isinstance(s, pa.ChunkedArray)
    if arrow or s.dtype.kind == "O" or isinstance(s.dtype, pd.StringDtype):
        a = v = None
        try:
            a = s if arrow else pa.array(s, from_pandas=True)
            v = pc.cast(a, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            pass
        if v is not None:
            out = v.to_numpy() if arrow else v.to_numpy(zero_copy_only=False)
            if int(np.isfinite(out).sum()) == len(out) - v.null_count:
                return out
        elif a is not None and (pa.types.is_string(a.type) or pa.types.is_large_string(a.type)):
            [float(u) for u in pc.unique(a.drop_null()).to_pylist()]  # ValueError: text
    return (s.to_pandas() if arrow else s).astype("float64").to_numpy()


@dataclass
class ColumnScan:
    """Pass-1 summary of one feature column; memory independent of the row count."""

    numeric: bool = True
    total: ExactSum = field(default_factory=ExactSum)
    count: int = 0
    values: set | None = field(default_factory=set)
    missing: int = 0  # empty or NA fields: filled with the mean (numbers) or all zeros (one-hot)
    partial: bool = False  # some values came as numbers, their text not in ``values``
    deferred: bool = False  # some values were not read (their sums come from pass 2: ``("num", None)``)

    def update(self, s: pd.Series | pa.ChunkedArray) -> None:
        """Add a column's values: a pandas Series, or text as Arrow parsed it (nulls missing),
        or float64 as Arrow parsed it (:func:`~rfstream.io.csv_ranges.scan_numbers`: ``partial``)."""
        arrow = isinstance(s, pa.ChunkedArray)
        numbers = arrow and pa.types.is_float64(s.type)
        self.partial |= numbers
        self.missing += s.null_count if arrow else int(s.isna().sum())
        if self.numeric:
            try:
                v = as_floats(s)
            except (ValueError, TypeError):
                self.numeric = False
            else:
                ok = np.isfinite(v)
                self.total.add(v[ok])
                self.count += int(ok.sum())
        if self.values is not None and not numbers:
            uniques = pc.unique(s.drop_null()).to_pylist() if arrow else pd.unique(s.dropna())
            self.values.update(str(u).strip() for u in uniques)
            if len(self.values) > MAX_CATEGORIES:
                self.values = None

    def merge(self, other: ColumnScan) -> ColumnScan:
        """The summary of both inputs (a new object): the same whatever the split."""
        values = None if self.values is None or other.values is None else self.values | other.values
        if values is not None and len(values) > MAX_CATEGORIES:
            values = None
        return ColumnScan(self.numeric and other.numeric, self.total.merge(other.total),
                          self.count + other.count, values, self.missing + other.missing,
                          self.partial or other.partial, self.deferred or other.deferred)

    def column(self, name, path):
        """``("num", mean)``, ``("num", None)`` (mean from pass 2: ``deferred``) or ``("cat", values)``."""
        if self.numeric:
            return ("num", None if self.deferred else self.total.mean(self.count))
        check_text(self.values or (), path, f"column {name!r}")
        if self.values is None:
            raise ValueError(
                f"{path}: column {name!r} is not numeric and has more than {MAX_CATEGORIES} "
                "distinct values, too many to one-hot encode; drop the column or make it numeric"
            )
        if self.partial:
            raise RuntimeError(f"{path}: column {name!r}: pass 1 read some of its values as numbers only")
        return ("cat", sorted(self.values))


@dataclass
class FileScan:
    """Pass-1 summary of one file, or of several merged in order."""

    rows: list                  # [[data rows]] per file
    columns: dict | None        # feature index -> ColumnScan; None: rows counted only
    labels: LabelScanner | None
    stream_only: bool = False   # a byte range did not parse alone: read the file as one stream
    refused: frozenset = frozenset()  # the paths of such files, of several (CsvFiles)
    deferring: bool | None = False  # whether its parts left numeric columns to pass 2 (None: some)

    def merge(self, other: FileScan) -> FileScan:
        columns = None if self.columns is None else {
            j: s.merge(other.columns[j]) for j, s in self.columns.items()}
        labels = None if self.labels is None else self.labels.merge(other.labels)
        return FileScan(self.rows + other.rows, columns, labels, self.stream_only or other.stream_only,
                        self.refused | other.refused,
                        self.deferring if self.deferring == other.deferring else None)

    @property
    def lacks_categories(self) -> bool:
        """Whether pass 1 must be read again, whole: a text column lacks values some part parsed
        as numbers only, or some parts left numeric columns to pass 2 and others did not."""
        return self.columns is not None and (any(c.partial and not c.numeric for c in self.columns.values())
                                             or self.deferring is None)


def scan_file(layout: Layout, rows_per_chunk: int, labels: LabelScanner | None) -> FileScan:
    """Pass 1 over one file (``labels`` is updated in place)."""
    scan = scan_frames(layout, read_chunks(layout, rows_per_chunk, str), labels)
    if scan.rows == [[0]]:
        raise ValueError(f"{layout.path}: no data rows after the header")
    return scan


def scan_frames(layout: Layout, frames, labels: LabelScanner | None) -> FileScan:
    """Pass 1 over DataFrames of text (a file's), or Arrow tables of text (a byte range's)."""
    scans = {j: ColumnScan() for j in layout.features}
    n_rows = 0
    for df in frames:
        n_rows += len(df)
        for j, st in scans.items():
            st.update(df[j])
        if labels is not None:
            label = df[layout.label_index]
            if isinstance(label, pa.ChunkedArray):
                labels.add(label.null_count, pc.unique(label.drop_null()).to_pylist())
            else:
                labels.update(label)
    return FileScan([[n_rows]], scans, labels)


def count_rows(layout: Layout, rows_per_chunk: int) -> int:
    """Data rows of a file (only the first column is converted)."""
    return sum(len(df) for df in read_chunks(layout, rows_per_chunk, str, usecols=[0]))


# ----------------------------------------------------------------- schema
def schema_attrs(layout: Layout, columns) -> dict:
    names = [layout.names[j] for j in layout.features]
    feature_names = []
    categorical = {}
    fill_values = {}
    for name, (kind, info) in zip(names, columns):
        if kind == "num":
            feature_names.append(name)
            fill_values[name] = None if info is None else float(info)  # None: set after pass 2
        else:
            feature_names.extend(f"{name}={c}" for c in info)
            categorical[name] = list(info)
    return {"format": "csv", "header": layout.header, "sep": layout.sep, "columns": names,
            "feature_names": feature_names, "categorical": categorical,
            "fill_values": fill_values}


def like_columns(attrs: dict, names) -> list:
    """``(kind, fill value or categories)`` of the named feature columns of a dataset."""
    cat = attrs["categorical"]
    for name in names:
        if name in cat:
            sizes.check_size(f"the number of categories of column {name!r} in the schema", len(cat[name]),
                             MAX_CATEGORIES, "convert writes no more; is this the training set's schema?")
    return [("cat", cat[n]) if n in cat else ("num", attrs["fill_values"][n]) for n in names]


def columns_from_attrs(attrs: dict, layout: Layout, like) -> list:
    """Feature columns of a ``like=`` dataset, checked against this file's layout."""
    if attrs.get("format") not in ("csv", "parquet"):
        raise ParameterError("{like=} was not converted from CSV or Parquet "
                             f"(format={attrs.get('format')!r})", like=like)
    like_label = attrs.get("label_index")
    if like_label is not None and layout.label_index not in (None, like_label):
        raise ParameterError(f"{layout.path}: the label column is {layout.label_index} but {{like=}} "
                             f"used column {like_label}; pass {{label_column=}}", like=like,
                             label_column=like_label)
    names = attrs["columns"]
    here = [layout.names[j] for j in layout.features]
    if len(here) != len(names):
        raise ParameterError(
            f"{layout.path} has {len(here)} feature columns ({len(layout.names)} fields per row) "
            f"but {{like=}} has {len(names)}; the files must have the same columns", like=like)
    if layout.header and attrs.get("header") and here != names:
        bad = next(k for k in range(len(names)) if here[k] != names[k])
        raise ParameterError(f"{layout.path}: feature column {bad} is {here[bad]!r} but {{like=}} "
                             f"has {names[bad]!r}; the files must have the same columns in order", like=like)
    return like_columns(attrs, names)


def missing_filled(layout: Layout, scan: FileScan | None) -> dict:
    """``{"missing_filled": {column: rows}}``: the feature columns with fields missing, and how many
    (filled with the mean, or zeros when one-hot); nothing without a scan (``like=``)."""
    if scan is None or scan.columns is None:
        return {}
    return {"missing_filled": {layout.names[j]: c.missing for j, c in scan.columns.items()
                               if c.missing or c.deferred}}  # deferred: set after pass 2


# ----------------------------------------------------------------- pass 2
class FrameColumns:
    """A DataFrame chunk's columns as :meth:`Encoder.encode` reads them: ``numbers(j)`` (float64,
    a missing value NaN), ``codes(j)`` (``(codes, uniques)``, -1 for a missing value, as
    ``pandas.factorize``), ``labels(j)`` (for :class:`~rfstream.io.ingest.LabelEncoder`) and
    ``rows`` (each row's index in the file, for messages).  A byte range parsed by Arrow gives
    the same from its Arrow columns (:class:`rfstream.io.csv_ranges.ArrowColumns`)."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        self.rows = df.index

    def __len__(self) -> int:
        return len(self.df)

    def numbers(self, j) -> np.ndarray:
        return self.df[j].to_numpy(dtype=np.float64, na_value=np.nan)

    def codes(self, j):
        return pd.factorize(self.df[j])

    def labels(self, j):
        return self.df[j]


def chunk_columns(chunk):
    """:class:`FrameColumns` of a DataFrame; any other chunk is taken to read as one."""
    return FrameColumns(chunk) if isinstance(chunk, pd.DataFrame) else chunk


class Encoder:
    """Encodes one chunk of rows (a DataFrame, or columns read as :class:`FrameColumns` reads
    one) into a dense float32 block."""

    def __init__(self, layout: Layout, columns):
        self.layout = layout
        self.columns = columns
        widths = [1 if kind == "num" else len(info) for kind, info in columns]
        self.offsets = np.concatenate([[0], np.cumsum(widths)]).astype(int)
        self.n_features = int(self.offsets[-1])
        self.index = [{c: k for k, c in enumerate(info)} if kind == "cat" else None
                      for kind, info in columns]
        self.n_unseen = 0
        # the columns whose mean pass 1 left to pass 2: {k: [ExactSum, count, missing]}; their
        # missing fields are written NaN, filled by :func:`~rfstream.io.convert_tasks.fill_missing`
        self.numbers = {k: [ExactSum(), 0, 0] for k, (kind, info) in enumerate(columns)
                        if kind == "num" and info is None}

    def dtypes(self) -> dict:
        out = {j: "float64" if kind == "num" else str
               for j, (kind, _) in zip(self.layout.features, self.columns)}
        if self.layout.label_index is not None:
            out[self.layout.label_index] = str
        return out

    def encode(self, chunk) -> np.ndarray:
        cols = chunk_columns(chunk)
        X = np.zeros((len(cols), self.n_features), dtype=np.float32)
        for k, j in enumerate(self.layout.features):
            kind, info = self.columns[k]
            off = self.offsets[k]
            if kind == "num":
                v = cols.numbers(j)
                missing = self._check_finite(v, cols.rows, j)
                if info is None:
                    sums = self.numbers[k]
                    n_ok = len(v) if missing is None else len(v) - int(np.count_nonzero(missing))
                    sums[0].add(v if missing is None else v[~missing])
                    sums[1] += n_ok
                    sums[2] += len(v) - n_ok
                    X[:, off] = v
                else:
                    X[:, off] = v if missing is None else np.where(missing, info, v)
            else:
                self._one_hot(*cols.codes(j), self.index[k], X, off)
        return X

    def _check_finite(self, v, rows, j) -> np.ndarray | None:
        """Refuse ``inf``, ``1e400`` and numbers beyond float32's range, naming the file, the
        column and the row (1 = the first data row): stored, they would end every fit later.
        Returns where ``v`` is NaN (missing), None where it is nowhere (two reductions)."""
        if v.size == 0 or (-F32_MAX <= v.min() and v.max() <= F32_MAX):  # False with a NaN
            return None
        missing = np.isnan(v)
        bad = ~missing & ~(np.abs(v) <= F32_MAX)
        if bad.any():
            k = int(np.argmax(bad))
            raise ValueError(f"{self.layout.path}: column {self.layout.names[j]!r}, data row {int(rows[k]) + 1}: "
                             f"{float(v[k])} is not a finite number that float32 holds (|x| <= {F32_MAX:.3g}); "
                             "fix or remove the value, or leave the field empty for a missing value")
        return missing

    def _one_hot(self, codes: np.ndarray, uniques, index: dict, X: np.ndarray, off: int) -> None:
        lut = np.array([index.get(str(u).strip(), -1) for u in uniques] + [-1], dtype=np.intp)
        c = lut[codes]  # codes == -1 (missing) picks the trailing -1
        self.n_unseen += int(((codes >= 0) & (c < 0)).sum())
        rows = np.flatnonzero(c >= 0)
        X[rows, off + c[rows]] = 1.0


class CsvReader:
    """CSV files read in parts, one per file (:func:`~rfstream.io.convert_tasks.reader_plan`).

    Built on the client from the first file, whose separator, header rule and label
    column every other file follows; those must have as many fields per row (and,
    where both have a header, the same names).  With ``header=True`` every file
    starts with a header row.
    """

    counts_are_free = False

    def __init__(self, first: Location, *, label_column, positive, task, like, like_attrs,
                 rows_per_chunk, header, sep):
        self.layout = sniff(first, sep, header, label_column)
        self.header = header
        self.positive = positive
        self.task = task
        self.like = like
        self.rows_per_chunk = rows_per_chunk
        self.read_rows = read_rows(self.layout, rows_per_chunk)
        self.labeled = self.layout.label_index is not None
        if like_attrs is not None:  # checked here, before any task runs
            self.like_columns = columns_from_attrs(like_attrs, self.layout, like)
            self.like_labels = like_label_schema(like_attrs, like, task, positive, self.labeled)

    def file_layout(self, loc: Location) -> Layout:
        first = self.layout
        if loc.path == first.path.path:
            return first
        layout = sniff(loc, first.sep, self.header, first.label_index)
        if len(layout.names) != len(first.names):
            raise ValueError(f"{loc} has {len(layout.names)} fields per row but {first.path} has "
                             f"{len(first.names)}; every file must have the same columns")
        if layout.header and first.header and layout.names != first.names:
            bad = next(k for k, (a, b) in enumerate(zip(layout.names, first.names)) if a != b)
            raise ValueError(f"{loc}: column {bad} is {layout.names[bad]!r} but {first.path} has "
                             f"{first.names[bad]!r}; every file must have the same columns in order")
        return layout

    def scan(self, loc: Location) -> FileScan:
        layout = self.file_layout(loc)
        if self.like is not None:
            return FileScan([[count_rows(layout, self.read_rows)]], None, None)
        labels = LabelScanner(self.positive) if self.labeled else None
        return scan_file(layout, self.read_rows, labels)

    def decide(self, scan: FileScan | None) -> Schema:
        layout = self.layout
        if self.like is not None:
            columns, labels = self.like_columns, self.like_labels if self.labeled else None
        else:
            columns = [scan.columns[j].column(layout.names[j], layout.path) for j in layout.features]
            labels = scan.labels.decide(self.task, layout.path, layout.label_name) if self.labeled else None
        n_features = sizes.check_width(sum(1 if kind == "num" else len(info) for kind, info in columns),
                                       layout.path)
        if n_features == 0:
            raise ValueError(f"{layout.path}: no feature columns besides the label")
        attrs = {**schema_attrs(layout, columns), **missing_filled(layout, scan)}
        attrs.update(labels.attrs() if labels else {"task": None, "positive_class": None})
        attrs.update(label_column=layout.label_name, label_index=layout.label_index)
        y_dtype = LabelEncoder(labels, layout.path).dtype if labels else None
        return Schema(n_features, y_dtype, attrs, (columns, labels))

    def filled(self, schema: Schema, numbers: dict) -> dict:
        """After pass 2 of the numeric columns pass 1 left to it (``("num", None)``; ``numbers``:
        ``{column: (ExactSum, count, missing)}`` of all rows): their means and missing fields set
        in ``schema.attrs`` as pass 1 would have set them; ``{output column: mean}`` of those
        with fields to fill (:func:`~rfstream.io.convert_tasks.fill_missing`)."""
        layout, (columns, _) = self.layout, schema.spec
        attrs = schema.attrs
        offsets = np.cumsum([0] + [1 if kind == "num" else len(info) for kind, info in columns])
        missing = dict(attrs.get("missing_filled", {}))
        fills = {}
        for k, j in enumerate(layout.features):
            kind, info = columns[k]
            if kind != "num" or info is not None:
                continue
            total, count, n_missing = numbers.get(j, (ExactSum(), 0, 0))
            name = layout.names[j]
            mean = total.mean(count)
            attrs["fill_values"][name] = float(mean)
            missing.pop(name, None)
            if n_missing:
                missing[name] = n_missing
                fills[int(offsets[k])] = mean
        if "missing_filled" in attrs:
            attrs["missing_filled"] = {layout.names[j]: missing[layout.names[j]] for j in layout.features
                                       if layout.names[j] in missing}
        return fills

    def encode(self, loc: Location, part: int, schema: Schema, *, layout: Layout | None = None,
               source=None, first_row: int = 0, frames=None) -> Encoding:
        """Pass 2 of a file; or of one byte range of it (:mod:`rfstream.io.csv_ranges`): its
        ``layout``, ``source()`` (a context manager giving its bytes as an open file) and the
        index of its first row in the file (``first_row``, for messages); or, instead of
        ``source``, ``frames``: its chunks of rows, DataFrames as pandas reads them with
        :meth:`Encoder.dtypes` indexed by row of the file, or columns that read as one
        (:class:`FrameColumns`)."""
        layout = layout or self.file_layout(loc)
        columns, label_schema = schema.spec
        enc = Encoder(layout, columns)
        labels = LabelEncoder(label_schema, loc) if label_schema else None

        def parsed():
            with source() if source is not None else nullcontext() as f:
                for df in read_chunks(layout, self.read_rows, enc.dtypes(), source=f):
                    df.index += first_row
                    yield df

        def blocks():
            for chunk in parsed() if frames is None else frames:
                cols = chunk_columns(chunk)
                y = labels.encode(cols.labels(layout.label_index)) if labels else None
                yield enc.encode(cols), y

        counts = encoding_stats(labels, enc)
        if not enc.numbers:
            return Encoding(blocks(), counts)
        return Encoding(blocks(), lambda: {**counts(), "numbers": {layout.features[k]: tuple(v)
                                                                   for k, v in enc.numbers.items()}})
