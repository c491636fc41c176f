"""Converters (rfstream.io.convert and the csv / libsvm / npy readers): real and synthetic
sources into Zarr datasets, label and task rules, nothing half-written on failure.
The Zarr dataset layout itself (write / open / info) is tested in test_io_dataset.py."""

import bz2
import gzip

import numpy as np
import pandas as pd
import pytest
from helpers.io import load, siblings, write
from conftest import require_datasets

from rfstream.datasets import source_paths
from rfstream.io import as_location, convert, dataset_info, open_dataset, write_dataset
from rfstream.io.convert import FORMATS, format_of
from rfstream.io.dataset import ChunkWriter

need_datasets = require_datasets  # skip when missing; under CI=true fail instead

# ================================================================= real data
def counts(y, attrs) -> dict:
    return dict(zip(attrs["classes"], np.bincount(y[y >= 0], minlength=len(attrs["classes"]))))


def test_kdd_train(kdd_train_zarr):
    X, y = open_dataset(kdd_train_zarr)
    attrs = dataset_info(kdd_train_zarr)["attrs"]
    assert X.shape[0] == 494021 and attrs["n_rows"] == 494021
    assert X.dtype == np.float32 and y.dtype == np.int32
    assert X.chunks[1] == (X.shape[1],)  # chunked by rows only
    assert attrs["classes"] == ["rest", "normal"]
    assert counts(y.compute(), attrs) == {"rest": 396743, "normal": 97278}
    assert attrs["class_counts"] == {"rest": 396743, "normal": 97278}
    # columns 1-3 (protocol, service, flag) are one-hot; 38 numeric columns
    assert sorted(attrs["categorical"]) == ["c1", "c2", "c3"]
    assert attrs["categorical"]["c1"] == ["icmp", "tcp", "udp"]
    assert "c1=tcp" in attrs["feature_names"]
    d = 38 + sum(len(v) for v in attrs["categorical"].values())
    assert X.shape[1] == d == len(attrs["feature_names"])
    first = X[:1].compute()[0]  # 0,tcp,http,SF,181,5450,...
    names = attrs["feature_names"]
    for name, value in [("c0", 0), ("c1=tcp", 1), ("c1=udp", 0), ("c2=http", 1), ("c3=SF", 1),
                        ("c4", 181), ("c5", 5450)]:
        assert first[names.index(name)] == value, name


def test_kdd_test_like_train(kdd_train_zarr, kdd_test_zarr):
    Xtr, _ = open_dataset(kdd_train_zarr)
    X, y = open_dataset(kdd_test_zarr)
    attrs = dataset_info(kdd_test_zarr)["attrs"]
    assert X.shape == (311029, Xtr.shape[1])
    assert counts(y.compute(), attrs) == {"rest": 250436, "normal": 60593}
    assert attrs["n_unseen_labels"] == 0  # binary: every attack is "rest"
    assert attrs["feature_names"] == dataset_info(kdd_train_zarr)["attrs"]["feature_names"]
    # service "icmp" occurs twice in the test set, never in training: all-zero block
    assert attrs["n_unseen_categories"] == 2
    service = [k for k, n in enumerate(attrs["feature_names"]) if n.startswith("c2=")]
    assert int((X[:, service].sum(axis=1) == 0).sum().compute()) == 2


def test_kdd_multiclass_unseen_labels(tmp_path):
    train_src, test_src = source_paths("kddcup99", need_datasets())
    train = convert(train_src, tmp_path / "tr.zarr")
    assert len(train["classes"]) == 23 and train["class_counts"]["smurf"] == 280790
    test = convert(test_src, tmp_path / "te.zarr", like=tmp_path / "tr.zarr")
    _, y = open_dataset(tmp_path / "te.zarr")
    y = y.compute()
    # 17 attack types of the test set never occur in training: 18,729 rows -> y = -1
    assert test["n_unseen_labels"] == int((y == -1).sum()) == 18729
    assert test["class_counts"]["normal"] == 60593 and test["class_counts"]["spy"] == 0
    assert test["shape"] == [311029, train["shape"][1]]


def test_adult(adult_train_zarr, adult_test_zarr):
    Xtr, ytr, atr = load(adult_train_zarr)
    Xte, yte, ate = load(adult_test_zarr)
    assert Xtr.shape[0] == 32561 and Xte.shape[0] == 16281
    assert Xtr.shape[1] == Xte.shape[1] == len(atr["feature_names"])
    assert counts(ytr, atr) == {"rest": 24720, ">50K": 7841}
    assert counts(yte, ate) == {"rest": 12435, ">50K": 3846}  # ">50K." == ">50K"
    assert ate["positive_class"] == ">50K" and ate["n_unseen_labels"] == 0
    # oracle: pandas reading the whole (small) file
    df = pd.read_csv(source_paths("adult", need_datasets())[0], header=None,
                     skipinitialspace=True, na_values=["?"])
    names = atr["feature_names"]
    np.testing.assert_allclose(Xtr[:, names.index("c0")], df[0], rtol=1e-6)
    block = [k for k, n in enumerate(names) if n.startswith("c1=")]
    assert np.array_equal(Xtr[:, block].sum(axis=1) == 0, df[1].isna())  # '?' -> zeros
    assert Xtr[:, names.index("c1=Private")].sum() == (df[1] == "Private").sum()
    assert atr["fill_values"]["c0"] == pytest.approx(df[0].mean())


def test_ijcnn1_libsvm_bz2(tmp_path):
    train_src, test_src = source_paths("ijcnn1", need_datasets())
    tr = convert(train_src, tmp_path / "tr.zarr")
    te = convert(test_src, tmp_path / "te.zarr", like=tmp_path / "tr.zarr")
    assert tr["shape"] == [49990, 22] and te["shape"] == [91701, 22]
    assert tr["classes"] == te["classes"] == ["-1", "1"]  # "-1.0" (train) == "-1" (test)
    assert tr["class_counts"] == {"-1": 45137, "1": 4853}
    assert te["class_counts"] == {"-1": 82989, "1": 8712}


def test_cpusmall_crlf_regression(tmp_path):
    summary = convert(source_paths("cpusmall", need_datasets())[0], tmp_path / "c.zarr")
    X, y, attrs = load(tmp_path / "c.zarr")
    assert X.shape == (8192, 12) and attrs["task"] == "regression" and y.dtype == np.float32
    assert "classes" not in attrs and summary["format"] == "libsvm"
    assert y.mean(dtype=np.float64) == pytest.approx(83.9689, abs=1e-4)
    assert y.min() == 0 and y.max() == 99
    np.testing.assert_allclose(X[0], [6, 2, 1036, 103, 114, 1.0, 1.0, 172076, 355965, 2.0,
                                      6527, 1851864])


def test_magic_gamma(tmp_path):
    s = convert(source_paths("magic_gamma", need_datasets())[0], tmp_path / "m.zarr")
    assert s["shape"] == [19020, 10] and s["class_counts"] == {"g": 12332, "h": 6688}


def test_letter_label_first(tmp_path):
    s = convert(source_paths("letter", need_datasets())[0], tmp_path / "l.zarr",
                label_column="first")
    assert s["shape"] == [20000, 16] and len(s["classes"]) == 26
    assert s["class_counts"]["A"] == 789 and s["class_counts"]["Z"] == 734


def test_covtype_header_gz(tmp_path):
    s = convert(source_paths("covtype_sample", need_datasets())[0], tmp_path / "c.zarr")
    assert s["header"] and s["label_column"] == "Cover_Type"
    assert s["shape"] == [15000, 54] and s["feature_names"][0] == "Elevation"
    assert s["class_counts"] == {"1": 5487, "2": 7292, "3": 931, "4": 67, "5": 238,
                                 "6": 466, "7": 519}


# ================================================================= synthetic CSV
CSV = "age,color,score,label\n31,red,1.5,yes\n40,blue,?,no\n?,green,2.5,yes.\n25, ?,3.5,no\n"


def test_csv_header_missing_values(tmp_path):
    s = convert(write(tmp_path / "a.csv", CSV), tmp_path / "a.zarr", rows_per_chunk=3)
    X, y, attrs = load(tmp_path / "a.zarr")
    assert attrs["header"] and attrs["columns"] == ["age", "color", "score"]
    assert attrs["feature_names"] == ["age", "color=blue", "color=green", "color=red", "score"]
    assert attrs["classes"] == ["no", "yes"] and y.tolist() == [1, 0, 1, 0]  # "yes." == "yes"
    assert attrs["fill_values"] == {"age": 32.0, "score": 2.5}
    np.testing.assert_array_equal(X, [[31, 0, 0, 1, 1.5], [40, 1, 0, 0, 2.5],
                                      [32, 0, 1, 0, 2.5], [25, 0, 0, 0, 3.5]])
    assert s["n_rows"] == 4 and X.dtype == np.float32


def test_csv_no_header_comments_blank_lines(tmp_path):
    src = write(tmp_path / "b.data", "# comment\n| another\n\n1, 2, a\n3, 4, b\n\n5, 6, a\n\n")
    s = convert(src, tmp_path / "b.zarr")
    X, y, attrs = load(tmp_path / "b.zarr")
    assert not attrs["header"] and attrs["feature_names"] == ["c0", "c1"]
    assert X.tolist() == [[1, 2], [3, 4], [5, 6]] and y.tolist() == [0, 1, 0]
    assert s["label_column"] == 2


@pytest.mark.parametrize("header, n_rows", [(True, 2), (False, 3)])
def test_csv_forced_header(tmp_path, header, n_rows):
    src = write(tmp_path / "h.csv", "1,2,0\n3,4,1\n5,6,0\n")
    assert convert(src, tmp_path / "h.zarr", header=header)["n_rows"] == n_rows


def test_csv_separators(tmp_path):
    for name, text in [("t.tsv", "1\t2\tx\n3\t4\ty\n"), ("w.txt", "1 2  x\n3   4 y\n")]:
        s = convert(write(tmp_path / name, text), tmp_path / (name + ".zarr"))
        assert load(tmp_path / (name + ".zarr"))[0].tolist() == [[1, 2], [3, 4]], s


def test_label_column_choices(tmp_path):
    src = write(tmp_path / "c.csv", "a,b,c\n1,x,10\n2,y,20\n")
    assert convert(src, tmp_path / "1.zarr", label_column="b")["classes"] == ["x", "y"]
    assert convert(src, tmp_path / "2.zarr", label_column=1)["classes"] == ["x", "y"]
    assert convert(src, tmp_path / "3.zarr", label_column=-2)["label_column"] == "b"
    assert convert(src, tmp_path / "4.zarr", label_column="first")["classes"] == ["1", "2"]
    s = convert(src, tmp_path / "5.zarr", label_column=None)
    assert s["task"] is None and open_dataset(tmp_path / "5.zarr")[1] is None
    with pytest.raises(ValueError, match=r"label_column='z' is not a column of .*c\.csv.*'a'"):
        convert(src, tmp_path / "6.zarr", label_column="z")
    with pytest.raises(ValueError, match=r"label_column=3 is out of range .* 3 columns"):
        convert(src, tmp_path / "7.zarr", label_column=3)


def test_task_rules(tmp_path):
    ints = write(tmp_path / "i.csv", "".join(f"{k},{k % 3}\n" for k in range(50)))
    floats = write(tmp_path / "f.csv", "".join(f"{k},{k / 7}\n" for k in range(50)))
    many = write(tmp_path / "m.csv", "".join(f"{k},{k}\n" for k in range(50)))
    assert convert(ints, tmp_path / "i.zarr")["classes"] == ["0", "1", "2"]
    assert convert(floats, tmp_path / "f.zarr")["task"] == "regression"
    assert convert(many, tmp_path / "m.zarr")["task"] == "regression"  # 50 > 32 values
    with pytest.warns(UserWarning, match="task='classification' makes a class of each of the 50 distinct "
                      "integer values of label column 1; if the label is a quantity, use task='regression'"):
        s = convert(many, tmp_path / "m2.zarr", task="classification")
    assert s["classes"][:3] == ["0", "1", "2"] and len(s["classes"]) == 50  # numeric order
    assert convert(ints, tmp_path / "i2.zarr", task="regression")["task"] == "regression"
    with pytest.raises(ValueError, match="task='regression' needs numeric labels.*'red'"):
        convert(write(tmp_path / "s.csv", "1,red\n2,blue\n"), tmp_path / "s.zarr",
                task="regression")
    with pytest.raises(ValueError, match="task='multi' is not valid"):
        convert(ints, tmp_path / "x.zarr", task="multi")


def test_positive_class(tmp_path):
    src = write(tmp_path / "p.csv", "1,normal.\n2,smurf.\n3,normal.\n")
    s = convert(src, tmp_path / "p.zarr", positive_class="normal.")
    assert s["classes"] == ["rest", "normal"] and s["class_counts"] == {"rest": 1, "normal": 2}
    with pytest.raises(ValueError, match=r"positive_class='attack' never occurs.*'normal'"):
        convert(src, tmp_path / "q.zarr", positive_class="attack")
    assert not (tmp_path / "q.zarr").exists()


def test_like_unseen_category_and_label(tmp_path):
    convert(write(tmp_path / "tr.csv", "1,a,x\n2,b,y\n3,a,x\n"), tmp_path / "tr.zarr")
    te = write(tmp_path / "te.csv", "?,c,x\n5,b,z\n6,?,y.\n")
    s = convert(te, tmp_path / "te.zarr", like=tmp_path / "tr.zarr")
    X, y, attrs = load(tmp_path / "te.zarr")
    assert attrs["feature_names"] == ["c0", "c1=a", "c1=b"]
    np.testing.assert_array_equal(X, [[2, 0, 0], [5, 0, 1], [6, 0, 0]])  # ? -> train mean 2
    assert y.tolist() == [0, -1, 1]
    assert s["n_unseen_categories"] == 1 and s["n_unseen_labels"] == 1
    with pytest.raises(ValueError, match=r"has 4 feature columns \(5 fields per row\) .* has 2"):
        convert(write(tmp_path / "w.csv", "1,a,2,3,x\n"), tmp_path / "w.zarr",
                like=tmp_path / "tr.zarr")
    with pytest.raises(ValueError, match="contradicts like="):
        convert(te, tmp_path / "r.zarr", like=tmp_path / "tr.zarr", task="regression")
    with pytest.raises(ValueError, match="holds text"):
        convert(write(tmp_path / "n.csv", "abc,a,x\n"), tmp_path / "n.zarr",
                like=tmp_path / "tr.zarr")


def test_chunk_size_invariance(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=100).round(3), "b": rng.choice(["u", "v", "w"], 100),
                       "y": rng.integers(0, 3, 100)})
    df.loc[::7, "a"] = np.nan
    df.to_csv(tmp_path / "r.csv", index=False, na_rep="?")
    convert(tmp_path / "r.csv", tmp_path / "1.zarr", rows_per_chunk=7)
    convert(tmp_path / "r.csv", tmp_path / "2.zarr", rows_per_chunk=1000)
    X1, y1, _ = load(tmp_path / "1.zarr")
    X2, y2, _ = load(tmp_path / "2.zarr")
    assert open_dataset(tmp_path / "1.zarr")[0].chunks[0][:2] == (7, 7)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(X1[::7, 0], df["a"].mean(), rtol=1e-6)


def test_gzip_csv(tmp_path):
    with gzip.open(tmp_path / "g.csv.gz", "wt") as f:
        f.write("1,2,a\n3,4,b\n")
    assert convert(tmp_path / "g.csv.gz", tmp_path / "g.zarr")["shape"] == [2, 2]


# ================================================================= LIBSVM / npy / npz
SVM = "1 1:0.5 3:2\r\n-1 2:1.5 qid:3\r\n1.0 3:-1 # comment\r\n"


def test_libsvm_plain_gz_bz2(tmp_path):
    expected = [[0.5, 0, 2], [0, 1.5, 0], [0, 0, -1]]
    sources = [write(tmp_path / "a.svm", SVM), write(tmp_path / "a.txt", SVM)]  # by content
    with gzip.open(tmp_path / "a.svm.gz", "wt", newline="") as f:
        f.write(SVM)
    with bz2.open(tmp_path / "b.libsvm.bz2", "wt") as f:
        f.write(SVM)
    for src in sources + [tmp_path / "a.svm.gz", tmp_path / "b.libsvm.bz2"]:
        dst = tmp_path / (src.name + ".zarr")
        assert convert(src, dst)["classes"] == ["-1", "1"]
        X, y, _ = load(dst)
        assert X.tolist() == expected and y.tolist() == [1, 0, 1]


def test_libsvm_zero_based_and_like(tmp_path):
    s = convert(write(tmp_path / "z.svm", "0 0:1 2:3\n1 1:2\n"), tmp_path / "z.zarr")
    assert s["index_base"] == 0 and s["feature_names"] == ["f0", "f1", "f2"]
    te = write(tmp_path / "t.svm", "1 1:4\n2 2:5\n")
    s = convert(te, tmp_path / "t.zarr", like=tmp_path / "z.zarr")
    X, y, _ = load(tmp_path / "t.zarr")
    assert X.tolist() == [[0, 4, 0], [0, 0, 5]] and y.tolist() == [1, -1]
    with pytest.raises(ValueError, match="feature index 7 is outside"):
        convert(write(tmp_path / "o.svm", "1 7:1\n"), tmp_path / "o.zarr",
                like=tmp_path / "z.zarr")
    with pytest.raises(ValueError, match=r"line 2: cannot read 'x:1' as index:value"):
        convert(write(tmp_path / "bad.svm", "1 1:1\n1 x:1\n"), tmp_path / "bad.zarr")


def test_npy_and_npz(tmp_path):
    X = np.arange(20, dtype=np.float64).reshape(10, 2)
    np.save(tmp_path / "x.npy", X)
    s = convert(tmp_path / "x.npy", tmp_path / "x.zarr", rows_per_chunk=3)
    assert s["task"] is None and load(tmp_path / "x.zarr")[0].tolist() == X.tolist()
    np.savez(tmp_path / "xy.npz", X=X, y=np.arange(10) % 2 * 2.0)
    s = convert(tmp_path / "xy.npz", tmp_path / "xy.zarr", rows_per_chunk=4)
    Xz, yz, attrs = load(tmp_path / "xy.zarr")
    assert attrs["classes"] == ["0", "2"] and yz.tolist() == [0, 1] * 5
    np.testing.assert_array_equal(Xz, X)
    np.savez(tmp_path / "bad.npz", A=X)
    with pytest.raises(ValueError, match=r"bad\.npz has no member 'X'.*'A'"):
        convert(tmp_path / "bad.npz", tmp_path / "bad.zarr")


# ================================================================= the table of formats
def test_formats_table_is_the_one_source(tmp_path):
    names = [f.name for f in FORMATS]
    suffixes = [s for f in FORMATS for s in f.suffixes]
    assert len(set(names)) == len(names) and len(set(suffixes)) == len(suffixes)
    for f in FORMATS:
        assert (f.reader is None) != (f.planner is None), f"{f.name}: a reader or a planner"
        for s in f.suffixes:  # the suffix alone decides, compressed or not, in any case
            assert s == s.lower() and s.startswith(".")
            for name in (f"x{s}", f"X{s.upper()}.gz", f"x.csv{s}.bz2"):
                assert format_of(as_location(tmp_path / name)) is f, name
    by_name = {f.name: f for f in FORMATS}
    assert FORMATS[-1] is by_name["csv"]  # sniffed last: what no other format claims
    assert format_of(as_location(write(tmp_path / "a.txt", SVM))) is by_name["libsvm"]
    assert format_of(as_location(write(tmp_path / "b.txt", "1,2\n"))) is by_name["csv"]
    pd.DataFrame({"a": [1.0]}).to_parquet(tmp_path / "c.data")
    assert format_of(as_location(tmp_path / "c.data")) is by_name["parquet"]


# ================================================================= nothing half-written
def test_ragged_csv_leaves_nothing(tmp_path):
    src = write(tmp_path / "r.csv", "1,2,a\n3,4,b\n5,6,7,a\n")
    with pytest.raises(ValueError, match=r"r\.csv: cannot read as CSV.*3 fields"):
        convert(src, tmp_path / "r.zarr")
    assert siblings(tmp_path / "r.zarr") == []


def test_failure_in_pass2_leaves_nothing(tmp_path, monkeypatch):
    src = write(tmp_path / "a.csv", "".join(f"{k},{k % 2}\n" for k in range(10)))
    dst = tmp_path / "a.zarr"
    write_dataset(dst, np.ones((2, 2)))  # an old dataset survives a failed overwrite

    def boom(self, X, y):
        if self.rows > 0:  # fail on the second chunk, after something was written
            raise OSError("disk full")
        return original(self, X, y)

    original = ChunkWriter.append
    monkeypatch.setattr(ChunkWriter, "append", boom)
    with pytest.raises(OSError, match="disk full"):
        convert(src, dst, rows_per_chunk=4, overwrite=True)
    assert siblings(dst) == ["a.zarr"] and open_dataset(dst)[0].shape == (2, 2)
    with pytest.raises(OSError):
        convert(src, tmp_path / "b.zarr", rows_per_chunk=4)
    assert siblings(tmp_path / "b.zarr") == []


def test_like_takes_the_training_sets_label_column_header_and_separator(tmp_path):
    train = write(tmp_path / "tr.csv", "y;a;b\n" + "".join(f"{k % 2};{k * 0.5};{k % 7 * 1.5}\n" for k in range(20)))
    convert(train, tmp_path / "tr.zarr", label_column="y", sep=";")
    test = write(tmp_path / "te.csv", "y;a;b\n1;3.5;2.0\n0;1.0;0.5\n")
    s = convert(test, tmp_path / "te.zarr", like=tmp_path / "tr.zarr")
    X, y, attrs = load(tmp_path / "te.zarr")
    assert attrs["label_column"] == "y" and attrs["header"] and attrs["sep"] == ";"
    assert X.tolist() == [[3.5, 2.0], [1.0, 0.5]] and y.tolist() == [1, 0] and s["n_unseen_labels"] == 0
    with pytest.raises(ValueError, match=r"the label column is 2 but like=.*tr\.zarr.* used column 0; "
                                         r"pass label_column=0"):
        convert(test, tmp_path / "te2.zarr", like=tmp_path / "tr.zarr", label_column=2)


def test_classification_of_prices_is_refused_in_one_line(tmp_path):
    src = write(tmp_path / "p.csv", "".join(f"{k},{100 + k * 2.5}\n" for k in range(40)))
    with pytest.raises(ValueError, match=r"p\.csv: task='classification' makes a class of each value, but label "
                                         r"column 1 holds non-integer numbers \(such as 102\.5\); use "
                                         r"task='regression', or bin the target into classes first"):
        convert(src, tmp_path / "p.zarr", task="classification")
