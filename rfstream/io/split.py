"""Split a dataset into a training and a test dataset, row by row, on the workers.

``rfstream split DATA TRAIN TEST`` and :func:`split_dataset` write the rows that
:func:`rfstream.train_test_split` gives for the same seed: row ``i`` is a test row when its
uniform from ``(random_state, i)`` is below ``test_size`` (exactly per class with
``stratify``), so ``rfstream fit --holdout`` holds out the same rows.  Each worker selects and
writes the rows of its own chunks; X is read once for both outputs, both staged.  The
outputs' attributes and the arrays carried along: docs/io.md, "rfstream/io/split.py".
"""
from __future__ import annotations

import contextlib
from numbers import Real

import dask.array as da
import numpy as np

from ..cluster import compute
from ..options import ParameterError
from ..random import check_seed
from ..reductions import sum_rows
from .dataset import ChunkWriter, _y_dtype, new_array, open_dataset
from .location import as_location, redact_url
from .staging import check_destination, overlap, staging
from .zarr_source import DEFAULT_X, DEFAULT_Y, SCHEMA_VERSION, infer_task, lazy_array, open_source

__all__ = ["DatasetSplit", "split_dataset"]

#: attributes of DATA that are counts over its rows: recomputed per part, or left out
ROW_COUNTS = ("n_rows", "class_counts", "n_unseen_labels", "n_unseen_categories")


def _same(a, b):
    return (type(a.fs).__name__, a.path.rstrip("/")) == (type(b.fs).__name__, b.path.rstrip("/"))


def _class_counts(y, offset=0, *, n_classes):
    """Rows per code ``-1 .. n_classes - 1`` (``-1``: a label unseen when DATA was converted)."""
    return np.bincount(np.clip(y.astype(np.int64) + 1, 0, n_classes), minlength=n_classes + 1).astype(float)


class DatasetSplit:
    """A split of ``data`` into ``train`` and ``test``: every check in the constructor
    (reading metadata only), the passes in :meth:`write`.

    Parameters
    ----------
    data, train, test, **keywords
        As for :func:`split_dataset`, which documents them.
    """

    def __init__(self, data, train, test, *, test_size=0.25, stratify=False, random_state=0, overwrite=False,
                 storage_options=None, x_array=DEFAULT_X, y_array=DEFAULT_Y, rows_per_chunk=None):
        if isinstance(test_size, bool) or not isinstance(test_size, Real) or not 0 < test_size < 1:
            raise ParameterError("{test_size (CLI)} must be a fraction in (0, 1), e.g. 0.25; "
                                 f"got {test_size!r}.", test_size=test_size)
        self.seed = check_seed(random_state)
        self.test_size = float(test_size)
        self.stratify = bool(stratify)
        self.data = data
        self.overwrite = overwrite
        self.storage_options = storage_options
        source, self.train, self.test = (as_location(p, storage_options) for p in (data, train, test))
        if _same(self.train, self.test):
            raise ValueError(f"TRAIN and TEST are the same location ({self.train}); give two different ones.")
        if overlap(self.train, self.test):
            raise ValueError(f"TRAIN ({self.train}) and TEST ({self.test}) are one inside the other; give two "
                             "separate locations.")
        for out in (self.train, self.test):
            how = overlap(out, source)
            if how is not None:
                said = "is DATA itself" if how == "is" else f"{how} DATA ({source})"
                raise ValueError(f"{out} {said}; write the split to other locations.")
        opened = open_source(data, storage_options)  # DATA missing: FileNotFoundError
        self.X, self.y = open_dataset(data, x=x_array, y=y_array, storage_options=storage_options)
        self.attrs = dict(opened.attrs)
        self.task = self.attrs.get("task") or infer_task(None if self.y is None else self.y.dtype)
        if self.stratify and (self.y is None or self.task != "classification"):
            what = "has no labels" if self.y is None else f"is a {self.task} dataset"
            raise ParameterError("{stratify} keeps the proportions of classes, and " f"{data} {what}; "
                                 "leave it out.", stratify=stratify)
        for out in (self.train, self.test):
            check_destination(out, overwrite, "zarr.json")
        self.extras = {}
        self.dropped = {}
        for name in opened.names():
            if name in (x_array, y_array):
                continue
            array = opened.array(name)
            if name in (DEFAULT_X, DEFAULT_Y):
                self.dropped[name] = f"its name is that of the output's {name}"
            elif tuple(array.shape[:1]) != (self.X.shape[0],):
                self.dropped[name] = f"shape {tuple(array.shape)}, not one row per row of X"
            elif np.dtype(array.dtype).kind not in "biuf":
                self.dropped[name] = f"dtype {array.dtype} is not numeric"
            else:
                self.extras[name] = lazy_array(opened, name)
        self.rows_per_chunk = int(rows_per_chunk or max(max(self.X.chunks[0], default=1), 1))

    def parts(self):
        """``(train arrays, test arrays)``, each ``{"X": ..., "y": ..., extra arrays}`` (lazy);
        with ``stratify``, the passes over the labels run here."""
        from ..preprocess import train_test_split  # scikit-learn: not imported with rfstream.io

        names = ["X"] + (["y"] if self.y is not None else []) + list(self.extras)
        arrays = [self.X] + ([self.y] if self.y is not None else []) + list(self.extras.values())
        split = train_test_split(*arrays, test_size=self.test_size, random_state=self.seed,
                                 stratify=self.y if self.stratify else None)
        return dict(zip(names, split[0::2])), dict(zip(names, split[1::2]))

    def _attrs(self, part, arrays, counts):
        attrs = {k: v for k, v in self.attrs.items() if k not in ROW_COUNTS}
        attrs.update(n_rows=int(arrays["X"].shape[0]),
                     split={"of": redact_url(str(self.data)), "part": part, "test_size": self.test_size,
                            "random_state": self.seed, "stratify": self.stratify})
        if counts is not None:
            attrs["n_unseen_labels"] = int(counts[0])
            attrs["class_counts"] = {str(c): int(k) for c, k in zip(self.attrs["classes"], counts[1:])}
        meta = {"schema_version": SCHEMA_VERSION, "task": self.task,
                "feature_names": [f"x{j}" for j in range(self.X.shape[1])]}
        return {**meta, **attrs}

    def write(self):
        """Select and write both parts in one pass over X; returns the summary
        (:func:`split_dataset`)."""
        train, test = self.parts()
        for part, where in ((train, self.train), (test, self.test)):
            if part["X"].shape[0] == 0:
                raise ParameterError("{test_size=} leaves no rows for " f"{where} (DATA has "
                                     f"{self.X.shape[0]} rows); choose a " "{test_size} nearer 0.5.",
                                     test_size=self.test_size)
        classes = self.attrs.get("classes")
        counted = self.y is not None and self.task == "classification" and classes is not None \
            and np.dtype(self.y.dtype).kind in "iu"
        rpc = self.rows_per_chunk
        writes = []
        counts = []
        writers = []
        with contextlib.ExitStack() as stack:
            for part in (train, test):
                tmp = stack.enter_context(staging(self.train if part is train else self.test, self.overwrite))
                y = part.get("y")
                writer = ChunkWriter(tmp, self.X.shape[1], None if y is None else _y_dtype(y), rpc,
                                     n_rows=int(part["X"].shape[0]))
                rpc = writer.chunk_rows  # fewer for wide rows: each source block is whole chunks
                sources = [part["X"].astype(np.float32).rechunk((rpc, -1))]
                targets = [writer.X]
                if y is not None:
                    sources.append(y.astype(writer.y.dtype).rechunk((rpc,)))
                    targets.append(writer.y)
                for name in self.extras:
                    a = part[name]
                    sources.append(a.rechunk((rpc,) + (-1,) * (a.ndim - 1)))
                    targets.append(new_array(writer.group, name, shape=a.shape, dtype=a.dtype,
                                             chunks=(rpc,) + a.shape[1:], fill_value=0))
                stored = da.store(sources, targets, lock=False, compute=False)
                writes += stored if isinstance(stored, (list, tuple)) else [stored]
                if counted:
                    counts.append(sum_rows(_class_counts, len(classes) + 1, y, n_classes=len(classes)))
                writers.append((writer, part))
            done = compute(*writes, *counts)  # the workers select and write their chunks' rows
            done = done[len(writes):] if isinstance(done, tuple) else ()
            for i, (writer, part) in enumerate(writers):
                writer.rows = writer.n_rows
                writer.finish(self._attrs(("train", "test")[i], part, done[i] if counted else None))
        return {"data": redact_url(str(self.data)), "train": str(self.train), "test": str(self.test),
                "train_rows": int(train["X"].shape[0]), "test_rows": int(test["X"].shape[0]),
                "test_size": self.test_size, "stratify": self.stratify, "random_state": self.seed,
                "arrays": ["X"] + (["y"] if self.y is not None else []) + list(self.extras),
                **({"dropped": self.dropped} if self.dropped else {})}


def split_dataset(data, train, test, *, test_size=0.25, stratify=False, random_state=0, overwrite=False,
                  storage_options=None, x_array=DEFAULT_X, y_array=DEFAULT_Y, rows_per_chunk=None):
    """Write the training and the test rows of the dataset ``data`` as two datasets.

    Parameters
    ----------
    data, train, test : str, Path or URL
        The dataset to split and the two datasets to write (``memory://``, ``s3://``, ...
        with ``storage_options``); three different locations.
    test_size : float in (0, 1)
        The fraction of the rows in ``test``: in expectation (row ``i`` is a test row when
        its uniform ``u_i``, from ``(random_state, i)``, is below it: the rows of
        :func:`rfstream.train_test_split`), or exactly per class with ``stratify``.
    stratify : bool
        Classification only: each class ``c`` has ``round(test_size * n_c)`` test rows
        (two more passes over the labels, :func:`rfstream.preprocess.stratified_thresholds`).
    random_state : int
        The seed.
    overwrite : bool
        Replace existing ``train`` and ``test`` datasets; otherwise ``FileExistsError``.
    x_array, y_array : str
        The arrays of ``data`` written as ``X`` and ``y``.
    rows_per_chunk : int, optional
        Rows per chunk of the outputs (default: DATA's).

    Returns
    -------
    dict
        The locations, the rows of each part, the test size, the seed, the arrays written
        (and, under ``dropped``, those left out and why: docs/io.md).

    Raises
    ------
    ValueError
        For a ``test_size`` outside (0, 1), outputs at the same place or at DATA's,
        ``stratify`` without class labels, or a part left without rows.
    """
    return DatasetSplit(data, train, test, test_size=test_size, stratify=stratify, random_state=random_state,
                        overwrite=overwrite, storage_options=storage_options, x_array=x_array,
                        y_array=y_array, rows_per_chunk=rows_per_chunk).write()
