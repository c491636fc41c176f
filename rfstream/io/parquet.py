"""Parquet -> dense float32 rows, by row groups (behind :func:`rfstream.io.convert`).

A file is read with pyarrow's :class:`~pyarrow.parquet.ParquetFile`, one batch of at most
``rows_per_chunk`` rows of one row group at a time, never whole.  Its columns are encoded by
CSV's rules and pieces (:mod:`rfstream.io.csv`): numbers and booleans are numeric, a null is
the column's mean, dictionary columns and text columns not all numbers are one-hot; dates,
binary and nested types are refused, naming the column.  Several files must all have the first's columns;
pass 2 has one task per row group.  The rules in full: docs/io.md, "rfstream/io/parquet.py".
"""
from __future__ import annotations

import re
from contextlib import ExitStack, contextmanager

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import sizes
from .convert_tasks import Encoding, Schema
from .csv import ColumnScan, Encoder, FileScan, Layout, like_columns, missing_filled, schema_attrs
from .ingest import (
    LabelEncoder,
    LabelScanner,
    encoding_stats,
    like_label_schema,
    resolve_label_column,
)
from ..options import ParameterError
from .location import Location

MAGIC = b"PAR1"
BUFFER_SIZE = 1 << 23
"""Bytes read at a time from a column chunk (pyarrow otherwise reads it whole)."""


def has_magic(loc: Location) -> bool:
    """True when the file starts with Parquet's magic bytes ``PAR1``."""
    with loc.open("rb") as f:
        return f.read(4) == MAGIC


def _failed(loc: Location, exc: Exception) -> ValueError:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return ValueError(f"{loc}: cannot read as Parquet: {text}; is it a complete Parquet file?")


@contextmanager
def open_parquet(loc: Location):
    """A :class:`pyarrow.parquet.ParquetFile` of a local or remote file; errors in one line."""
    with ExitStack() as stack:
        source = loc.path if loc.is_local else stack.enter_context(loc.open("rb"))
        try:
            pf = pq.ParquetFile(source, buffer_size=BUFFER_SIZE)
        except (pa.ArrowException, OSError) as exc:
            raise _failed(loc, exc) from None
        stack.callback(pf.close)
        yield pf


def _batches(pf, loc: Location, names: list, rows_per_chunk: int, row_groups=None):
    it = pf.iter_batches(batch_size=rows_per_chunk, row_groups=row_groups, columns=names)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise _failed(loc, exc) from None
        yield batch


# ----------------------------------------------------------------- columns
def _kind(t: pa.DataType) -> str | None:
    """"num", "text" (a string), "cat" (a dictionary) or None (not readable)."""
    if pa.types.is_dictionary(t):
        return "cat"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_decimal(t) or pa.types.is_null(t)):
        return "num"
    return None


def _numeric(arr: pa.Array) -> pd.Series:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if _kind(arr.type) == "num":
        return pd.Series(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False))
    return arr.to_pandas()  # strings; ColumnScan and the encoding parse them


def _text(arr: pa.Array) -> pd.Series:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if _kind(arr.type) != "text":
        arr = pc.cast(arr, pa.string())
    return arr.to_pandas()


def _labels(arr: pa.Array) -> pd.Series:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_boolean(arr.type):
        arr = pc.cast(arr, pa.int8())
    return arr.to_pandas()


def _shown(names: list) -> str:
    return str(names) if len(names) <= 30 else f"{names[:30]} ... ({len(names)} in all)"


def _label_name(label_column, names: list, path: Location) -> str | None:
    if label_column is None:
        return None
    if (isinstance(label_column, str) and label_column not in ("auto", "first", "last", *names)
            and not re.fullmatch(r"-?\d+", label_column.strip())):
        raise ParameterError(f"{path} has no column {label_column!r} " "({label_column})"
                             f"; its columns are {_shown(names)}", label_column=label_column)
    return names[resolve_label_column(label_column, names, True, path)]


# ----------------------------------------------------------------- reader
class ParquetReader:
    """Parquet files read in parts, one per row group
    (:func:`~rfstream.io.convert_tasks.reader_plan`); the first file names the columns."""

    counts_are_free = True  # row counts are in the footer

    def __init__(self, first: Location, *, label_column, positive, task, like, like_attrs,
                 rows_per_chunk, **_):
        with open_parquet(first) as pf:
            schema = pf.schema_arrow
        names = list(schema.names)
        self.first = first
        self.positive = positive
        self.task = task
        self.like = like
        self.rows_per_chunk = rows_per_chunk
        self.label = _label_name(label_column, names, first)
        if like_attrs is not None:
            if like_attrs.get("format") not in ("csv", "parquet"):
                raise ParameterError("{like=} was not converted from CSV or Parquet "
                                     f"(format={like_attrs.get('format')!r})", like=like)
            features = list(like_attrs["columns"])
            if self.label in features:
                raise ParameterError(f"{first}: label column {self.label!r} is a feature column of "
                                     "{like=}; pass {label_column=None} for unlabeled data", like=like,
                                     label_column=None)
        else:
            features = [n for n in names if n != self.label]
        sizes.check_width(len(features), first)
        self.layout = Layout(first, "", 0, True, features + ([self.label] if self.label else []),
                             len(features) if self.label else None, None)
        # rows per batch from the width (a text cell's bytes each: Arrow's strings, pandas' frame)
        self.read_rows = sizes.block_rows(len(self.layout.names), rows_per_chunk, sizes.TEXT_CELL_BYTES)
        self.label_index = None if self.label is None else names.index(self.label)
        self.kinds = self._check(schema, first)
        if like_attrs is not None:
            self.like_columns = like_columns(like_attrs, features)
            self.like_labels = like_label_schema(like_attrs, like, task, positive, self.label is not None)

    def _check(self, schema: pa.Schema, loc: Location, first_kinds=None) -> list:
        """The kind of each wanted column in ``loc``; a missing column or type is an error."""
        kinds = []
        for k, name in enumerate(self.layout.names):
            if name not in schema.names:
                what = " (the label column)" if name == self.label else ""
                raise ValueError(f"{loc} has no column {name!r}{what}; its columns are "
                                 f"{_shown(list(schema.names))}")
            t = schema.field(name).type
            kind = _kind(t)
            if kind is None:
                raise ValueError(f"{loc}: column {name!r} has type {t}; rfstream reads numbers, "
                                 "booleans, strings and dictionary (categorical) columns: cast or drop it")
            first = kind if first_kinds is None or name == self.label else first_kinds[k]
            if (kind == "num") != (first == "num") and not pa.types.is_null(t):
                raise ValueError(f"{loc}: column {name!r} has type {t}, but "
                                 f"{'a number' if first == 'num' else 'text'} in {self.first}; "
                                 "every file needs the same column types")
            kinds.append(kind)
        return kinds

    def scan(self, loc: Location) -> FileScan:
        with open_parquet(loc) as pf:
            self._check(pf.schema_arrow, loc, self.kinds)
            rows = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
            if self.like is not None:
                return FileScan([rows], None, None)
            features = self.layout.features
            scans = {j: ColumnScan(numeric=self.kinds[j] != "cat",
                                   values=None if self.kinds[j] == "num" else set()) for j in features}
            labels = LabelScanner(self.positive) if self.label else None
            for batch in _batches(pf, loc, self.layout.names, self.read_rows):
                for j in features:
                    column = batch.column(self.layout.names[j])
                    scans[j].update(_numeric(column) if self.kinds[j] == "num" else _text(column))
                if labels is not None:
                    labels.update(_labels(batch.column(self.label)))
        return FileScan([rows], scans, labels)

    def decide(self, scan: FileScan) -> Schema:
        layout = self.layout
        if self.like is not None:
            columns, labels = self.like_columns, self.like_labels
        else:
            columns = [scan.columns[j].column(layout.names[j], self.first) for j in layout.features]
            labels = scan.labels.decide(self.task, self.first, self.label) if self.label else None
        labels = labels if self.label else None
        n_features = sizes.check_width(sum(1 if kind == "num" else len(info) for kind, info in columns),
                                       self.first)
        if n_features == 0:
            raise ValueError(f"{self.first}: no feature columns besides the label")
        attrs = {**schema_attrs(layout, columns), **missing_filled(layout, scan)}
        del attrs["header"], attrs["sep"]
        attrs.update(format="parquet", label_column=self.label, label_index=self.label_index)
        attrs.update(labels.attrs() if labels else {"task": None, "positive_class": None})
        y_dtype = LabelEncoder(labels, self.first).dtype if labels else None
        return Schema(n_features, y_dtype, attrs, (columns, labels))

    def _frame(self, batch, columns, loc: Location) -> pd.DataFrame:
        out = {}
        for j, (kind, _) in zip(self.layout.features, columns):
            name = self.layout.names[j]
            column = batch.column(name)
            if kind == "cat":
                out[j] = _text(column)
                continue
            try:
                out[j] = _numeric(column).astype("float64")
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{loc}: column {name!r} holds text ({exc}); with like=, the columns "
                                 "that were numeric in the training data must be numeric here too") from None
        return pd.DataFrame(out, index=pd.RangeIndex(batch.num_rows))

    def encode(self, loc: Location, part: int, schema: Schema) -> Encoding:
        columns, label_schema = schema.spec
        enc = Encoder(self.layout, columns)
        labels = LabelEncoder(label_schema, loc) if label_schema else None

        def blocks():
            with open_parquet(loc) as pf:
                self._check(pf.schema_arrow, loc, self.kinds)
                for batch in _batches(pf, loc, self.layout.names, self.read_rows, [part]):
                    y = labels.encode(_labels(batch.column(self.label))) if labels else None
                    yield enc.encode(self._frame(batch, columns, loc)), y

        return Encoding(blocks(), encoding_stats(labels, enc))
