"""LIBSVM / svmlight text (plain, gzip, bzip2, xz) -> dense float32 rows, in two passes.

Read behind :func:`rfstream.io.convert`.

A line is ``label idx:val idx:val ... [# comment]``; ``qid:`` tokens are ignored and
CRLF line ends are accepted.  Indices are 1-based unless an index 0 occurs (then
0-based, as scikit-learn's ``zero_based="auto"``).  Pass 1 streams the lines for the
largest index, the index base, the row count and the labels; pass 2 streams them
again and yields dense float32 blocks of ``rows_per_chunk`` rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import islice

import numpy as np

from .ingest import LabelEncoder, LabelScanner, Plan, like_label_schema, open_text
from .location import Location

SUFFIXES = {".svm", ".libsvm", ".svmlight", ".trn", ".tst", ".t"}

_LINE = re.compile(r"^\s*[+-]?[\d.]\S*(\s+(qid:\S+|\d+:\S+))+\s*(#.*)?$")


def looks_like_libsvm(line: str) -> bool:
    """True for ``label idx:val ...`` (a numeric label then at least one pair)."""
    return bool(_LINE.match(line))


def _lines(path: Location) -> Iterator[tuple[int, str]]:
    """(line number, content without comment) of every non-blank line."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if line:
                yield lineno, line


def _batches(path: Location, size: int):
    it = _lines(path)
    while batch := list(islice(it, size)):
        yield batch


def _pairs(path: Location, lineno: int, tokens: list[str]):
    for tok in tokens:
        key, _, val = tok.partition(":")
        if key == "qid":
            continue
        try:
            yield int(key), float(val)
        except ValueError:
            raise ValueError(
                f"{path} line {lineno}: cannot read {tok!r} as index:value; "
                "is this really a LIBSVM file? (CSV files need another suffix, e.g. .csv)"
            ) from None


def scan(path: Location, rows_per_chunk: int, labels: LabelScanner | None):
    """Pass 1: (n_rows, smallest index, largest index)."""
    n_rows, lo, hi = 0, None, -1
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
    return n_rows, (lo if lo is not None else 1), hi


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


def plan(src: Location, *, label_column, positive, task, like, like_attrs, rows_per_chunk,
         **_) -> Plan:
    """Pass 1 (skipped with ``like=``) and the pass-2 generator for a LIBSVM source.

    The label is always the first token; ``label_column=None`` drops it.
    """
    labeled = label_column is not None
    if like_attrs is not None:
        if like_attrs.get("format") != "libsvm":
            raise ValueError(f"like={like} was not converted from LIBSVM "
                             f"(format={like_attrs.get('format')!r})")
        base, d = like_attrs["index_base"], len(like_attrs["feature_names"])
        schema = like_label_schema(like_attrs, like, task, positive, labeled)
        n_rows = None
    else:
        scanner = LabelScanner(positive) if labeled else None
        n_rows, lo, hi = scan(src, rows_per_chunk, scanner)
        base = 0 if lo == 0 else 1
        d = hi + 1 - base
        if d <= 0:
            raise ValueError(f"{src}: no features (no index:value pairs)")
        schema = scanner.decide(task, src, "first token") if labeled else None
    labels = LabelEncoder(schema, src) if labeled else None

    def chunks():
        for batch in _batches(src, rows_per_chunk):
            X, raw = _block(src, batch, base, d, labeled)
            yield X, (labels.encode(np.asarray(raw, dtype=object)) if labeled else None)

    def stats():
        out = {"n_unseen_categories": 0}
        out.update(labels.stats() if labels else {"n_unseen_labels": 0})
        return out

    attrs = {"format": "libsvm", "index_base": base,
             "feature_names": [f"f{j + base}" for j in range(d)],
             "categorical": {}, "fill_values": {}, "label_column": 0 if labeled else None}
    attrs.update(schema.attrs() if labeled else {"task": None, "positive_class": None})
    return Plan(n_rows, d, labels.dtype if labels else None, attrs, chunks, stats)
