"""What the byte-range tests share (tests/io/test_convert_byte_ranges.py,
tests/io/test_convert_arrow.py): small CSV tables written with every variant of the format,
the comparison of two datasets bit for bit, and counters of what the tasks did."""
import numpy as np
import pandas as pd
from dask.callbacks import Callback

from rfstream.io import dataset_info, open_dataset
from rfstream.io.csv import sniff
from rfstream.io.csv_ranges import range_offsets
from rfstream.io.location import as_location

BLOCK = 300  # bytes per range: every range holds a few lines, most cuts fall inside one
R = 37       # rows per chunk


def load(path):
    X, y = open_dataset(path)
    return X.compute(), None if y is None else y.compute(), dataset_info(path)["attrs"], X.chunks


def assert_same(a, b):
    """The same X, y, attributes (the source aside: one name each) and chunks, exactly."""
    (Xa, ya, aa, ca), (Xb, yb, ab, cb) = load(a), load(b)
    np.testing.assert_array_equal(Xa, Xb)
    assert Xa.dtype == Xb.dtype and Xa.tobytes() == Xb.tobytes()  # bit for bit, NaN-free
    if ya is None:
        assert yb is None
    else:
        assert ya.dtype == yb.dtype and ya.tobytes() == yb.tobytes()
    assert aa == ab and ca == cb


class Keys(Callback):
    """The keys of the tasks dask's local schedulers run."""

    def __init__(self):
        super().__init__()
        self.keys = []

    def _pretask(self, key, dsk, state):
        self.keys.append(str(key))

    def count(self, prefix):
        return sum(k.startswith(prefix) for k in self.keys)


def table(n, seed, regression=False, quoted=True):
    rng = np.random.default_rng(seed)
    cities = ["Paris, FR", "Rome", 'say "hi"', "Oslo, NO", "Lima"] if quoted else ["Paris", "Rome", "Oslo", "Lima"]
    df = pd.DataFrame({
        "x": rng.normal(size=n) * 10.0 ** rng.integers(-3, 4, n),  # full-precision numbers
        "city": rng.choice(cities, n),  # quoted where a value holds "," or '"'
        "k": rng.integers(-5, 5, n),
        "t": rng.choice(["a", "b", "c"], n),
        "label": rng.normal(size=n).round(3) if regression else rng.choice(["yes.", "no", "maybe"], n),
    })
    df.loc[rng.random(n) < 0.1, "x"] = np.nan
    df.loc[rng.random(n) < 0.1, "city"] = np.nan
    df.loc[rng.random(n) < 0.1, "t"] = np.nan
    return df


def csv_text(df, *, header=True, crlf=False, comments=False, blanks=False, last_newline=True, seed=0):
    text = df.to_csv(index=False, header=header, na_rep="")
    rng = np.random.default_rng(seed)
    lines = text.splitlines()
    lines = [line.replace(",,", ",?,", 1) if rng.random() < 0.5 else line for line in lines]  # '?' or empty
    if blanks:  # blank lines among the rows: skipped by both readers
        for k in sorted(rng.choice(np.arange(2, len(lines)), 5, replace=False), reverse=True):
            lines.insert(k, "")
    if comments:
        lines = ["# written by a test", "| a UCI-style comment", "", *lines]
    end = "\r\n" if crlf else "\n"
    return end.join(lines) + (end if last_newline else "")


FILES = {
    "quoted, header, classification": dict(),
    "CRLF, no header, regression, no last newline": dict(header=False, crlf=True, last_newline=False,
                                                         regression=True),
    "comments, blank lines, header": dict(comments=True, blanks=True),
    "CRLF, comments, header, no last newline": dict(crlf=True, comments=True, last_newline=False),
}


def arrow_parses(monkeypatch, numbers_first=True) -> list:
    """Each range Arrow parsed, as it returns: ``"text"`` or ``"numbers"`` (pass 2, and pass 1
    unless ``numbers_first`` is false: then pass 1 parses text only, once per range)."""
    from rfstream.io import csv_ranges

    monkeypatch.setattr(csv_ranges.CsvRanges, "numbers_first", numbers_first)
    parsed, parse = [], csv_ranges.arrow_table

    def counted(data, layout, numeric=frozenset(), include=None):
        table = parse(data, layout, numeric, include)
        parsed.append("numbers" if numeric else "text" if include is None else "some")
        return table

    monkeypatch.setattr(csv_ranges, "arrow_table", counted)
    return parsed


def cuts(path, a, b):
    """``cut(block_size)``: whether a cut of ``path`` in ranges of at most ``block_size``
    bytes falls in ``[a, b]`` (None: it is one range).  The file is sniffed once: the
    tests try thousands of sizes."""
    where = as_location(path)
    layout = sniff(where)

    def cut(block_size):
        offsets = range_offsets(where, layout, block_size)
        return None if len(offsets) < 2 else any(a <= o <= b for o in offsets)
    return cut


def several_files(folder, rows, seed=0, **options):
    """CSV files of the same columns and ``rows`` rows each (``csv_text`` options: with a
    header each, unless told), in ``folder``; returns it."""
    folder.mkdir()
    for k, n in enumerate(rows):
        text = csv_text(table(n, seed + k, quoted=False), seed=k, **options)
        (folder / f"part-{k:02d}.csv").write_bytes(text.encode())
    return folder
