"""What ``convert`` guesses from a CSV file's first rows: whether the first is a header, and
which column is the label when none is named (``label_column="auto"``).

Both read a sample of the first :data:`SAMPLE_LINES` data lines as text fields.  The rules,
written before the code and checked on every CSV of the shared datasets
(tests/io/test_io_guess.py):

* **Header.** The first row is a header when some column holds, in the first row, a field
  that is not a number (nor empty or ``?``) and, in every other sampled row, numbers only
  (``1,2,...,16,y`` over rows of numbers; ``age,color,label`` over ``31,red,yes``).
* **Label.** Each column gets a *label score*: 2 for text with few distinct values (at most
  :data:`~rfstream.io.ingest.MAX_AUTO_CLASSES`, or at most half the rows), 1 for integers
  with 2 to ``MAX_AUTO_CLASSES`` distinct values some of which repeat, 0 otherwise (floats,
  identifiers, constants); its *kind* is text, numbers written as integers, or other numbers
  (``1.0`` included).  The first column is the label when its score is greater than the
  last column's and than the middle columns' median, and the last column is of the kind
  most middle columns are, a feature like them
  (letter: a text label before integer features; digits: an integer label before float
  pixels); otherwise the last (house prices after counts and categories, a 0/1 label after
  a text feature and floats).
* **Doubt.** When the label was taken by this rule and the other end column scores as high
  (above 0), or higher with few distinct integers, a warning names the column taken and the
  other one, with the flag that takes it instead.
"""
from __future__ import annotations

import io
import re
import statistics
import warnings
from dataclasses import dataclass

import pandas as pd

from ..options import ParameterWarning
from .ingest import MAX_AUTO_CLASSES

#: data lines read for the header and label rules
SAMPLE_LINES = 1000
#: a number written as an integer
_INTEGER = re.compile(r"[+-]?\d+")
#: fields that mean "missing", never a header's name
_MISSING = ("", "?", "NA", "nan", "NaN", "N/A", "null", "NULL")


class LabelGuessWarning(ParameterWarning):
    """The label column was guessed and another column looks as much like one; the
    parameters it names are data (said as flags at the command line)."""


def sample_records(lines: list[str], sep: str) -> list[list[str]]:
    """The sampled lines as records of stripped text fields (missing fields as ""); fewer
    lines when the last ones end inside a quoted field."""
    n = len(lines)
    while n >= 1:
        try:
            frame = pd.read_csv(io.StringIO("\n".join(lines[:n])), sep=sep, header=None, dtype=str,
                                keep_default_na=False, skipinitialspace=True)
        except (pd.errors.ParserError, ValueError):
            n = n // 2 if n > 2 else n - 1
            continue
        # rows of the object array, not itertuples: that indexes every column once per row (a CSV
        # of 20,000 columns took 2.3 s a sniff so, 0.75 s this way)
        return [["" if pd.isna(v) else str(v).strip() for v in row] for row in frame.to_numpy(dtype=object).tolist()]
    return []


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def first_row_is_header(records: list[list[str]]) -> bool:
    """The header rule (module docstring) over sampled records."""
    if len(records) < 2:
        return False
    head, rest = records[0], records[1:]
    for j, name in enumerate(head):
        if name in _MISSING or is_number(name):
            continue
        below = [row[j] for row in rest if j < len(row) and row[j] not in _MISSING]
        if below and all(map(is_number, below)):
            return True
    return False


@dataclass(frozen=True)
class ColumnLook:
    """What a column's sampled values look like: ``kind`` is "text", "int" (numbers written
    as integers), "float" (other numbers, ``1.0`` included) or "empty"; ``distinct`` counts its
    distinct values; ``score`` is its label score (integer-valued numbers, ``-1.0`` too, may
    score 1)."""

    kind: str
    distinct: int
    score: int

    def describe(self) -> str:
        if self.kind == "text":
            return f"{self.distinct} distinct text values"
        if self.score:
            return f"{self.distinct} distinct integer values"
        return f"{self.distinct} distinct numbers" if self.kind in ("int", "float") else "no values"


def look(values: list[str]) -> ColumnLook:
    """The :class:`ColumnLook` of one column's sampled fields."""
    present = [v for v in values if v not in _MISSING]
    distinct = len(set(present))
    if not present:
        return ColumnLook("empty", 0, 0)
    try:
        numbers = [float(v) for v in present]
    except ValueError:
        few = distinct <= MAX_AUTO_CLASSES or distinct <= len(present) // 2
        return ColumnLook("text", distinct, 2 if few else 0)
    label_like = (all(x.is_integer() for x in numbers) and 2 <= distinct <= MAX_AUTO_CLASSES
                  and distinct < len(present))
    written = "int" if all(_INTEGER.fullmatch(v) for v in present) else "float"  # "1.0" is written a float
    return ColumnLook(written, distinct, 1 if label_like else 0)


def guess_label(records: list[list[str]], names: list[str], header: bool, path) -> int:
    """The label column's index by the label rule (module docstring), warning
    (:class:`LabelGuessWarning`) when the other end column looks as much like a label."""
    width = len(names)
    if width < 2:
        return width - 1
    looks = [look([row[j] if j < len(row) else "" for row in records]) for j in range(width)]
    first, last, middle = looks[0], looks[-1], looks[1:-1]
    median = statistics.median([m.score for m in middle]) if middle else 0
    last_like_middle = sum(m.kind == last.kind for m in middle) * 2 > len(middle) if middle else False
    taken, other = (0, width - 1) if first.score > max(last.score, median) and last_like_middle else (width - 1, 0)
    chosen, rival = looks[taken], looks[other]
    if rival.score and (rival.score == chosen.score or (rival.score > chosen.score and rival.kind != "text")):
        warnings.warn(_doubt(path, names, header, taken, other, chosen, rival), stacklevel=3)
    return taken


def _doubt(path, names, header, taken, other, chosen, rival) -> LabelGuessWarning:
    def said(j):
        end = "first" if j == 0 else "last"
        return f"column {j} ({names[j]!r}, the {end}" if header else f"column {j} (the {end}"

    return LabelGuessWarning(
        f"{path}: the label is {said(taken)}: {chosen.describe()}), taken by default; {said(other)}: "
        f"{rival.describe()}) looks {'as much' if rival.score == chosen.score else 'more'} like a label: if it "
        "is the label, convert again with "
        "{label_column=}", label_column=names[other] if header else other)
