"""How to read one CSV file: its separator, leading comment lines, header and label column.

:func:`sniff` reads the first records of a file (a quoted field may span lines, as CSV
allows) and returns its :class:`Layout`, which both passes of :mod:`rfstream.io.csv`
(and the Parquet reader's encoding) use; :func:`columns_from_attrs` checks a layout
against the dataset a conversion's ``like=`` names, and gives that dataset's columns.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import pandas as pd

from .ingest import compression_of, first_data_lines, resolve_label_column
from .location import Location

NA_VALUES = ["?"]
"""Missing-value markers on top of pandas' defaults ("", "NA", "NaN", "nan", ...)."""


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

    @property
    def features(self) -> list[int]:
        return [j for j in range(len(self.names)) if j != self.label_index]

    @property
    def label_name(self):
        if self.label_index is None:
            return None
        return self.names[self.label_index] if self.header else self.label_index


def _is_number(text) -> bool:
    try:
        float(str(text).strip())
    except ValueError:
        return False
    return True


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
            return [[str(v).strip() for v in row] for row in rows.itertuples(index=False)]
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


def sniff(path: Location, sep="auto", header="auto", label_column="last") -> Layout:
    """Leading comment lines, separator, header and label column of a CSV file.

    Lines at the top that are blank or start with ``#`` or ``|`` are skipped.
    ``sep="auto"``: ``","`` if the first data line has a comma, else tab, else ``";"``,
    else runs of whitespace.  ``header="auto"``: the first line is a header when none
    of its fields parses as a number (or is ``?``) while the second line has one that does.
    """
    skip, lines = first_data_lines(path, SNIFF_LINES)
    if not lines:
        raise ValueError(f"{path}: no data rows (the file is empty or only comments)")
    if sep == "auto":
        sep = next((s for s in (",", "\t", ";") if s in lines[0]), r"\s+")
    rows = _records(lines, sep, path)
    if header == "auto":
        header = (len(rows) == 2 and not any(_is_number(v) or v in NA_VALUES for v in rows[0])
                  and any(map(_is_number, rows[1])))
    elif header not in (True, False):
        raise ValueError(f"header={header!r} is not valid; use 'auto', True or False")
    names = _unique_names(rows[0]) if header else [f"c{j}" for j in range(len(rows[0]))]
    index = resolve_label_column(label_column, names, header, path)
    return Layout(path, sep, skip, bool(header), names, index, compression_of(path))


def like_columns(attrs: dict, names) -> list:
    """``(kind, fill value or categories)`` of the named feature columns of a dataset."""
    cat = attrs["categorical"]
    return [("cat", cat[n]) if n in cat else ("num", attrs["fill_values"][n]) for n in names]


def columns_from_attrs(attrs: dict, layout: Layout, like) -> list:
    """Feature columns of a ``like=`` dataset, checked against this file's layout."""
    if attrs.get("format") not in ("csv", "parquet"):
        raise ValueError(f"like={like} was not converted from CSV or Parquet "
                         f"(format={attrs.get('format')!r})")
    names = attrs["columns"]
    here = [layout.names[j] for j in layout.features]
    if len(here) != len(names):
        raise ValueError(
            f"{layout.path} has {len(here)} feature columns ({len(layout.names)} fields per row) "
            f"but like={like} has {len(names)}; the files must have the same columns"
        )
    if layout.header and attrs.get("header") and here != names:
        bad = next(k for k in range(len(names)) if here[k] != names[k])
        raise ValueError(f"{layout.path}: feature column {bad} is {here[bad]!r} but like={like} "
                         f"has {names[bad]!r}; the files must have the same columns in order")
    like_label = attrs.get("label_index")
    if like_label is not None and layout.label_index not in (None, like_label):
        raise ValueError(f"{layout.path}: label column is {layout.label_index} but like={like} "
                         f"used column {like_label}; pass label_column={like_label}")
    return like_columns(attrs, names)
