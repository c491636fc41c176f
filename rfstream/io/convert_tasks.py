"""A source read in parts: many files (or Parquet row groups) converted as Dask tasks.

Behind :func:`rfstream.io.convert` for several files (:func:`files_plan`, :func:`readers_plan`)
and for one CSV file read in byte ranges (:func:`parts_plan`).  Each format's *reader*
(protocol: :func:`reader_plan`) gives pure functions; this module makes them a graph run by
:func:`rfstream.cluster.compute`.  Pass 1 is a reduction of per-part summaries; pass 2 has a
task per part writing its own rows, and a *seam* task per Zarr chunk two parts share, so each
chunk is written whole, once, with no lock and no row on the client; columns whose mean pass 1
left to pass 2 are filled after it (:func:`fill_missing`).  Narrative: docs/io.md.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import reduce
from typing import Any

import dask
import numpy as np

from ..cluster import compute
from .ingest import Plan
from .location import Location

__all__ = ["Encoding", "Schema", "files_plan", "fill_missing", "merge_stats", "parts_plan", "reader_plan",
           "readers_plan"]

SPLIT_EVERY = 8
"""Summaries merged per task of pass 1's reduction tree."""


# ----------------------------------------------------------------- readers
@dataclass
class Schema:
    """What pass 1 decided: the output's width, y's dtype, the attributes, and the
    format's own encoding rules (``spec``) that every pass-2 task receives."""

    n_features: int
    y_dtype: Any
    attrs: dict
    spec: Any


@dataclass
class Encoding:
    """Pass 2 of one part: ``blocks`` yields ``(X float32, y or None)``; ``stats()``,
    valid after it, gives what encoding counted (:func:`merge_stats` adds them)."""

    blocks: Iterator[tuple[np.ndarray, np.ndarray | None]]
    stats: Callable[[], dict]


def merge_stats(a: dict, b: dict) -> dict:
    """Counts of two encodings together (unseen categories and labels, class counts, and the
    sums of the columns pass 1 left to pass 2: ``numbers``, ``{column: (ExactSum, count, missing)}``)."""
    out = {k: a[k] + b[k] for k in ("n_unseen_categories", "n_unseen_labels")}
    if "class_counts" in a:
        out["class_counts"] = {c: a["class_counts"][c] + b["class_counts"][c]
                               for c in a["class_counts"]}
    if "numbers" in a or "numbers" in b:
        na, nb = a.get("numbers", {}), b.get("numbers", {})
        out["numbers"] = {j: _sum_numbers(na.get(j), nb.get(j)) for j in {**na, **nb}}
    return out


def _sum_numbers(a, b):
    if a is None or b is None:
        return a or b
    return a[0].merge(b[0]), a[1] + b[1], a[2] + b[2]


def reader_plan(reader, src: Location) -> Plan:
    """A single-file :class:`Plan` from a *reader*, built on the client from the first
    file and the conversion's options; a reader provides:

    * ``scan(loc) -> Scan``: pass 1 over one file; ``Scan.rows`` is ``[[rows of
      each part]]`` (a part is a whole text file, or one Parquet row group) and
      ``Scan.merge(other)`` the summary of both, ``self`` first, in memory that does
      not grow with the rows;
    * ``decide(scan or None) -> Schema``, on the client (None: pass 1 was skipped,
      ``like=`` gave the schema);
    * ``encode(loc, part, schema) -> Encoding``: pass 2 over one part;
    * ``counts_are_free``: whether ``scan`` reads only metadata under ``like=`` (else pass 1 is skipped);
    * for a file read in parts by separate tasks (:func:`parts_plan`), ``scan_part(loc,
      part) -> Scan`` with ``rows == [[rows of that part]]``, ``encode`` of each part, and
      ``whole``: the reader of the file as one stream.
    """
    scan = reader.scan(src) if reader.like is None or reader.counts_are_free else None
    schema = reader.decide(scan)
    parts = list(range(len(scan.rows[0]))) if scan is not None else [0]
    done = []

    def chunks():
        for part in parts:
            encoding = reader.encode(src, part, schema)
            done.append(encoding)
            yield from encoding.blocks

    def stats():
        return reduce(merge_stats, [e.stats() for e in done])

    n_rows = None if scan is None else sum(scan.rows[0])
    return Plan(n_rows, schema.n_features, schema.y_dtype, schema.attrs, chunks, stats)


# ----------------------------------------------------------------- many files as tasks
class Job:
    """One task's share of the source (a plain object: dask passes it as it is)."""

    __slots__ = ("loc", "part", "shared", "start", "stop")

    def __init__(self, loc: Location, part: int = 0, start: int = 0, stop: int = 0,
                 shared: frozenset = frozenset()):
        self.loc = loc
        self.part = part
        self.start = start
        self.stop = stop
        self.shared = shared

    def __str__(self) -> str:
        return f"{self.loc}" + (f" (part {self.part})" if self.part else "")


class Target:
    """The Zarr arrays pass 2 writes into (zarr arrays pickle to the workers)."""

    __slots__ = ("X", "y")

    def __init__(self, X, y):
        self.X = X
        self.y = y


def files_plan(reader, files: list[Location], rows_per_chunk: int) -> Plan:
    """Run pass 1 over ``files`` as a reduction; return a :class:`Plan` whose
    ``write`` runs pass 2 as tasks that write their own rows."""
    token = uuid.uuid4().hex[:12]
    units = [Job(f) for f in files]
    scan = scan_units(reader, units, _scan, token)
    return units_plan(reader, units, scan, rows_per_chunk, token,
                      f"no data rows in any of the {len(files)} files ({files[0]}, ...)")


def parts_plan(reader, loc: Location, n_parts: int, rows_per_chunk: int) -> Plan:
    """One file read in ``n_parts`` parts (a CSV file's byte ranges): pass 1 a task per part
    (``reader.scan_part``, again while ``reader.again(scan)`` gives a reader), pass 2 as in
    :func:`files_plan`; read as one stream by ``reader.whole`` when a scan is ``stream_only``."""
    units = [Job(loc, k) for k in range(n_parts)]
    reader, scan, token = _scan_parts(reader, lambda _: units)
    if scan.stream_only:
        return reader_plan(reader.whole, loc)
    return units_plan(reader, units, scan, rows_per_chunk, token, f"{loc}: no data rows after the header")


def readers_plan(reader, rows_per_chunk: int, empty: str) -> Plan:
    """Several files read in parts (``reader.units``, :class:`~rfstream.io.csv_ranges.CsvFiles`):
    pass 1 as in :func:`parts_plan`, pass 2 as in :func:`files_plan`."""
    reader, scan, token = _scan_parts(reader, lambda r: r.units)
    return units_plan(reader, reader.units, scan, rows_per_chunk, token, empty)


def _scan_parts(reader, units_of):
    """Pass 1 over the parts ``units_of(reader)``, read again with ``reader.again(scan)`` as
    long as that gives a reader and no part sent the file to one stream:
    ``(reader, scan, token)`` of the last reading."""
    while True:
        token = uuid.uuid4().hex[:12]
        scan = scan_units(reader, units_of(reader), _scan_part, token)
        if scan.stream_only or (slower := reader.again(scan)) is None:
            return reader, scan, token
        reader = slower


def scan_units(reader, units: list[Job], scan_one, token: str):
    """Pass 1: ``scan_one(reader, unit)`` per unit, merged in order by a tree of tasks."""
    reader_key = _reader_key(reader, token)
    scans = [dask.delayed(scan_one, pure=False)(reader_key, unit, dask_key_name=f"rfstream-scan-{token}-{k}")
             for k, unit in enumerate(units)]
    return compute(_tree(scans, _merge_scans, f"rfstream-scan-merge-{token}"))


def units_plan(reader, units: list[Job], scan, rows_per_chunk: int, token: str, empty: str) -> Plan:
    """The :class:`Plan` of pass 2 after pass 1's ``scan``: a job per part, each unit's
    parts numbered from its own (``scan.rows`` holds the rows of each unit's parts)."""
    schema = reader.decide(scan)
    jobs = []
    start = 0
    for unit, rows in zip(units, scan.rows):
        for part, n in enumerate(rows, start=unit.part):
            jobs.append(Job(unit.loc, part, start, start + n))
            start += n
    if start == 0:
        raise ValueError(empty)
    stats = {}

    def write(writer) -> None:
        target = Target(writer.X, writer.y)
        graph = _write_graph(_reader_key(reader, token), schema, jobs, target, writer.chunk_rows, token)
        stats.update(compute(graph))
        writer.rows = start
        if "numbers" in stats:
            fill_missing(reader, schema, stats.pop("numbers"), target, start, writer.chunk_rows, token)

    return Plan(start, schema.n_features, schema.y_dtype, schema.attrs, None, lambda: stats, write)


def fill_missing(reader, schema: Schema, numbers: dict, target: Target, n_rows: int, rows_per_chunk: int,
                 token: str) -> None:
    """After pass 2 of columns whose mean pass 1 left to it (``numbers``: ``{column: (ExactSum,
    count, missing)}``): ``reader.filled(schema, numbers)`` sets the schema's attributes and
    gives ``{output column: mean}`` of those with missing fields, which pass 2 wrote NaN; a
    task per Zarr chunk fills them (reads the chunk, writes it back where it held one)."""
    fills = reader.filled(schema, numbers)
    if not fills:
        return
    columns = np.array(sorted(fills), dtype=np.intp)
    values = np.array([fills[c] for c in columns.tolist()], dtype=np.float64).astype(np.float32)
    target_key = dask.delayed(target, name=f"rfstream-target-{token}", traverse=False)
    tasks = [dask.delayed(_fill_chunk, pure=False)(target_key, a, min(a + rows_per_chunk, n_rows), columns, values,
                                                   dask_key_name=f"rfstream-fill-{token}-{a // rows_per_chunk}")
             for a in range(0, n_rows, rows_per_chunk)]
    compute(_tree(tasks, _count_all, f"rfstream-fill-merge-{token}"))


def _fill_chunk(target: Target, a: int, b: int, columns: np.ndarray, values: np.ndarray) -> int:
    X = target.X[a:b]
    block = X[:, columns]
    missing = np.isnan(block)
    if not missing.any():
        return 0
    X[:, columns] = np.where(missing, values, block)
    target.X[a:b] = X
    return 1


def _count_all(counts: list) -> int:
    return sum(counts)


def _reader_key(reader, token: str):
    return dask.delayed(reader, name=f"rfstream-reader-{token}", traverse=False)


def _tree(items: list, combine, name: str):
    """Reduce delayed ``items`` in order, ``SPLIT_EVERY`` per task."""
    level = 0
    while len(items) > 1:
        items = [dask.delayed(combine, pure=False)(items[a:a + SPLIT_EVERY],
                                                   dask_key_name=f"{name}-{level}-{a // SPLIT_EVERY}")
                 for a in range(0, len(items), SPLIT_EVERY)]
        level += 1
    return items[0]


def _scan(reader, job: Job):
    return reader.scan(job.loc)


def _scan_part(reader, job: Job):
    return reader.scan_part(job.loc, job.part)


def _merge_scans(scans: list):
    return reduce(lambda a, b: a.merge(b), scans)


def _merge_all_stats(stats: list) -> dict:
    return reduce(merge_stats, stats)


def _write_graph(reader_key, schema: Schema, jobs: list[Job], target: Target, rows_per_chunk: int,
                 token: str):
    """Pass 2: a task per part, a seam task per shared chunk; computes to the merged stats."""
    R = rows_per_chunk
    sharing = defaultdict(list)  # chunk -> the parts whose rows it holds, in order
    for k, job in enumerate(jobs):
        if job.stop > job.start:
            for c in range(job.start // R, (job.stop - 1) // R + 1):
                sharing[c].append(k)
    shared = {c for c, ks in sharing.items() if len(ks) > 1}
    schema_key = dask.delayed(schema, name=f"rfstream-schema-{token}", traverse=False)
    target_key = dask.delayed(target, name=f"rfstream-target-{token}", traverse=False)
    results, stats = [], []
    for k, job in enumerate(jobs):
        ends = {job.start // R, (job.stop - 1) // R} if job.stop > job.start else set()
        job.shared = frozenset(ends & shared)
        r = dask.delayed(_write_part, pure=False)(reader_key, schema_key, target_key, job, R,
                                                  dask_key_name=f"rfstream-encode-{token}-{k}")
        results.append(r)
        stats.append(dask.delayed(_stats_of, pure=False)(r, dask_key_name=f"rfstream-stats-{token}-{k}"))
    seams = []
    for c in sorted(shared):
        pieces = [dask.delayed(_piece, pure=False)(results[k], c, dask_key_name=f"rfstream-piece-{token}-{k}-{c}")
                  for k in sharing[c]]
        seams.append(dask.delayed(_write_seam, pure=False)(target_key, c, R, pieces,
                                                           dask_key_name=f"rfstream-seam-{token}-{c}"))
    total = _tree(stats, _merge_all_stats, f"rfstream-stats-merge-{token}")
    return dask.delayed(_after, pure=False)(total, seams, dask_key_name=f"rfstream-written-{token}")


def _stats_of(result):
    return result[0]


def _piece(result, c: int):
    return result[1][c]


def _after(value, _done):
    return value


class RegionWriter:
    """Writes a part's rows into its region ``[job.start, job.stop)`` of the arrays, a
    whole Zarr chunk at a time; keeps the rows of chunks shared with other parts."""

    def __init__(self, target: Target, job: Job, rows_per_chunk: int):
        self.target = target
        self.job = job
        self.R = rows_per_chunk
        self.pos = job.start
        self.buffer = []
        self.pieces = {}

    def add(self, X: np.ndarray, y: np.ndarray | None) -> None:
        i = 0
        while i < len(X):
            if self.pos >= self.job.stop:
                raise _changed(self.job, "more")
            c = self.pos // self.R
            end = min((c + 1) * self.R, self.job.stop)
            take = min(len(X) - i, end - self.pos)
            whole = i == 0 and take == len(X)  # the block itself, not a view of it
            self.buffer.append((X, y) if whole else (X[i:i + take], None if y is None else y[i:i + take]))
            self.pos, i = self.pos + take, i + take
            if self.pos == end:
                self._flush(c, end)

    def _flush(self, c: int, end: int) -> None:
        X = _joined([b[0] for b in self.buffer])
        y = None if self.buffer[0][1] is None else _joined([b[1] for b in self.buffer])
        self.buffer = []
        if c in self.job.shared:
            self.pieces[c] = (X, y)
        else:
            _store(self.target, end - len(X), X, y)

    def close(self) -> dict:
        if self.pos != self.job.stop:
            raise _changed(self.job, "fewer")
        return self.pieces


def _joined(pieces: list) -> np.ndarray:
    """The pieces as one array: a single block that owns its data as it is (a byte range's
    blocks are cut at the chunks), else a copy, so that no view keeps a bigger block alive."""
    if len(pieces) == 1 and pieces[0].base is None:
        return pieces[0]
    return np.concatenate(pieces)


def _changed(job: Job, what: str) -> ValueError:
    return ValueError(f"{job}: pass 2 read {what} rows than the {job.stop - job.start} of pass 1; "
                      "did the source file change during the conversion?")


def _store(target: Target, a: int, X: np.ndarray, y) -> None:
    target.X[a:a + len(X)] = X
    if target.y is not None:
        target.y[a:a + len(X)] = y


def _write_part(reader, schema: Schema, target: Target, job: Job, rows_per_chunk: int):
    """Pass 2 of one part: ``(stats, {shared chunk: (X, y) rows of this part})``."""
    encoding = reader.encode(job.loc, job.part, schema)
    region = RegionWriter(target, job, rows_per_chunk)
    for X, y in encoding.blocks:
        region.add(X, y)
    return encoding.stats(), region.close()


def _write_seam(target: Target, c: int, rows_per_chunk: int, pieces: list) -> None:
    """Write chunk ``c`` from the pieces of the parts that share it, in order."""
    X = np.concatenate([p[0] for p in pieces])
    y = None if pieces[0][1] is None else np.concatenate([p[1] for p in pieces])
    _store(target, c * rows_per_chunk, X, y)
