"""Shared pieces of the dataset converters: file opening, labels, conversion plans.

The public entry point is :func:`rfstream.io.convert`.

Labels
------
A label read from text is *normalized*: surrounding whitespace and ONE trailing
``"."`` are removed, so that ``">50K."`` (adult.test) and ``">50K"`` (adult.data),
or ``"normal."`` (KDD99) and ``"normal"``, name the same class.  A label that then
parses as a number is written in *canonical* form: integers without ``".0"``
(``"-1.0"`` -> ``"-1"``), other numbers by ``repr``.  Class names are canonical
labels, so ijcnn1's training labels ``-1.0/1.0`` and test labels ``-1/1`` agree.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .location import Location

MAX_CLASSES = 1000
"""Distinct labels tracked in pass 1; more than this cannot be a classification."""

MAX_AUTO_CLASSES = 32
"""task="auto": integer-valued numeric labels with at most this many values are classes."""

TASKS = ("auto", "classification", "regression")


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
def open_text(src: Location):
    """Open a plain, gzip, bzip2 or xz text file, local or remote; universal newlines."""
    compression = compression_of(src)
    with src.open("rb") as raw:
        opener = {"gzip": lambda f: gzip.GzipFile(fileobj=f), "bz2": bz2.BZ2File,
                  "xz": lzma.LZMAFile}.get(compression)
        binary = opener(raw) if opener else raw
        with io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline=None) as text:
            yield text


def is_comment(line: str) -> bool:
    """Blank lines and lines starting with ``#`` or ``|`` (UCI's comment marks)."""
    s = line.strip()
    return not s or s[0] in "#|"


def first_data_lines(path: Location, n: int = 2) -> tuple[int, list[str]]:
    """Number of leading comment/blank lines, and the next ``n`` non-blank lines."""
    skip, lines = 0, []
    with open_text(path) as f:
        for line in f:
            if not lines and is_comment(line):
                skip += 1
            elif line.strip():
                lines.append(line.rstrip("\n"))
                if len(lines) == n:
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
        s = pd.Series(values)
        missing = s.isna().to_numpy()
        self.n_missing += int(missing.sum())
        uniques = pd.unique(s[~missing])
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

    def decide(self, task: str, src: Location, column: Any) -> LabelSchema:
        """Task and classes after pass 1 (see :func:`rfstream.io.convert`)."""
        if self.n_missing:
            raise ValueError(
                f"{src}: {self.n_missing} rows have no value in label column {column!r} "
                "(empty or '?'); remove those rows, or pass label_column=None for unlabeled data"
            )
        if self.positive is not None:
            if task == "regression":
                raise ValueError("positive_class is only valid for classification; "
                                 "got task='regression'")
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
            raise ValueError(
                f"{src}: task='regression' needs numeric labels, but label column {column!r} "
                f"holds {self.example_text!r}; use task='classification' or another label_column"
            )
        if task == "regression":
            return LabelSchema("regression")
        if self.overflow:
            raise ValueError(
                f"{src}: label column {column!r} has more than {MAX_CLASSES} distinct values, "
                "too many for classification; use task='regression' or another label_column"
            )
        key = (lambda c: float(c)) if self.numeric else None
        return LabelSchema("classification", sorted(self.classes, key=key))


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
        self.schema, self.src = schema, src
        self.index = {c: k for k, c in enumerate(schema.classes or [])}
        self.counts = np.zeros(len(self.index), dtype=np.int64)
        self.n_unseen = 0

    @property
    def dtype(self):
        return np.float32 if self.schema.task == "regression" else np.int32

    def encode(self, values) -> np.ndarray:
        s = pd.Series(values)
        if s.isna().any():
            raise ValueError(
                f"{self.src}: {int(s.isna().sum())} rows have no label (empty or '?'); "
                "remove them, or pass label_column=None for unlabeled data"
            )
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
                raise ValueError(
                    f"{self.src}: label {u!r} is not a number, but the task is regression; "
                    "pass task='classification' (or fix the label)"
                )
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
        raise ValueError(f"like={like_path} has no labels; pass label_column=None")
    return schema


def check_like_task(task: str, positive: str | None, like: LabelSchema | None, like_path) -> None:
    """A ``like=`` conversion must not ask for another task or positive class."""
    if like is None:
        return
    if task not in ("auto", like.task):
        raise ValueError(f"task={task!r} contradicts like={like_path} whose task is {like.task!r}")
    if positive is not None and positive != like.positive:
        raise ValueError(
            f"positive_class={positive!r} contradicts like={like_path} "
            f"whose positive_class is {like.positive!r}"
        )


# ----------------------------------------------------------------- plans
@dataclass
class Plan:
    """Result of pass 1 of a converter: everything needed to write the Zarr arrays.

    ``chunks()`` runs pass 2 and yields ``(X_block float32, y_block or None)``;
    ``stats()`` (valid after it) gives counts seen while encoding.
    ``n_rows`` is None when pass 1 was skipped (``like=``): the writer then grows.
    """

    n_rows: int | None
    n_features: int
    y_dtype: Any
    attrs: dict
    chunks: Callable[[], Iterator[tuple[np.ndarray, np.ndarray | None]]]
    stats: Callable[[], dict]
