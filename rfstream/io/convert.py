"""Convert a CSV, LIBSVM, .npy or .npz file into a Zarr dataset, streaming.

One reader module per source format (:mod:`~rfstream.io.csv`,
:mod:`~rfstream.io.libsvm`, :mod:`~rfstream.io.npy`) returns a
:class:`~rfstream.io.ingest.Plan`; this module picks the reader and writes the
plan's row blocks into a staged Zarr group (:mod:`~rfstream.io.dataset`).
"""
from __future__ import annotations

import time

from . import csv, libsvm, npy
from .dataset import (
    SCHEMA_VERSION,
    ChunkWriter,
    check_rows_per_chunk,
    dataset_info,
    json_attrs,
)
from .ingest import TASKS, canonical_label, first_data_lines
from .location import Location, as_location
from .staging import check_destination, staging

__all__ = ["convert"]


def _source_kind(src: Location) -> str:
    name = src.name.lower()
    for ext in (".gz", ".bz2", ".xz"):
        name = name.removesuffix(ext)
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix in (".npy", ".npz"):
        return suffix[1:]
    if suffix in libsvm.SUFFIXES:
        return "libsvm"
    _, lines = first_data_lines(src, 1)
    return "libsvm" if lines and libsvm.looks_like_libsvm(lines[0]) else "csv"


_PLANNERS = {"csv": csv.plan, "libsvm": libsvm.plan, "npy": npy.plan, "npz": npy.plan}


def convert(src, dst, *, label_column="last", positive_class=None, rows_per_chunk=65536,
            header="auto", task="auto", like=None, overwrite=False, sep="auto",
            storage_options=None) -> dict:
    """Convert a CSV, LIBSVM, .npy or .npz file into a Zarr dataset, streaming.

    The format follows the name (``.npy``, ``.npz``; ``.svm .libsvm .svmlight .trn
    .tst .t`` are LIBSVM) and otherwise the first data line (``label idx:val ...`` is
    LIBSVM, anything else CSV).  gzip, bzip2 and xz compression is detected.  Text
    sources are read twice, one chunk of ``rows_per_chunk`` rows at a time, so memory
    does not grow with the number of rows (see :mod:`rfstream.io.csv` and :mod:`rfstream.io.libsvm`).

    CSV: lines at the top that start with ``#`` or ``|`` and blank lines are skipped;
    ``?`` and pandas' usual markers (empty, ``NA``, ``nan`` ...) mean missing.  A column
    whose values all parse as numbers is numeric (missing -> the column mean); any other
    column is categorical and one-hot encoded into columns named ``"name=value"``, in
    sorted order (missing -> all zeros).  Without a header, column ``j`` (0-based, label
    included) is named ``"c{j}"``.

    Labels are stripped of whitespace and of ONE trailing ``"."`` (adult.test writes
    ``">50K."`` where adult.data writes ``">50K"``, KDD99 writes ``"normal."``), and
    numeric labels are written canonically (``"-1.0"`` -> ``"-1"``).

    Parameters
    ----------
    src, dst : str, Path or URL
        Source file; destination dataset (a local directory or a URL such as
        ``s3://bucket/train.zarr``; written whole or not at all, see
        :mod:`rfstream.io.staging`).
    label_column : "last", "first", int, str or None
        CSV label column: 0-based index (negative allowed) or header name.  None: no
        label.  LIBSVM: the label is always the first token (None drops it).
    positive_class : str, optional
        Binary task "P vs rest": ``classes = ["rest", P]``, y = 1 where the label is P
        (``"normal"`` and ``"normal."`` are the same).
    rows_per_chunk : int
        Rows per Zarr chunk and per streamed block.
    header : "auto", True or False
        "auto": a header if no field of the first line is a number while the second
        line has one.
    task : "auto", "classification" or "regression"
        "auto": classification for non-numeric labels or integer-valued labels with at
        most 32 distinct values; regression otherwise.
    like : str or Path, optional
        A dataset converted earlier (the training set): reuse its columns, categories,
        fill values, classes, task and positive class.  Unseen categories encode as
        zeros (counted in ``n_unseen_categories``), unseen labels as ``y = -1``
        (counted in ``n_unseen_labels``).  Pass 1 is skipped.
    overwrite : bool
        Replace an existing dataset at ``dst``.
    sep : "auto" or str
        CSV field separator; "auto" tries ``,``, tab, ``;``, then whitespace.
    storage_options : dict, optional
        For every URL of the call (source, destination, ``like``); see
        :mod:`rfstream.io.location`.

    Returns
    -------
    dict
        The attributes written, plus ``path``, ``shape`` and ``seconds``.
    """
    start = time.perf_counter()
    src, dst = as_location(src, storage_options), as_location(dst, storage_options)
    if not src.exists():
        raise FileNotFoundError(f"source file {src} does not exist")
    if not src.isfile():
        raise ValueError(f"source {src} is not a file")
    check_destination(dst, overwrite, "zarr.json")
    rows_per_chunk = check_rows_per_chunk(rows_per_chunk)
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not valid; use one of {TASKS}")
    if sep != "auto" and not (isinstance(sep, str) and sep):
        raise ValueError(f"sep={sep!r} is not valid; use 'auto' or a separator string")
    positive = None if positive_class is None else canonical_label(positive_class)[0]
    like_attrs = None if like is None else dataset_info(like, storage_options=storage_options)["attrs"]
    plan = _PLANNERS[_source_kind(src)](
        src, label_column=label_column, positive=positive, task=task, like=like,
        like_attrs=like_attrs, rows_per_chunk=rows_per_chunk, header=header, sep=sep)
    with staging(dst, overwrite) as tmp:
        w = ChunkWriter(tmp, plan.n_features, plan.y_dtype, rows_per_chunk, plan.n_rows)
        for X, y in plan.chunks():
            w.append(X, y)
        attrs = {"schema_version": SCHEMA_VERSION, **plan.attrs, **plan.stats(),
                 "source": src.path if src.is_local else src.url, "n_rows": w.rows}
        w.finish(attrs)
    summary = json_attrs(attrs)
    summary.update(path=str(dst), shape=[w.rows, plan.n_features],
                   seconds=round(time.perf_counter() - start, 3))
    return summary
