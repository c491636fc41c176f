"""LIBSVM / svmlight text (plain, gzip, bzip2, xz) -> dense float32 rows, in two passes.

Read behind :func:`rfstream.io.convert`.  A line is ``label idx:val idx:val ... [# comment]``;
``qid:`` tokens are ignored, CRLF line ends accepted.  Indices are 1-based unless an index 0
occurs (then 0-based, as scikit-learn's ``zero_based="auto"``).  Pass 1 streams the lines for
the largest index, the index base, the row count and the labels (several files' summaries
merge: :meth:`LibsvmScan.merge`); pass 2 yields dense float32 blocks of ``rows_per_chunk``
rows.  The formats together: docs/io.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .. import sizes
from .convert_tasks import Encoding, Schema
from .ingest import (
    LabelEncoder,
    LabelScanner,
    bounded_lines,
    encoding_stats,
    first_data_lines,
    like_label_schema,
    open_text,
)
from ..options import ParameterError
from .location import Location

F32_MAX = float(np.finfo(np.float32).max)

_LINE = re.compile(r"^\s*[+-]?[\d.]\S*(\s+(qid:\S+|\d+:\S+))+\s*(#.*)?$")


def looks_like_libsvm(line: str) -> bool:
    """True for ``label idx:val ...`` (a numeric label then at least one pair)."""
    return bool(_LINE.match(line))


def is_libsvm(loc: Location) -> bool:
    """True when the file's first data line (comments skipped) looks like LIBSVM."""
    _, lines = first_data_lines(loc, 1)
    return bool(lines) and looks_like_libsvm(lines[0])


def _lines(path: Location) -> Iterator[tuple[int, str]]:
    """(line number, content without comment) of every non-blank line."""
    with open_text(path) as f:
        for lineno, line in enumerate(bounded_lines(f, path), 1):
            line = line.split("#", 1)[0].strip()
            if line:
                yield lineno, line


def _batches(path: Location, size: int):
    """Lists of at most ``size`` lines, and of about :data:`rfstream.sizes.BLOCK_BYTES` of text at most."""
    batch, chars = [], 0
    for item in _lines(path):
        batch.append(item)
        chars += len(item[1])
        if len(batch) == size or chars >= sizes.BLOCK_BYTES:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def _pairs(path: Location, lineno: int, tokens: list[str]):
    for tok in tokens:
        key, _, val = tok.partition(":")
        if key == "qid":
            continue
        try:
            index, value = int(key), float(val)
        except ValueError:
            raise ValueError(
                f"{path} line {lineno}: cannot read {tok!r} as index:value; is this really a LIBSVM "
                "file? (a CSV file is recognised by its content whatever its suffix)"
            ) from None
        if not abs(value) <= F32_MAX:  # inf, nan, 1e400, beyond float32: stored, they end every fit
            raise ValueError(f"{path} line {lineno}: {tok!r} is not a finite number that float32 holds "
                             f"(|x| <= {F32_MAX:.3g}); fix or remove the value")
        yield index, value


@dataclass
class LibsvmScan:
    """Pass-1 summary of one file, or of several merged in order."""

    rows: list                  # [[data rows]] per file
    lo: int | None              # smallest index seen (None: none yet)
    hi: int                     # largest index seen (-1: none yet)
    labels: LabelScanner | None

    def merge(self, other: LibsvmScan) -> LibsvmScan:
        lo = min((v for v in (self.lo, other.lo) if v is not None), default=None)
        labels = None if self.labels is None else self.labels.merge(other.labels)
        return LibsvmScan(self.rows + other.rows, lo, max(self.hi, other.hi), labels)


def scan(path: Location, rows_per_chunk: int, labels: LabelScanner | None) -> LibsvmScan:
    """Pass 1 over one file: rows, smallest and largest index, labels (updated in place)."""
    n_rows = 0
    lo = None
    hi = -1
    for batch in _batches(path, rows_per_chunk):
        n_rows += len(batch)
        for lineno, line in batch:
            keys = [k for k, _ in _pairs(path, lineno, line.split()[1:])]
            if keys:
                lo = min(keys) if lo is None else min(lo, min(keys))
                hi = max(hi, max(keys))
        if labels is not None:
            labels.update([line.split(None, 1)[0] for _, line in batch])
    if n_rows == 0:
        raise ValueError(f"{path}: no data rows")
    return LibsvmScan([[n_rows]], lo, hi, labels)


def _block(path: Location, batch, base: int, d: int, with_labels: bool):
    X = np.zeros((len(batch), d), dtype=np.float32)
    labels = []
    for i, (lineno, line) in enumerate(batch):
        tokens = line.split()
        labels.append(tokens[0])
        for key, val in _pairs(path, lineno, tokens[1:]):
            j = key - base
            if not 0 <= j < d:
                raise ValueError(
                    f"{path} line {lineno}: feature index {key} is outside 1..{d} "
                    f"(index base {base}, {d} features of the training schema)"
                )
            X[i, j] = val
    return X, (labels if with_labels else None)


class LibsvmReader:
    """LIBSVM files read in parts, one per file (:func:`~rfstream.io.convert_tasks.reader_plan`).

    The label is always the first token; ``label_column=None`` drops it.
    """

    counts_are_free = False

    def __init__(self, first: Location, *, label_column, positive, task, like, like_attrs,
                 rows_per_chunk, **_):
        self.first = first
        self.positive = positive
        self.task = task
        self.like = like
        self.rows_per_chunk = rows_per_chunk
        self.labeled = label_column is not None
        if like_attrs is not None:
            if like_attrs.get("format") != "libsvm":
                raise ParameterError("{like=} was not converted from LIBSVM "
                                     f"(format={like_attrs.get('format')!r})", like=like)
            labels = like_label_schema(like_attrs, like, task, positive, self.labeled)
            self.like_spec = (like_attrs["index_base"], len(like_attrs["feature_names"]), labels)

    def scan(self, loc: Location) -> LibsvmScan:
        if self.like is not None:
            return LibsvmScan([[sum(1 for _ in _lines(loc))]], None, -1, None)
        return scan(loc, self.rows_per_chunk, LabelScanner(self.positive) if self.labeled else None)

    def decide(self, scan: LibsvmScan | None) -> Schema:
        if self.like is not None:
            base, d, labels = self.like_spec
        else:
            base = 0 if scan.lo == 0 else 1
            d = scan.hi + 1 - base
            if d <= 0:
                raise ValueError(f"{self.first}: no features (no index:value pairs)")
            labels = scan.labels.decide(self.task, self.first, "first token") if self.labeled else None
        d = sizes.check_width(d, self.first if self.like is None else f"like={self.like}")
        labels = labels if self.labeled else None
        attrs = {"format": "libsvm", "index_base": base,
                 "feature_names": [f"f{j + base}" for j in range(d)],
                 "categorical": {}, "fill_values": {}, "label_column": 0 if labels else None}
        attrs.update(labels.attrs() if labels else {"task": None, "positive_class": None})
        y_dtype = LabelEncoder(labels, self.first).dtype if labels else None
        return Schema(d, y_dtype, attrs, (base, d, labels))

    def encode(self, loc: Location, part: int, schema: Schema) -> Encoding:
        base, d, label_schema = schema.spec
        labels = LabelEncoder(label_schema, loc) if label_schema else None

        def blocks():
            for batch in _batches(loc, sizes.block_rows(d, self.rows_per_chunk)):  # rows from the width
                X, raw = _block(loc, batch, base, d, labels is not None)
                yield X, (labels.encode(np.asarray(raw, dtype=object)) if labels else None)

        return Encoding(blocks(), encoding_stats(labels))
