"""Conversion of many files as Dask tasks (rfstream.io.convert_tasks): pass 1 a reduction,
pass 2 region writes; the result is the conversion of the files' concatenation, bit for
bit, under dask's threads and under a distributed cluster of two worker processes."""
import bz2
import gzip
import math
from fractions import Fraction
from itertools import pairwise

import dask
import distributed
import numpy as np
import pandas as pd
import pytest
from helpers.io import load, siblings, write

from rfstream.io import convert
from rfstream.io.convert import source_files
from rfstream.io.convert_tasks import Job, RegionWriter, Target
from rfstream.io.ingest import ExactSum

R = 64  # rows per chunk: the cuts below fall inside chunks, on their edges and span several


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as running:
        yield running


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request, cluster):
    """Run the test body under dask's threads, then with a Client of 2 worker processes."""
    if request.param == "threads":
        with dask.config.set(scheduler="threads"):
            yield None
    else:
        with distributed.Client(cluster) as client:
            yield client


def split(lines: list[str], cuts: list[int], folder, name, suffixes):
    """Write ``lines[cuts[k]:cuts[k+1]]`` to ``folder/name{k}{suffix}``, compressing .gz/.bz2."""
    folder.mkdir(exist_ok=True)
    for k, (a, b) in enumerate(pairwise(cuts)):
        path = folder / f"{name}{k:02d}{suffixes[k % len(suffixes)]}"
        opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix)
        with (opener(path, "wt") if opener else open(path, "w")) as f:
            f.write("".join(lines[a:b]))
    return folder


def assert_same(a, b):
    """The same X, y and attributes (the source names aside), exactly."""
    Xa, ya, aa = load(a)
    Xb, yb, ab = load(b)
    np.testing.assert_array_equal(Xa, Xb)
    np.testing.assert_array_equal(ya, yb)
    assert {k: v for k, v in aa.items() if k != "source"} == {k: v for k, v in ab.items() if k != "source"}


def csv_text(n=700, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.lognormal(size=n).round(6), "b": rng.choice(list("uvwxyz"), n),
                       "c": rng.integers(-50, 50, n), "label": rng.choice(["p", "q.", "r"], n)})
    df.loc[rng.random(n) < 0.1, "a"] = np.nan   # missing numbers: filled by the mean
    df.loc[rng.random(n) < 0.1, "b"] = np.nan   # missing categories: all zeros
    df.loc[:60, "b"] = df.loc[:60, "b"].replace("z", "y")  # "z" first seen in a later file
    return df.to_csv(index=False, header=False, na_rep="?")


# cuts: a file inside one chunk, one on a chunk edge, one of a single row, one spanning
# several chunks, files sharing a chunk three at a time
CUTS = [0, 10, 64, 65, 300, 310, 320, 700]


def test_csv_files_equal_their_concatenation(tmp_path, scheduler):
    text = csv_text()
    write(tmp_path / "whole.csv", text)
    convert(tmp_path / "whole.csv", tmp_path / "whole.zarr", rows_per_chunk=R)
    split(text.splitlines(keepends=True), CUTS, tmp_path / "parts", "part", [".csv", ".csv.gz"])
    write(tmp_path / "parts" / "_SUCCESS", "")  # skipped, as pyarrow and Spark do
    s = convert(tmp_path / "parts", tmp_path / "dir.zarr", rows_per_chunk=R)
    assert s["shape"] == [700, 8] and s["source"] == str(tmp_path / "parts")
    assert_same(tmp_path / "whole.zarr", tmp_path / "dir.zarr")
    if scheduler is not None:  # the tasks ran on the workers, not on the client
        with distributed.get_task_stream(scheduler) as stream:
            convert(str(tmp_path / "parts" / "part*"), tmp_path / "glob.zarr", rows_per_chunk=R)
        assert sum(str(t["key"]).startswith("rfstream-encode") for t in stream.data) == len(CUTS) - 1
        assert_same(tmp_path / "whole.zarr", tmp_path / "glob.zarr")


def test_like_across_files(tmp_path, scheduler):
    """A test set of several files encoded like a training set: unseen values counted."""
    convert(write(tmp_path / "train.csv", csv_text(300, seed=1)), tmp_path / "tr.zarr", rows_per_chunk=R)
    text = csv_text(700, seed=2).replace(",u,", ",new,").replace(",r\n", ",s\n")
    write(tmp_path / "whole.csv", text)
    whole = convert(tmp_path / "whole.csv", tmp_path / "whole.zarr", rows_per_chunk=R, like=tmp_path / "tr.zarr")
    split(text.splitlines(keepends=True), CUTS, tmp_path / "parts", "t", [".csv.gz", ".csv"])
    parts = convert(tmp_path / "parts", tmp_path / "parts.zarr", rows_per_chunk=R, like=tmp_path / "tr.zarr")
    assert parts["n_unseen_categories"] == whole["n_unseen_categories"] > 0
    assert parts["n_unseen_labels"] == whole["n_unseen_labels"] > 0
    assert_same(tmp_path / "whole.zarr", tmp_path / "parts.zarr")


def test_libsvm_files_equal_their_concatenation(tmp_path, scheduler):
    rng = np.random.default_rng(3)
    lines = []
    for i in range(700):
        keys = sorted(rng.choice(np.arange(1, 30), size=rng.integers(1, 6), replace=False))
        keys = [*keys, 42] if i == 500 else keys  # the largest index in one late file only
        pairs = " ".join(f"{k}:{rng.normal():.5g}" for k in keys)
        lines.append(f"{rng.choice(['-1', '1.0', '+1'])} {pairs}\n")
    write(tmp_path / "whole.svm", "".join(lines))
    convert(tmp_path / "whole.svm", tmp_path / "whole.zarr", rows_per_chunk=R)
    split(lines, CUTS, tmp_path / "parts", "p", [".svm", ".svm.gz", ".svm.bz2"])
    s = convert(str(tmp_path / "parts" / "p*.svm*"), tmp_path / "parts.zarr", rows_per_chunk=R)
    assert s["shape"] == [700, 42] and s["classes"] == ["-1", "1"]
    assert_same(tmp_path / "whole.zarr", tmp_path / "parts.zarr")


def test_parquet_files_and_row_groups_equal_their_concatenation(tmp_path, scheduler):
    df = pd.read_csv(write(tmp_path / "whole.csv", csv_text()), header=None, na_values=["?"])
    df.columns = [f"c{j}" for j in range(df.shape[1])]
    df.to_parquet(tmp_path / "whole.parquet", index=False)
    convert(tmp_path / "whole.parquet", tmp_path / "whole.zarr", rows_per_chunk=R)
    (tmp_path / "pq").mkdir()
    for k, (a, b) in enumerate(pairwise(CUTS)):  # several row groups per file
        df.iloc[a:b].to_parquet(tmp_path / "pq" / f"{k:02d}.parquet", index=False, row_group_size=37)
    convert(tmp_path / "pq", tmp_path / "pq.zarr", rows_per_chunk=R)
    assert_same(tmp_path / "whole.zarr", tmp_path / "pq.zarr")
    # encoded like a training set: pass 1 reads only the footers
    convert(tmp_path / "whole.parquet", tmp_path / "whole_like.zarr", rows_per_chunk=R, like=tmp_path / "pq.zarr")
    convert(tmp_path / "pq", tmp_path / "pq_like.zarr", rows_per_chunk=R, like=tmp_path / "pq.zarr")
    assert_same(tmp_path / "whole_like.zarr", tmp_path / "pq_like.zarr")


def test_files_at_a_url(tmp_path):
    """Files on a store (memory://, read in this process by dask's threads): no local path."""
    import fsspec

    fs = fsspec.filesystem("memory")
    lines = csv_text().splitlines(keepends=True)
    for k, (a, b) in enumerate(pairwise(CUTS)):
        fs.pipe(f"/split/part{k}.csv", "".join(lines[a:b]).encode())
    write(tmp_path / "whole.csv", "".join(lines))
    convert(tmp_path / "whole.csv", tmp_path / "whole.zarr", rows_per_chunk=R)
    with dask.config.set(scheduler="threads"):
        s = convert("memory://split/part*.csv", tmp_path / "url.zarr", rows_per_chunk=R)
    assert s["source"] == "memory://split/part*.csv"
    assert_same(tmp_path / "whole.zarr", tmp_path / "url.zarr")
    fs.rm("/split", recursive=True)


def test_source_files(tmp_path):
    for name in ["b.csv", "a.csv", ".hidden.csv", "_SUCCESS", "sub/c.csv", "_tmp/d.csv"]:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        write(tmp_path / name, "1,2\n")
    assert [f.name for f in source_files(tmp_path)] == ["a.csv", "b.csv", "c.csv"]
    assert [f.name for f in source_files(str(tmp_path / "*.csv"))] == ["a.csv", "b.csv"]
    assert [f.path for f in source_files(tmp_path / "a.csv")] == [str(tmp_path / "a.csv")]
    with pytest.raises(FileNotFoundError, match=r"source file .*nope\.csv does not exist"):
        source_files(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match=r"\*\.tsv names no files"):
        source_files(str(tmp_path / "*.tsv"))


def test_files_of_one_format_and_shape(tmp_path):
    (tmp_path / "mixed").mkdir()
    write(tmp_path / "mixed" / "a.csv", "1,2,x\n")
    write(tmp_path / "mixed" / "b.svm", "1 1:2\n")
    with pytest.raises(ValueError, match="a.csv is csv but b.svm is libsvm; .* one format"):
        convert(tmp_path / "mixed", tmp_path / "m.zarr")
    (tmp_path / "ragged").mkdir()
    write(tmp_path / "ragged" / "a.csv", "1,2,x\n")
    write(tmp_path / "ragged" / "b.csv", "1,2,3,x\n")
    with dask.config.set(scheduler="threads"), \
            pytest.raises(ValueError, match=r"b\.csv has 4 fields per row but .*a\.csv has 3"):
        convert(tmp_path / "ragged", tmp_path / "r.zarr")
    assert not (tmp_path / "r.zarr").exists()


def test_failure_in_a_pass_2_task_leaves_nothing(tmp_path, scheduler):
    convert(write(tmp_path / "tr.csv", "1,a,x\n2,b,y\n"), tmp_path / "tr.zarr")
    (tmp_path / "te").mkdir()
    write(tmp_path / "te" / "0.csv", "1,a,x\n" * 100)
    write(tmp_path / "te" / "1.csv", "1,a,x\n" * 50 + "text,a,x\n")  # not a number, in pass 2
    with pytest.raises(ValueError, match=r"1\.csv: .*holds text"):
        convert(tmp_path / "te", tmp_path / "te.zarr", like=tmp_path / "tr.zarr", rows_per_chunk=R)
    assert siblings(tmp_path / "te.zarr") == []


def test_region_writer_writes_whole_chunks_and_keeps_shared_ones():
    """Rows [10, 150) with chunks of 64: chunk 1 is the part's own, chunks 0 and 2 shared."""
    X, y = np.zeros((200, 2), np.float32), np.zeros(200, np.int32)
    writes = []

    class Spy:
        def __init__(self, a):
            self.a = a

        def __setitem__(self, key, value):
            writes.append((key.start, key.stop))
            self.a[key] = value

    job = Job("src", 0, 10, 150, frozenset({0, 2}))
    region = RegionWriter(Target(Spy(X), Spy(y)), job, 64)
    rows = np.arange(10, 150, dtype=np.float32)
    for a in range(0, 140, 50):  # blocks of 50 rows, not aligned with the chunks
        region.add(np.c_[rows[a:a + 50], rows[a:a + 50]], rows[a:a + 50].astype(np.int32))
    pieces = region.close()
    assert writes == [(64, 128), (64, 128)]  # X then y of chunk 1, once each
    assert X[64:128, 0].tolist() == list(range(64, 128))
    assert sorted(pieces) == [0, 2]
    assert pieces[0][0][:, 0].tolist() == list(range(10, 64))
    assert pieces[2][1].tolist() == list(range(128, 150))
    with pytest.raises(ValueError, match="pass 2 read more rows than the 140 of pass 1"):
        region.add(np.ones((1, 2), np.float32), np.ones(1, np.int32))


def test_exact_sum_is_split_invariant():
    """The fill value is the correctly rounded mean, whatever the files and chunks."""
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.lognormal(0, 8, 5000), -rng.lognormal(0, 8, 5000), [1e300, -1e300, 5e-324]])
    rng.shuffle(v)
    exact = float(sum(Fraction(x) for x in v.tolist()) / len(v))
    means = set()
    for cuts in ([0, len(v)], [0, 1, 7, 3000, len(v)], list(range(0, len(v), 997)) + [len(v)]):
        parts = []
        for a, b in pairwise(cuts):
            s = ExactSum()
            s.add(v[a:b])
            parts.append(s)
        total = parts[0]
        for p in parts[1:]:
            total = total.merge(p)
        means.add(total.mean(len(v)))
    assert means == {exact}
    assert math.fsum(v) / len(v) == pytest.approx(exact)
    assert ExactSum().mean(0) == 0.0
