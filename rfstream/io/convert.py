"""Convert CSV, LIBSVM, Parquet, .npy or .npz files into a Zarr dataset, streaming.

One reader module per source format (:mod:`~rfstream.io.csv`, :mod:`~rfstream.io.libsvm`,
:mod:`~rfstream.io.parquet`, :mod:`~rfstream.io.npy`) gives a :class:`~rfstream.io.ingest.Plan`;
the one table :data:`FORMATS` says, per format, its suffixes, how its content is recognised and
its reader.  This module picks the format and writes the plan's row blocks into a staged Zarr
group; several files, and one big uncompressed CSV file, are converted by Dask tasks
(:mod:`~rfstream.io.convert_tasks`, :mod:`~rfstream.io.csv_ranges`).  Narrative: docs/io.md.
"""
from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from .convert_tasks import files_plan, reader_plan
from .dataset import (
    SCHEMA_VERSION,
    ChunkWriter,
    check_rows_per_chunk,
    dataset_info,
    json_attrs,
)
from .ingest import BLOCK_SIZE, TASKS, Plan, canonical_label
from ..options import ParameterError
from .location import Location, as_location, storage_errors
from .staging import check_destination, staging

__all__ = ["FORMATS", "InputFormat", "convert", "format_of", "runs_as_tasks", "source_files"]

_GLOB = re.compile(r"[*?\[]")


def source_files(src, storage_options=None) -> list[Location]:
    """The files a source names, sorted by path (one element for a single file).

    ``src`` is a file, a directory (every file under it, recursively) or a glob
    pattern (``data/part-*.csv.gz``, ``s3://bucket/x/*.parquet``; a directory it
    matches gives its files), as a local path or a URL.  Names starting with ``.`` or
    ``_`` are skipped, as pyarrow and Spark do (``_SUCCESS``, ``.part-0.crc``).
    """
    loc = as_location(src, storage_options)
    if loc.exists():
        if loc.isfile():
            return [loc]
        files = _visible_files(loc)
    elif _GLOB.search(loc.path):
        hide = tuple(c for c in "._" if not loc.name.startswith(c))  # unless the pattern asks
        matches = [m for m in loc.glob(loc.path) if not m.name.startswith(hide)]
        files = [f for m in matches for f in (_visible_files(m) if m.isdir() else [m])]
    else:
        raise FileNotFoundError(f"source file {loc} does not exist")
    if not files:
        raise FileNotFoundError(f"source {loc} names no files (directories and names starting "
                                "with '.' or '_' are skipped)")
    return sorted(files, key=lambda f: f.path)


def _visible_files(folder: Location) -> list[Location]:
    root = folder.path.rstrip("/")
    return [f for f in folder.files()
            if not any(p.startswith((".", "_")) for p in f.path[len(root):].split("/") if p)]


# ----------------------------------------------------------------- the formats
@dataclass(frozen=True)
class InputFormat:
    """One input format: how a file is recognised and how it is read.

    ``suffixes`` name the format outright (compared lower case, after removing a
    compression suffix ``.gz``, ``.bz2`` or ``.xz``).  A file whose suffix names no
    format is recognised by its content: ``sniff(loc)`` of each format in the order of
    :data:`FORMATS` until one says True (None: never from the content).  A format
    reads a file through exactly one of

    * ``reader``: a class built as ``reader(first_file, **options)`` with ``scan``,
      ``decide`` and ``encode`` (the protocol of
      :func:`~rfstream.io.convert_tasks.reader_plan`): one file, or several as Dask
      tasks (:func:`~rfstream.io.convert_tasks.files_plan`);
    * ``planner``: ``planner(src, **options) -> Plan``, one file at a time.

    ``ranges``, when given, reads one big file in byte ranges as Dask tasks:
    ``ranges(src, options, block_size) -> Plan``, or None for one stream (CSV:
    :func:`~rfstream.io.csv_ranges.plan`); ``several``, several files in byte ranges:
    ``several(files, options, block_size) -> Plan`` (CSV: :func:`~rfstream.io.csv_ranges.several_plan`).
    ``title`` names the format in messages.
    """

    name: str
    title: str
    suffixes: tuple[str, ...] = ()
    sniff: Callable[[Location], bool] | None = None
    reader: type | None = None
    planner: Callable[..., Plan] | None = None
    ranges: Callable[..., Plan | None] | None = None
    several: Callable[..., Plan] | None = None

    def plan(self, src: Location, options: dict, block_size: int | None = None) -> Plan:
        """The plan of one file (in byte ranges when it has several blocks and the format allows)."""
        ranged = self.ranges(src, options, block_size) if self.ranges is not None else None
        if ranged is not None:
            return ranged
        if self.reader is not None:
            return reader_plan(self.reader(src, **options), src)
        return self.planner(src, **options)


@dataclass(frozen=True)
class _OnUse:
    """``name`` of the reader module ``module`` of this package, imported at its first call: the
    readers bring pandas and pyarrow, which a command that converts nothing does not need."""

    module: str
    name: str

    def __call__(self, *args, **kwargs):
        return getattr(importlib.import_module(f"{__package__}.{self.module}"), self.name)(*args, **kwargs)


def _any_content(loc: Location) -> bool:
    """The last sniff: a file no other format claims is CSV."""
    return True


FORMATS = (
    InputFormat("parquet", "Parquet", (".parquet", ".pq"), _OnUse("parquet", "has_magic"),
                reader=_OnUse("parquet", "ParquetReader")),
    InputFormat("libsvm", "LIBSVM", (".svm", ".libsvm", ".svmlight", ".trn", ".tst", ".t"),
                _OnUse("libsvm", "is_libsvm"), reader=_OnUse("libsvm", "LibsvmReader")),
    InputFormat("npy", "NumPy .npy", (".npy",), planner=_OnUse("npy", "plan")),
    InputFormat("npz", "NumPy .npz", (".npz",), planner=_OnUse("npy", "plan")),
    InputFormat("csv", "CSV", (), _any_content, reader=_OnUse("csv", "CsvReader"),
                ranges=_OnUse("csv_ranges", "plan"), several=_OnUse("csv_ranges", "several_plan")),
)
"""Every input format, in the order their content is sniffed (cheap magic bytes first)."""

_BY_SUFFIX = {s: f for f in FORMATS for s in f.suffixes}
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")


def _suffix_of(src: Location) -> str:
    """The file's suffix, lower case, with a compression suffix removed (``""``: none)."""
    name = src.name.lower()
    for ext in _COMPRESSION_SUFFIXES:
        name = name.removesuffix(ext)
    return "." + name.rsplit(".", 1)[-1] if "." in name else ""


def _sniff_format(src: Location) -> InputFormat:
    """The first format of :data:`FORMATS` whose ``sniff`` recognises the content."""
    return next(f for f in FORMATS if f.sniff is not None and f.sniff(src))


def format_of(src: Location) -> InputFormat:
    """The format of one file: the one its suffix names, else the one its content shows."""
    return _BY_SUFFIX.get(_suffix_of(src)) or _sniff_format(src)


def _files_format(files: list[Location], src: Location) -> InputFormat:
    """The one format of several files (read from the content once per suffix)."""
    sniffed = {}
    formats = []
    for f in files:
        suffix = _suffix_of(f)
        fmt = _BY_SUFFIX.get(suffix)
        if fmt is None:
            fmt = sniffed[suffix] if suffix in sniffed else sniffed.setdefault(suffix, _sniff_format(f))
        formats.append(fmt)
    odd = next((k for k in range(len(files)) if formats[k] is not formats[0]), None)
    if odd is not None:
        raise ValueError(f"{src}: {files[0].name} is {formats[0].name} but {files[odd].name} is "
                         f"{formats[odd].name}; the files of one source must have one format")
    if formats[0].reader is None:
        kind = formats[0].name
        titles = sorted(f.title for f in FORMATS if f.reader is not None)
        raise ValueError(f"{src}: {len(files)} .{kind} files; several files must be "
                         f"{', '.join(titles[:-1])} or {titles[-1]} (convert .{kind} files one at a time)")
    return formats[0]


def runs_as_tasks(src, storage_options=None, block_size=BLOCK_SIZE) -> bool:
    """Whether :func:`convert` of ``src`` runs Dask tasks: several files, or one uncompressed
    file of a format read in byte ranges (CSV) bigger than ``block_size`` bytes (the CLI
    connects to a scheduler for these)."""
    return task_bytes(src, storage_options, block_size) is not None


def task_bytes(src, storage_options=None, block_size=BLOCK_SIZE) -> int | None:
    """The bytes of ``src``'s files when :func:`convert` runs Dask tasks over them
    (:func:`runs_as_tasks`), else None: the size by which the CLI's small-data rule
    (:func:`rfstream.cluster.small_data_limit`) picks threads or the embedded cluster."""
    files = source_files(src, storage_options)
    if len(files) == 1:
        from .csv_ranges import several_blocks

        if format_of(files[0]).ranges is None or not several_blocks(files[0], block_size):
            return None
    total = 0
    for f in files:
        with storage_errors(f, "cannot be read"):
            total += int(f.fs.size(f.path))
    return total


def like_choices(attrs: dict, label_column, header, sep) -> tuple:
    """``(label_column, header, sep)`` with each "auto" replaced by the choice the training
    set's attributes ``attrs`` record: its label column (none when it has no labels), and a
    CSV's header and separator."""
    csv_source = attrs.get("format") == "csv"
    if label_column == "auto":
        if attrs.get("task") is None:
            label_column = None
        elif attrs.get("format") in ("csv", "parquet"):
            label_column = attrs.get("label_index" if csv_source else "label_column", "auto")
    if header == "auto" and csv_source and "header" in attrs:
        header = bool(attrs["header"])
    if sep == "auto" and csv_source:
        sep = attrs.get("sep", "auto")
    return label_column, header, sep


def convert(src, dst, *, label_column="auto", positive_class=None, rows_per_chunk=65536,
            header="auto", task="auto", like=None, overwrite=False, sep="auto",
            storage_options=None, block_size=BLOCK_SIZE) -> dict:
    """Convert CSV, LIBSVM, Parquet, .npy or .npz files into a Zarr dataset, streaming.

    The format (:data:`FORMATS`) follows the name, else the content; gzip, bzip2 and xz are
    detected.  Sources are read twice, a block of ``rows_per_chunk`` rows at a time, so memory
    does not grow with the rows.  Several files (one format), and one uncompressed CSV file
    bigger than ``block_size``, are converted by Dask tasks on the current scheduler, into the
    dataset of the files read one after the other in path order, bit for bit.  CSV
    columns that all parse as numbers are numeric (missing -> the column mean), others are
    one-hot encoded as ``"name=value"``; labels lose whitespace and one trailing ``"."``.
    The rules in full: docs/io.md, "rfstream/io/convert.py".

    Parameters
    ----------
    src : str, Path or URL
        A source file, a directory of files or a glob pattern (:func:`source_files`).
    dst : str, Path or URL
        Destination dataset (a local directory or a URL such as
        ``s3://bucket/train.zarr``; written whole or not at all, see
        :mod:`rfstream.io.staging`).
    label_column : "auto", "last", "first", int, str or None
        CSV and Parquet label column: 0-based index (negative allowed) or column name.
        None: no label.  "auto": with ``like``, the training set's label column; else, for
        CSV, the first or the last column by the rule of :mod:`rfstream.io.guess` (a
        :class:`~rfstream.io.guess.LabelGuessWarning` when the other looks as much like a
        label); for Parquet, the last.  LIBSVM: the label is always the first token (None
        drops it); .npz: the member ``y`` (None drops it).
    positive_class : str, optional
        Binary task "P vs rest": ``classes = ["rest", P]``, y = 1 where the label is P
        (``"normal"`` and ``"normal."`` are the same).
    rows_per_chunk : int
        Rows per Zarr chunk and per streamed block.
    header : "auto", True or False
        CSV: "auto": with ``like``, the training set's; else a header when the first row
        is not numbers throughout where the rows below are (:mod:`rfstream.io.guess`).
    task : "auto", "classification" or "regression"
        "auto": classification for non-numeric labels or integer-valued labels with at
        most 32 distinct values; regression otherwise.  "classification" of non-integer
        numbers is refused, of more than 32 distinct integers warned about
        (:class:`~rfstream.io.ingest.TaskWarning`).
    like : str or Path, optional
        A dataset converted earlier (the training set): reuse every choice of its schema:
        columns, categories, fill values, classes, task, positive class and, unless given
        here, its label column, header and separator.  Unseen categories encode as
        zeros (counted in ``n_unseen_categories``), unseen labels as ``y = -1``
        (counted in ``n_unseen_labels``).  Pass 1 is skipped for one stream, and only
        counts the rows of several files or byte ranges.
    overwrite : bool
        Replace an existing dataset at ``dst``.
    sep : "auto" or str
        CSV field separator (``r"\\s+"``: runs of whitespace); "auto" tries ``,``, tab, ``;``,
        then whitespace (with ``like``: the training set's).
    storage_options : dict, optional
        For every URL of the call (source, destination, ``like``); see
        :mod:`rfstream.io.location`.
    block_size : int or None
        Bytes per task of one uncompressed CSV file (default 64 MiB,
        :data:`~rfstream.io.ingest.BLOCK_SIZE`); a file of one block or less, or
        ``block_size=None``, is read as one stream.

    Returns
    -------
    dict
        The attributes written, plus ``path``, ``shape`` and ``seconds``.

    Raises
    ------
    FileNotFoundError
        ``src`` names no file.
    FileExistsError
        ``dst`` exists and ``overwrite`` is False.
    ValueError
        A bad option, files of different formats, or content that cannot be converted.
    """
    from . import csv_ranges

    start = time.perf_counter()
    files = source_files(src, storage_options)
    src, dst = as_location(src, storage_options), as_location(dst, storage_options)
    check_destination(dst, overwrite, "zarr.json")
    rows_per_chunk = check_rows_per_chunk(rows_per_chunk)
    block_size = csv_ranges.check_block_size(block_size)
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not valid; use one of {TASKS}")
    if sep != "auto" and not (isinstance(sep, str) and sep and "\n" not in sep and '"' not in sep):
        raise ParameterError("{sep=} is not valid; use 'auto' or a separator such as ',', ';' or a tab",
                             sep=sep)
    positive = None if positive_class is None else canonical_label(positive_class)[0]
    like_attrs = None if like is None else dataset_info(like, storage_options=storage_options)["attrs"]
    like = None if like is None else str(like)  # as messages say it
    if like_attrs is not None:
        label_column, header, sep = like_choices(like_attrs, label_column, header, sep)
    options = {"label_column": label_column, "positive": positive, "task": task, "like": like,
               "like_attrs": like_attrs, "rows_per_chunk": rows_per_chunk, "header": header, "sep": sep}
    try:
        attrs, w = _convert(files, src, dst, options, block_size, overwrite)
    except csv_ranges.SchemaChanged:  # a column pass 1 left to pass 2 holds text: read pass 1 whole
        attrs, w = _convert(files, src, dst, {**options, "single_pass": False}, block_size, overwrite)
    summary = json_attrs(attrs)
    summary.update(path=str(dst), shape=[w.rows, w.X.shape[1]],
                   seconds=round(time.perf_counter() - start, 3))
    return summary


def _convert(files, src, dst, options, block_size, overwrite):
    """Plan the conversion and write it, staged: ``(attrs, writer)``."""
    rows_per_chunk = options["rows_per_chunk"]
    if len(files) == 1:
        plan = format_of(files[0]).plan(files[0], options, block_size)
    elif (fmt := _files_format(files, src)).several is not None:
        plan = fmt.several(files, options, block_size)
    else:
        plan = files_plan(fmt.reader(files[0], **options), files, rows_per_chunk)
    with staging(dst, overwrite) as tmp:
        w = ChunkWriter(tmp, plan.n_features, plan.y_dtype, rows_per_chunk, plan.n_rows)
        if plan.write is not None:
            plan.write(w)
        else:
            for X, y in plan.chunks():
                w.append(X, y)
        attrs = {"schema_version": SCHEMA_VERSION, **plan.attrs, **plan.stats(),
                 "source": src.path if src.is_local else src.url, "n_rows": w.rows}
        w.finish(attrs)
    return attrs, w
