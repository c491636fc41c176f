"""Several CSV files converted in byte ranges by Dask tasks: the dataset of the files read
one after the other, bit for bit.

Behind :func:`rfstream.io.convert` when the source is several CSV files (a directory or a
glob).  Each uncompressed file is read as :mod:`rfstream.io.csv_ranges` reads one big
file, in ranges of at most ``block_size`` bytes, both passes parsed by Arrow where a
range allows: a file bigger than a block is cut on the client, as one big file is; a
smaller one is one range, whose comment lines and header its task finds, so that the
client opens no file of one block.  A compressed file, one whose header the cuts cannot
find, and one with a range that does not parse alone (a quoted line break across a cut,
a malformed row) is read whole by one task, by pandas (:class:`~rfstream.io.csv.CsvReader`,
the reader of every file before, and of every file with ``block_size=None``): pass 1 is
read again with such a file so (:meth:`CsvFiles.again`), as it is when a column parsed as
numbers in one range holds text in another.  Pass 2 writes each range at its row of the
output (:func:`~rfstream.io.convert_tasks.readers_plan`).
"""
from __future__ import annotations

import copy
from dataclasses import replace

from .convert_tasks import Job, readers_plan
from .csv import CsvReader, FileScan
from .csv_ranges import CsvRanges, first_rows, several_blocks
from .ingest import Plan, compression_of
from .location import Location

__all__ = ["CsvFiles", "plan"]


class CsvFiles:
    """CSV files read in parts: a part is a byte range of an uncompressed file
    (:class:`~rfstream.io.csv_ranges.CsvRanges`), or a whole file read by ``whole``, the
    :class:`~rfstream.io.csv.CsvReader` of the first file, whose rules every file follows."""

    counts_are_free = False

    def __init__(self, files: list[Location], block_size: int | None, **options):
        self.whole = CsvReader(files[0], **options)
        self.like, self.rows_per_chunk = self.whole.like, self.whole.rows_per_chunk
        self.files, self.block_size, self.numbers_first = files, block_size, True
        self.cut = {}          # path -> CsvRanges of a file of several ranges
        self.streams = set()   # paths of the files read whole, by pandas
        for f in files:
            if block_size is None or compression_of(f) is not None:
                self.streams.add(f.path)
            elif several_blocks(f, block_size):
                ranged = CsvRanges(f, block_size, whole=self.whole)
                if ranged.data_start is None:
                    self.streams.add(f.path)
                else:
                    self.cut[f.path] = ranged

    @property
    def units(self) -> list[Job]:
        """A :class:`~rfstream.io.convert_tasks.Job` per part, files in order."""
        return [Job(f, k) for f in self.files
                for k in range(len(self.cut[f.path].offsets) if f.path in self.cut else 1)]

    def ranges(self, loc: Location) -> CsvRanges | None:
        """The reader of ``loc``'s ranges (a file of one block: one range, found here, in the
        task), or None: the file is read whole."""
        if loc.path in self.streams:
            return None
        ranged = self.cut.get(loc.path)
        if ranged is None:
            ranged = CsvRanges(loc, self.block_size, whole=self.whole, one_range=True)
            ranged.numbers_first = self.numbers_first
        return None if ranged.data_start is None else ranged

    def scan_part(self, loc: Location, part: int) -> FileScan:
        ranged = self.ranges(loc)
        if ranged is None:
            return self.whole.scan(loc)
        scan = ranged.scan_part(loc, part)
        if scan.stream_only:
            return replace(scan, stream_only=False, refused=frozenset({loc.path}))
        if loc.path not in self.cut and scan.rows == [[0]]:  # as the file read whole says
            raise ValueError(f"{loc}: no data rows after the header")
        return scan

    def again(self, scan: FileScan) -> CsvFiles | None:
        """A reader to read pass 1 again with: the files with a range that did not parse
        alone read whole, and every range as text if a column parsed as numbers in some
        range holds text (its categories were not all collected); None when neither."""
        partial = self.numbers_first and scan.lacks_categories
        if not scan.refused and not partial:
            return None
        other = copy.copy(self)
        other.streams = self.streams | scan.refused
        other.numbers_first = self.numbers_first and not partial
        other.cut = {}
        for path, ranged in self.cut.items():
            if path not in scan.refused:
                other.cut[path] = copy.copy(ranged)
                other.cut[path].numbers_first = other.numbers_first
        return other

    def decide(self, scan: FileScan):
        """The files' schema (the first file's reader decides it); with each range's first
        row in its file and in the output (``spec = (csv spec, {path: (starts, outputs)})``)."""
        schema = self.whole.decide(scan)
        rows, read = {}, {}  # read: the rows of a file's parts so far
        for unit, out, (n,) in zip(self.units, first_rows(scan.rows), scan.rows):
            path = unit.loc.path
            starts, outputs = rows.setdefault(path, ([], []))
            starts.append(read.get(path, 0))
            outputs.append(out)
            read[path] = starts[-1] + n
        return replace(schema, spec=(schema.spec, rows))

    def encode(self, loc: Location, part: int, schema):
        spec, rows = schema.spec
        ranged = self.ranges(loc)
        if ranged is None:
            return self.whole.encode(loc, part, replace(schema, spec=spec))
        starts, outputs = rows[loc.path]
        return ranged.encode(loc, part, replace(schema, spec=(spec, starts, outputs)))


def plan(files: list[Location], options: dict, block_size: int | None) -> Plan:
    """The plan of several CSV files, read in parts by tasks (:class:`CsvFiles`)."""
    reader = CsvFiles(files, block_size, **options)
    return readers_plan(reader, reader.rows_per_chunk,
                        f"no data rows in any of the {len(files)} files ({files[0]}, ...)")
