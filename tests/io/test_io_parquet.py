"""Parquet sources (rfstream.io.parquet): CSV's encoding rules on Parquet's types, read by
row groups; the same Adult data as CSV and as Parquet give the same dataset and model."""
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.io import load, siblings
from conftest import require_datasets

from rfstream.cluster import connect
from rfstream.datasets import source_paths
from rfstream.io import convert
from rfstream.pipeline import evaluate_dataset, fit_dataset


# ================================================================= real data
def adult_frame(path, skiprows=0):
    """An Adult file as pandas reads it: '?' is null, columns c0..c14 as the CSV's."""
    df = pd.read_csv(path, header=None, skipinitialspace=True, na_values=["?"], skiprows=skiprows)
    df.columns = [f"c{j}" for j in range(df.shape[1])]
    return df


def test_adult_parquet_equals_csv(tmp_path):
    train, test = source_paths("adult", require_datasets())
    convert(train, tmp_path / "csv_tr.zarr", positive_class=">50K")
    convert(test, tmp_path / "csv_te.zarr", like=tmp_path / "csv_tr.zarr")
    adult_frame(train).to_parquet(tmp_path / "adult.parquet", index=False, row_group_size=10000)
    adult_frame(test, skiprows=1).to_parquet(tmp_path / "adult_test.parquet", index=False)
    s = convert(tmp_path / "adult.parquet", tmp_path / "pq_tr.zarr", positive_class=">50K",
                rows_per_chunk=8192)  # row groups and chunks of other sizes than the CSV's
    convert(tmp_path / "adult_test.parquet", tmp_path / "pq_te.zarr", like=tmp_path / "pq_tr.zarr")
    assert s["format"] == "parquet" and s["label_column"] == "c14" and s["shape"] == [32561, 105]
    for a, b in [("csv_tr", "pq_tr"), ("csv_te", "pq_te")]:
        Xa, ya, aa = load(tmp_path / f"{a}.zarr")
        Xb, yb, ab = load(tmp_path / f"{b}.zarr")
        np.testing.assert_array_equal(Xa, Xb)
        np.testing.assert_array_equal(ya, yb)
        for key in ("feature_names", "classes", "categorical", "fill_values", "class_counts",
                    "n_unseen_categories", "n_unseen_labels"):
            assert aa[key] == ab[key], key
    errors = []
    with connect("threads"):
        for kind in ("csv", "pq"):
            model, meta = fit_dataset(tmp_path / f"{kind}_tr.zarr", n_components=300, alpha=1.0,
                                      random_state=0)
            errors.append(evaluate_dataset(model, meta, tmp_path / f"{kind}_te.zarr")["value"])
    # the same data and seed give the same model; we measured 14.66% (D=300, seed 0), the
    # bound 16% is ~5 binomial std above it (sqrt(.147 * .853 / 16281) = 0.28%)
    assert errors[0] == errors[1] < 0.16


# ================================================================= types and rules
def frame():
    return pd.DataFrame({
        "n": pd.array([1, None, 3, 4], dtype="Int64"),            # null -> mean 8/3
        "f": [0.5, np.nan, 1.5, 2.5],                             # NaN -> mean 1.5
        "flag": pd.array([True, False, None, True], dtype="boolean"),  # 1/0, null -> 2/3
        "s": ["b", None, "a", "b"],                                # text: one-hot, null -> zeros
        "num_text": ["1", "2.5", None, " 4"],                      # text of numbers: numeric
        "cat": pd.Categorical(["x", "y", "x", None]),              # dictionary: one-hot
        "label": ["yes", "no.", "yes", "no"],
    })


def test_types_follow_csv_rules(tmp_path):
    frame().to_parquet(tmp_path / "t.parquet", index=False)
    s = convert(tmp_path / "t.parquet", tmp_path / "t.zarr")
    X, y, attrs = load(tmp_path / "t.zarr")
    assert attrs["feature_names"] == ["n", "f", "flag", "s=a", "s=b", "num_text", "cat=x", "cat=y"]
    assert attrs["categorical"] == {"s": ["a", "b"], "cat": ["x", "y"]}
    assert attrs["classes"] == ["no", "yes"] and y.tolist() == [1, 0, 1, 0]  # "no." == "no"
    expected = [[1, 0.5, 1, 0, 1, 1.0, 1, 0],
                [8 / 3, 1.5, 0, 0, 0, 2.5, 0, 1],
                [3, 1.5, 2 / 3, 1, 0, 2.5, 1, 0],
                [4, 2.5, 1, 0, 1, 4.0, 0, 0]]
    np.testing.assert_array_equal(X, np.float32(expected))
    assert attrs["fill_values"]["num_text"] == 2.5 and s["n_rows"] == 4


def test_label_column_by_name_index_or_none(tmp_path):
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "flag": [True, False, True], "s": ["u", "v", "u"],
                  "label": ["x", "y", "x"]}).to_parquet(tmp_path / "t.parquet", index=False)
    assert convert(tmp_path / "t.parquet", tmp_path / "1.zarr", label_column="s")["classes"] == ["u", "v"]
    assert convert(tmp_path / "t.parquet", tmp_path / "2.zarr", label_column=0)["label_column"] == "a"
    assert convert(tmp_path / "t.parquet", tmp_path / "3.zarr", label_column="flag",
                   task="classification")["classes"] == ["0", "1"]  # booleans are 0 and 1
    assert convert(tmp_path / "t.parquet", tmp_path / "4.zarr", label_column="first")["classes"] == ["1", "2", "3"]
    s = convert(tmp_path / "t.parquet", tmp_path / "5.zarr", label_column=None)
    assert s["task"] is None and s["feature_names"][-2:] == ["label=x", "label=y"]
    frame().to_parquet(tmp_path / "nulls.parquet", index=False)
    with pytest.raises(ValueError, match="1 rows have no value in label column 'cat'"):
        convert(tmp_path / "nulls.parquet", tmp_path / "6.zarr", label_column="cat")


def test_like_unseen_categories_and_labels(tmp_path):
    frame().to_parquet(tmp_path / "tr.parquet", index=False)
    convert(tmp_path / "tr.parquet", tmp_path / "tr.zarr")
    test = frame().assign(s=["c", "a", "b", None], label=["yes", "maybe", "no", "no"],
                          extra=[1, 2, 3, 4])  # an extra column is ignored
    test[["extra", *frame().columns]].to_parquet(tmp_path / "te.parquet", index=False)
    s = convert(tmp_path / "te.parquet", tmp_path / "te.zarr", like=tmp_path / "tr.zarr")
    X, y, attrs = load(tmp_path / "te.zarr")
    assert attrs["feature_names"] == load(tmp_path / "tr.zarr")[2]["feature_names"]
    assert y.tolist() == [1, -1, 0, 0] and s["n_unseen_labels"] == 1
    assert s["n_unseen_categories"] == 1 and X[0, 3:5].tolist() == [0, 0]  # "c" -> zeros
    np.testing.assert_allclose(X[:, 0], [1, 8 / 3, 3, 4], rtol=1e-6)  # train's fill value
    frame().drop(columns="f").to_parquet(tmp_path / "narrow.parquet", index=False)
    with pytest.raises(ValueError, match=r"narrow\.parquet has no column 'f'; its columns are"):
        convert(tmp_path / "narrow.parquet", tmp_path / "n.zarr", like=tmp_path / "tr.zarr")


def test_row_groups_and_batches(tmp_path):
    """Many row groups read in batches of rows_per_chunk: the rows of one read."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=1000), "b": rng.choice(["p", "q"], 1000),
                       "y": rng.normal(size=1000)})
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "m.parquet",
                   row_group_size=97)
    assert pq.ParquetFile(tmp_path / "m.parquet").metadata.num_row_groups == 11
    s = convert(tmp_path / "m.parquet", tmp_path / "m.zarr", rows_per_chunk=64)
    X, y, _ = load(tmp_path / "m.zarr")
    assert s["task"] == "regression" and X.shape == (1000, 3)
    np.testing.assert_array_equal(X[:, 0], df["a"].to_numpy(np.float32))
    np.testing.assert_array_equal(y, df["y"].to_numpy(np.float32))


def test_remote_file_and_magic_bytes(tmp_path):
    """A URL is read through its filesystem (no local path); a .bin file by its magic bytes."""
    import fsspec

    fs = fsspec.filesystem("memory")
    with fs.open("/pq/data.bin", "wb") as f:
        frame().to_parquet(f, index=False)
    s = convert("memory://pq/data.bin", tmp_path / "m.zarr")
    assert s["format"] == "parquet" and s["source"] == "memory://pq/data.bin"
    assert s["shape"] == [4, 8]
    fs.rm("/pq", recursive=True)


# ================================================================= bad input
def test_missing_label_column_is_one_line(tmp_path):
    frame().to_parquet(tmp_path / "t.parquet", index=False)
    with pytest.raises(ValueError) as err:
        convert(tmp_path / "t.parquet", tmp_path / "x.zarr", label_column="income")
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "t.parquet") in message
    assert "no column 'income'" in message and "'n', 'f', 'flag', 's'" in message
    assert siblings(tmp_path / "x.zarr") == []


def test_corrupt_file_is_one_line(tmp_path):
    frame().to_parquet(tmp_path / "good.parquet", index=False)
    data = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])  # lost its footer
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    for name in ("cut.parquet", "junk.parquet"):
        with pytest.raises(ValueError, match=f"{name}: cannot read as Parquet") as err:
            convert(tmp_path / name, tmp_path / "x.zarr")
        assert "\n" not in str(err.value)
    assert siblings(tmp_path / "x.zarr") == []


def test_unsupported_type_names_the_column(tmp_path):
    frame().assign(when=pd.date_range("2020-01-01", periods=4)).to_parquet(tmp_path / "d.parquet")
    with pytest.raises(ValueError, match=r"column 'when' has type timestamp.*cast or drop it"):
        convert(tmp_path / "d.parquet", tmp_path / "d.zarr")
