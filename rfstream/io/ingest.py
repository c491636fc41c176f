"""Shared pieces of the dataset converters: file opening, labels, conversion plans.

The public entry point is :func:`rfstream.io.convert`.  A label read from text is
*normalized* (surrounding whitespace and ONE trailing ``"."`` removed: ``">50K."`` and
``">50K"`` name one class) and, when it then parses as a number, written in *canonical*
form (``"-1.0"`` -> ``"-1"``), so that a training and a test file agree.  Narrative:
docs/io.md, "rfstream/io/ingest.py".
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import math
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import sizes
from ..options import ParameterError, ParameterWarning
from .location import Location

MAX_CLASSES = 1000
"""Distinct labels tracked in pass 1; more than this cannot be a classification."""

MAX_AUTO_CLASSES = 32
"""task="auto": integer-valued numeric labels with at most this many values are classes."""

TASKS = ("auto", "classification", "regression")

BLOCK_SIZE = 64 * 2**20
"""Bytes of a CSV file per task (:mod:`rfstream.io.csv_ranges`): the largest block
``dask.dataframe.read_csv`` takes by default (the rule behind it: docs/io.md).  A file of one
block or less is one stream.  Here, beside the other defaults of :func:`rfstream.io.convert`, so
that its signature does not import the CSV readers."""


# ----------------------------------------------------------------- files
def compression_of(src: Location) -> str | None:
    """``"gzip"``, ``"bz2"``, ``"xz"`` or None, from the file's magic bytes."""
    with src.open("rb") as f:
        head = f.read(6)
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:3] == b"BZh":
        return "bz2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    return None


@contextmanager
def open_binary(src: Location):
    """Open a plain, gzip, bzip2 or xz file, local or remote, as its decompressed bytes."""
    compression = compression_of(src)
    with src.open("rb") as raw:
        opener = {"gzip": lambda f: gzip.GzipFile(fileobj=f), "bz2": bz2.BZ2File,
                  "xz": lzma.LZMAFile}.get(compression)
        yield opener(raw) if opener else raw


@contextmanager
def open_text(src: Location):
    """Open a plain, gzip, bzip2 or xz text file, local or remote; universal newlines."""
    with open_binary(src) as binary, \
            io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline=None) as text:
        yield text


def long_line(where, lineno=None) -> sizes.SizeError:
    """The one line of a line of text longer than :data:`rfstream.sizes.MAX_LINE_BYTES`."""
    at = f" line {lineno}" if lineno else " a line"
    return sizes.SizeError(f"{where}:{at} is longer than the limit of {sizes.MAX_LINE_BYTES:,} characters "
                           "(rfstream.sizes.MAX_LINE_BYTES); is this a text file of rows? Split the line "
                           "or remove it")


def bounded_lines(f, where) -> Iterator[str]:
    """The lines of the open text file ``f``, none read past :data:`rfstream.sizes.MAX_LINE_BYTES`
    characters: a longer line is refused (:func:`long_line`) before it is held whole."""
    limit = sizes.MAX_LINE_BYTES
    lineno = 0
    while line := f.readline(limit + 1):
        lineno += 1
        if len(line) > limit and not line.endswith("\n"):
            raise long_line(where, lineno)
        yield line


class BoundedText:
    """A text file handed to a parser (pandas) a read at a time, refused in one line where a line
    runs past :data:`rfstream.sizes.MAX_LINE_BYTES` characters, or where more than ``block_chars``
    are read since :meth:`block_done` (the text of one block of rows: the parser holds it whole)."""

    def __init__(self, f, where, block_chars: int, rows: int):
        self.f = f
        self.where = where
        self.block_chars = block_chars
        self.rows = rows
        self.run = 0      # characters since the last line break
        self.taken = 0    # characters since the last block

    def read(self, size: int = -1):
        text = self.f.read(sizes.MAX_LINE_BYTES if size is None or size < 0 else size)
        nl, cr = ("\n", "\r") if isinstance(text, str) else (b"\n", b"\r")
        breaks = [i for i in (text.find(nl), text.find(cr)) if i >= 0]
        if breaks:
            last = max(text.rfind(nl), text.rfind(cr))
            longest, self.run = self.run + min(breaks), len(text) - last - 1
        else:
            longest = self.run = self.run + len(text)
        if longest > sizes.MAX_LINE_BYTES:
            raise long_line(self.where)
        self.taken += len(text)
        if self.taken > self.block_chars:
            raise sizes.SizeError(
                f"{self.where}: {self.rows:,} rows hold more than {self.block_chars:,} characters, over the "
                "limit of one block (rfstream.sizes.BLOCK_BYTES); lower {rows_per_chunk}",
                rows_per_chunk=self.rows)
        return text

    def block_done(self) -> None:
        self.taken = 0

    def __getattr__(self, name):
        return getattr(self.f, name)


def is_comment(line: str) -> bool:
    """Blank lines and lines starting with ``#`` or ``|`` (UCI's comment marks)."""
    s = line.strip()
    return not s or s[0] in "#|"


def first_data_lines(path: Location, n: int = 2) -> tuple[int, list[str]]:
    """Number of leading comment/blank lines, and the next ``n`` non-blank lines (fewer, but at
    least two, once they hold :data:`rfstream.sizes.BLOCK_BYTES` characters)."""
    skip = 0
    lines = []
    held = 0
    with open_text(path) as f:
        for line in bounded_lines(f, path):
            if not lines and is_comment(line):
                skip += 1
            elif line.strip():
                lines.append(line.rstrip("\n"))
                held += len(line)
                if len(lines) == n or (held > sizes.BLOCK_BYTES and len(lines) >= 2):
                    break
    return skip, lines


# ----------------------------------------------------------------- labels
def format_number(v: float) -> str:
    """``1.0 -> "1"``, ``-1.0 -> "-1"``, ``0.5 -> "0.5"``."""
    if np.isfinite(v) and float(v).is_integer() and abs(v) < 2**53:
        return str(int(v))
    return repr(float(v))


def normalize_label(value: Any) -> str:
    """Strip whitespace and one trailing ``"."``; numbers are formatted canonically."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return format_number(float(value))
    s = str(value).strip()
    return s.removesuffix(".")


def canonical_label(value: Any) -> tuple[str, float | None]:
    """(canonical class name, its numeric value or None when not a number)."""
    s = normalize_label(value)
    try:
        v = float(s)
    except ValueError:
        return s, None
    if not np.isfinite(v):
        return s, None
    return format_number(v), v


# ----------------------------------------------------------------- sums
class ExactSum:
    """A sum of float64 values, exact until one final rounding: the same in any order.

    Pass 1 is a reduction over files, row groups and chunks that fall where they
    may; a floating-point sum would depend on that split in its last bits (and
    with it a fill value and every filled cell).  The leading bits of the values are
    summed first as floats whose sums are exact (:meth:`_extract`: a column of counts, or
    of fractions of a few digits, is done in one or two such sums); what is left is split
    as ``m * 2**(e - 53)`` with an integer ``|m| < 2**53`` (:func:`numpy.frexp`), grouped by
    ``e``, and ``m`` summed in two halves with :func:`numpy.bincount`, whose float64
    partial sums stay below ``2**53`` and so are exact.  ``value`` holds the sum times
    ``2**SHIFT`` as a Python int.
    """

    SHIFT = 1074       # 2**-1074, the smallest subnormal, times 2**SHIFT is 1
    LEVELS = 3         # extractions tried before the rest goes to the exponent bins
    _BATCH = 1 << 25   # values per bincount: 2**25 halves of at most 2**27 sum to at most 2**52

    __slots__ = ("value",)

    def __init__(self, value: int = 0):
        self.value = value

    def __repr__(self) -> str:
        return f"ExactSum({self.mean(1)!r})"

    def add(self, values: np.ndarray) -> None:
        """Add finite float64 values (ValueError on NaN or an infinity: callers drop them)."""
        v = np.asarray(values, dtype=np.float64).ravel()
        if not v.size:
            return
        rest = self._extract(v)
        if rest is not None:
            for a in range(0, rest.size, self._BATCH):
                self._add_bins(rest[a:a + self._BATCH])

    def _extract(self, v: np.ndarray) -> np.ndarray | None:
        """Add the leading bits of ``v`` by float sums that are exact, up to :attr:`LEVELS`
        times; the remainder (exact: ``v`` less what was added), None when it is all zeros.

        ExtractScalar of Rump, Ogita & Oishi, "Accurate floating-point summation part I:
        faithful rounding" (SIAM J. Sci. Comput. 31(1), 2008, section 3): with ``sigma = 2**k >= 2**M * max|v|``
        and ``2**M > n``, ``q = (sigma + v) - sigma`` are multiples of ``2**(k - 53)`` with
        ``v - q`` exact and below that in magnitude, and every partial sum of the ``q`` lies
        below ``sigma`` in magnitude: it is exact in any order (numpy's pairwise sum)."""
        lo, hi = float(v.min()), float(v.max())
        big = max(-lo, hi)
        if big == 0:
            return None
        if not math.isfinite(big):
            raise ValueError("ExactSum adds finite values only: drop NaN and infinities first")
        M = v.size.bit_length()             # 2**M > v.size
        k = math.frexp(big)[1] + M          # big <= 2**(k - M)
        r = v
        for _ in range(self.LEVELS):
            if k > 1023 or k < -960:        # sigma finite; its q far above the subnormals
                return r
            sigma = math.ldexp(1.0, k)
            q = np.add(r, sigma)
            np.subtract(q, sigma, out=q)
            r = np.subtract(r, q, out=None if r is v else r)
            num, den = float(q.sum()).as_integer_ratio()  # den: a power of two, at most 2**1074
            self.value += num << (self.SHIFT + 1 - den.bit_length())
            if not np.count_nonzero(r):
                return None
            k += M - 53                     # |r| <= 2**(k - 53)
        return r

    def _add_bins(self, v: np.ndarray) -> None:
        """Add at most ``_BATCH`` values, each ``m * 2**(e - 53)`` (:func:`numpy.frexp`; ``|m| <
        2**53`` whole), by ``e``: ``m`` in halves ``hi * 2**26 + lo`` summed by bincount."""
        m, e = np.frexp(v)
        np.multiply(m, 2.0**53, out=m)        # whole, exact (a power of two)
        hi = np.multiply(m, 2.0**-26)
        np.floor(hi, out=hi)                  # |hi| <= 2**27
        lo = np.multiply(hi, 2.0**26)
        np.subtract(m, lo, out=lo)            # 0 <= lo < 2**26, exact
        idx = np.add(e, 1074, dtype=np.intp)  # >= 1: a subnormal's e is >= -1073
        hs = np.bincount(idx, weights=hi)
        ls = np.bincount(idx, weights=lo)
        for k in np.flatnonzero((hs != 0) | (ls != 0)).tolist():
            t = (int(hs[k]) << 26) + int(ls[k])
            s = k - 53  # value * 2**SHIFT == m * 2**(k - 53); below 0 for subnormals only,
            self.value += t << s if s >= 0 else t >> -s  # whose m are multiples of 2**-s

    def merge(self, other: ExactSum) -> ExactSum:
        return ExactSum(self.value + other.value)

    def mean(self, count: int) -> float:
        """``sum / count``, correctly rounded (Python's int division is)."""
        return self.value / (count << self.SHIFT) if count else 0.0


def resolve_label_column(label_column, names, header, path, first_row=None) -> int | None:
    """The 0-based index of ``label_column`` ("auto" and "last", "first", an index, a name) in
    ``names``; ``first_row``: the file's first row, named when a name is asked of a file
    read without a header."""
    n = len(names)
    if label_column is None:
        return None
    if isinstance(label_column, str):
        if label_column in ("auto", "last", "first"):
            return 0 if label_column == "first" else n - 1
        if header and label_column in names:
            return names.index(label_column)
        if re.fullmatch(r"-?\d+", label_column.strip()):
            return resolve_label_column(int(label_column), names, header, path)
        if header:
            raise ParameterError(f"{{label_column=}} is not a column of {path}: its header columns are "
                                 f"{names[:12]}{' ...' if n > 12 else ''}", label_column=label_column)
        row = f" ({', '.join(map(str, first_row[:8]))}{', ...' if len(first_row) > 8 else ''})" if first_row else ""
        raise ParameterError(
            f"{{label_column=}} is not a column of {path}: no header row was found, its first row{row} was "
            "read as data; if that row names the columns, pass {header=True}; else name the label by "
            "'first', 'last' or a 0-based column index", label_column=label_column, header=True)
    if isinstance(label_column, (int, np.integer)) and not isinstance(label_column, bool):
        if -n <= label_column < n:
            return int(label_column) % n
        raise ParameterError(
            f"{{label_column=}} is out of range for {path}, which has {n} columns; "
            f"use 0..{n - 1}, -1..-{n}, 'first' or 'last'", label_column=int(label_column))
    raise TypeError(f"label_column must be 'auto', 'last', 'first', an int, a column name or None; "
                    f"got {label_column!r}")


def check_text(values, src, what: str) -> None:
    """Refuse values read as text that hold a NUL byte: no text file has one (a binary or
    damaged file; read on, ``3\0.5`` would become a category instead of a number)."""
    bad = next((v for v in values if isinstance(v, str) and "\0" in v), None)
    if bad is not None:
        raise ValueError(f"{src}: {what} holds a NUL byte (in {bad[:40]!r}); a CSV file is text: remove "
                         "the byte, or export the file again")


@dataclass
class LabelScanner:
    """Pass 1 over the labels: counts, distinct values (at most MAX_CLASSES kept), kind."""

    positive: str | None = None
    n_missing: int = 0
    numeric: bool = True
    integer: bool = True
    classes: set = field(default_factory=set)
    overflow: bool = False
    positive_seen: bool = False
    example_text: str | None = None

    def update(self, values) -> None:
        import pandas as pd  # on first use: a fit that converts nothing never imports pandas

        s = pd.Series(values)
        missing = s.isna().to_numpy()
        self.add(int(missing.sum()), pd.unique(s[~missing]))

    def add(self, n_missing: int, uniques) -> None:
        """Count ``n_missing`` rows without a label, and take the distinct labels ``uniques``."""
        self.n_missing += n_missing
        for u in uniques:
            name, v = canonical_label(u)
            if v is None:
                self.numeric = False
                self.example_text = self.example_text or name
            elif not float(v).is_integer():
                self.integer = False
            if name == self.positive:
                self.positive_seen = True
            if not self.overflow:
                self.classes.add(name)
                self.overflow = len(self.classes) > MAX_CLASSES

    def merge(self, other: LabelScanner) -> LabelScanner:
        """The scanner of both inputs, this one's rows first (a new object)."""
        classes = self.classes | other.classes
        overflow = self.overflow or other.overflow or len(classes) > MAX_CLASSES
        if len(classes) > MAX_CLASSES + 1:  # as update(): only the first values past the limit
            classes = set(sorted(classes)[:MAX_CLASSES + 1])
        return replace(self, n_missing=self.n_missing + other.n_missing,
                       numeric=self.numeric and other.numeric,
                       integer=self.integer and other.integer,
                       classes=classes, overflow=overflow,
                       positive_seen=self.positive_seen or other.positive_seen,
                       example_text=self.example_text or other.example_text)

    def decide(self, task: str, src: Location, column: Any) -> LabelSchema:
        """Task and classes after pass 1 (see :func:`rfstream.io.convert`)."""
        check_text(self.classes, src, f"label column {column!r}")
        if self.n_missing:
            raise ParameterError(
                f"{src}: {self.n_missing} rows have no value in label column {column!r} "
                "(empty or '?'); remove those rows, or pass {label_column=None} for unlabeled data",
                label_column=None)
        if self.positive is not None:
            if task == "regression":
                raise ParameterError("positive_class is only valid for classification; "
                                     "got {task='regression'}", task=task)
            if not self.positive_seen:
                seen = ", ".join(repr(c) for c in sorted(self.classes)[:10])
                raise ValueError(
                    f"{src}: positive_class={self.positive!r} never occurs in label column "
                    f"{column!r}; labels seen include {seen}"
                )
            return LabelSchema("classification", ["rest", self.positive], self.positive)
        small = not self.overflow and len(self.classes) <= MAX_AUTO_CLASSES
        if task == "auto":
            is_class = not self.numeric or (self.integer and small)
            task = "classification" if is_class else "regression"
        if task == "regression" and not self.numeric:
            raise ParameterError(
                f"{src}: " "{task='regression'} needs numeric labels, but label column " f"{column!r} "
                f"holds {self.example_text!r}; use " "{task='classification'} or another {label_column}",
                task=task, label_column=column)
        if task == "regression":
            return LabelSchema("regression")
        if self.overflow:
            raise ParameterError(
                f"{src}: label column {column!r} has more than {MAX_CLASSES} distinct values, "
                "too many for classification; use {task='regression'} or another {label_column}",
                task=task, label_column=column)
        if self.numeric:
            self._check_numeric_classes(src, column, small)
        key = (lambda c: float(c)) if self.numeric else None
        return LabelSchema("classification", sorted(self.classes, key=key))

    def _check_numeric_classes(self, src: Location, column: Any, small: bool) -> None:
        """Numbers asked to be classes: non-integers are refused (one class per price), more
        distinct integers than ``MAX_AUTO_CLASSES`` are warned about (:class:`TaskWarning`)."""
        if not self.integer:
            example = next((c for c in sorted(self.classes, key=float) if not float(c).is_integer()), None)
            such = f" (such as {example})" if example is not None else ""
            raise ParameterError(
                f"{src}: " "{task='classification'} makes a class of each value, but label column "
                f"{column!r} holds non-integer numbers{such}; use " "{task='regression'}, or bin the "
                "target into classes first", task="classification")
        if not small:
            warnings.warn(TaskWarning(
                f"{src}: " "{task='classification'} makes a class of each of the "
                f"{len(self.classes)} distinct integer values of label column {column!r}; if the label "
                "is a quantity, use {task='regression'}", task="classification"), stacklevel=4)


class TaskWarning(ParameterWarning):
    """A task asked for that the labels hardly fit (many integer classes); the parameters it
    names are data, said as flags at the command line."""


@dataclass
class LabelSchema:
    """What pass 2 needs to encode labels; also read back from a ``like=`` dataset."""

    task: str
    classes: list | None = None
    positive: str | None = None

    @classmethod
    def from_attrs(cls, attrs: dict) -> LabelSchema | None:
        if attrs.get("task") is None:
            return None
        return cls(attrs["task"], attrs.get("classes"), attrs.get("positive_class"))

    def attrs(self) -> dict:
        out = {"task": self.task, "positive_class": self.positive}
        if self.task == "classification":
            out["classes"] = list(self.classes)
        return out


class LabelEncoder:
    """Pass 2: labels -> int32 class codes (-1 = unseen) or float32 targets."""

    def __init__(self, schema: LabelSchema, src: Location):
        self.schema = schema
        self.src = src
        self.index = {c: k for k, c in enumerate(schema.classes or [])}
        self.counts = np.zeros(len(self.index), dtype=np.int64)
        self.n_unseen = 0

    @property
    def dtype(self):
        return np.float32 if self.schema.task == "regression" else np.int32

    def encode(self, values) -> np.ndarray:
        import pandas as pd

        s = pd.Series(values)
        if s.isna().any():
            raise ParameterError(
                f"{self.src}: {int(s.isna().sum())} rows have no label (empty or '?'); "
                "remove them, or pass {label_column=None} for unlabeled data", label_column=None)
        codes, uniques = pd.factorize(s)
        if self.schema.task == "regression":
            return self._numbers(uniques)[codes].astype(np.float32)
        lut = np.array([self._code(u) for u in uniques], dtype=np.int32)
        y = lut[codes] if len(codes) else np.zeros(0, np.int32)
        self.n_unseen += int((y < 0).sum())
        self.counts += np.bincount(y[y >= 0], minlength=len(self.counts))
        return y

    def _code(self, value) -> int:
        name, _ = canonical_label(value)
        if self.schema.positive is not None:
            return int(name == self.schema.positive)
        return self.index.get(name, -1)

    def _numbers(self, uniques) -> np.ndarray:
        out = np.empty(len(uniques), dtype=np.float64)
        for k, u in enumerate(uniques):
            _, v = canonical_label(u)
            if v is None:
                raise ParameterError(
                    f"{self.src}: label {u!r} is not a number, but the task is regression; "
                    "pass {task='classification'} (or fix the label)", task="classification")
            out[k] = v
        return out

    def stats(self) -> dict:
        out = {"n_unseen_labels": self.n_unseen}
        if self.schema.task == "classification":
            out["class_counts"] = {c: int(n) for c, n in zip(self.schema.classes, self.counts)}
        return out


def like_label_schema(like_attrs: dict, like_path, task: str, positive: str | None,
                      labeled: bool) -> LabelSchema | None:
    """The label schema of a ``like=`` training set, checked against this conversion."""
    schema = LabelSchema.from_attrs(like_attrs)
    check_like_task(task, positive, schema, like_path)
    if labeled and schema is None:
        raise ParameterError("{like=} has no labels; pass {label_column=None}", like=like_path,
                             label_column=None)
    return schema


def check_like_task(task: str, positive: str | None, like: LabelSchema | None, like_path) -> None:
    """A ``like=`` conversion must not ask for another task or positive class."""
    if like is None:
        return
    if task not in ("auto", like.task):
        raise ParameterError(f"{{task=}} contradicts {{like=}} whose task is {like.task!r}", task=task,
                             like=like_path)
    if positive is not None and positive != like.positive:
        raise ParameterError(
            "{positive_class=} contradicts {like=} " f"whose positive class is {like.positive!r}",
            positive_class=positive, like=like_path)


# ----------------------------------------------------------------- plans
@dataclass
class Plan:
    """Result of pass 1 of a converter: everything needed to write the Zarr arrays.

    ``chunks()`` runs pass 2 and yields ``(X_block float32, y_block or None)``;
    ``stats()`` (valid after it) gives counts seen while encoding.
    ``n_rows`` is None when pass 1 was skipped (``like=``): the writer then grows.
    ``write(writer)``, when given, runs pass 2 instead of ``chunks``: tasks write
    the rows into the writer's arrays themselves (:mod:`rfstream.io.convert_tasks`).
    """

    n_rows: int | None
    n_features: int
    y_dtype: Any
    attrs: dict
    chunks: Callable[[], Iterator[tuple[np.ndarray, np.ndarray | None]]] | None
    stats: Callable[[], dict]
    write: Callable[[Any], None] | None = None


def encoding_stats(labels: LabelEncoder | None, encoder=None) -> Callable[[], dict]:
    """``stats()`` of a pass 2: unseen categories (``encoder.n_unseen``) and label counts."""
    return lambda: {"n_unseen_categories": getattr(encoder, "n_unseen", 0),
                    **(labels.stats() if labels else {"n_unseen_labels": 0})}
