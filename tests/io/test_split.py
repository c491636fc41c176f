"""``rfstream split`` and ``fit --holdout`` (rfstream.io.split, FitJob(holdout=...)): the rows of
rfstream.train_test_split from (seed, row), whatever the chunking; attributes and other arrays
carried; the stratified split's exact class counts; URLs; one-line errors; held-out metrics."""
import json
import re
import uuid

import fsspec
import numpy as np
import pytest
import zarr

from rfstream import io, train_test_split
from rfstream.cluster import set_progress
from rfstream.jobs import FitJob
from helpers.cli import one_error_line, run

N, P, SEED = 1200, 0.25, 3


@pytest.fixture(autouse=True)
def _no_progress():
    yield
    set_progress(False)  # main() switches progress bars on unless --quiet


def _rows(path):
    X, y = io.open_dataset(path)
    return np.asarray(X), (None if y is None else np.asarray(y))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A converted CSV: 3 numbers, a categorical column (one-hot), 3 imbalanced classes; and an
    array ``w`` of row weights (= the row index) and one of another length."""
    work = tmp_path_factory.mktemp("split")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 3))
    colour = rng.choice(["red", "green", "blue"], size=N)
    label = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4, "out", np.where(rng.random(N) < 0.2, "rare", "in"))
    with open(work / "d.csv", "w") as f:
        f.write("a,b,c,colour,label\n")
        f.writelines(f"{r[0]:.6f},{r[1]:.6f},{r[2]:.6f},{c},{lb}\n" for r, c, lb in zip(X, colour, label))
    assert run(["convert", work / "d.csv", work / "d.zarr", "--rows-per-chunk", 256, "--quiet"]) == 0
    group = zarr.open_group(str(work / "d.zarr"), mode="a")
    group.create_array("w", shape=(N,), dtype="float64", chunks=(500,))[:] = np.arange(N)
    group.create_array("meta", shape=(3,), dtype="int32", chunks=(3,))[:] = [1, 2, 3]
    return work / "d.zarr"


def test_split_writes_the_rows_of_train_test_split(data, tmp_path, capsys):
    capsys.readouterr()
    assert run(["split", data, tmp_path / "tr.zarr", tmp_path / "te.zarr", "--test-size", P,
                "--random-state", SEED, "--scheduler", "threads"]) == 0
    summary = json.loads(capsys.readouterr().out)
    X, y = _rows(data)
    X_tr, X_te, y_tr, y_te, w_tr, w_te = train_test_split(X, y, np.arange(N), test_size=P, random_state=SEED)
    for got, want in zip((_rows(tmp_path / "tr.zarr"), _rows(tmp_path / "te.zarr")), ((X_tr, y_tr), (X_te, y_te))):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # the weights travel with their rows; an array of another length is dropped, and said so
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "te.zarr"))["w"][:], w_te)
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "tr.zarr"))["w"][:], w_tr)
    assert summary["train_rows"] == len(y_tr) and summary["test_rows"] == len(y_te)
    assert summary["random_state"] == SEED and summary["test"] == str(tmp_path / "te.zarr")
    assert summary["arrays"] == ["X", "y", "w"] and "meta" in summary["dropped"]
    # the two parts are the dataset: sorted rows equal, none lost, none twice
    both = np.column_stack([np.vstack([X_tr, X_te]), np.concatenate([y_tr, y_te])])
    whole = np.column_stack([X, y])
    np.testing.assert_array_equal(both[np.lexsort(both.T)], whole[np.lexsort(whole.T)])
    assert len(set(w_tr) | set(w_te)) == N


@pytest.mark.parametrize("stratify", [False, True])
def test_split_does_not_depend_on_the_chunking(data, tmp_path, stratify):
    X, y = _rows(data)
    attrs = io.dataset_info(data)["attrs"]
    parts = []
    for chunk in (100, 333, N):
        io.write_dataset(tmp_path / f"d{chunk}.zarr", X, y, attrs=attrs, rows_per_chunk=chunk)
        io.split_dataset(tmp_path / f"d{chunk}.zarr", tmp_path / f"tr{chunk}.zarr", tmp_path / f"te{chunk}.zarr",
                         test_size=P, random_state=SEED, stratify=stratify)
        parts.append([_rows(tmp_path / f"{part}{chunk}.zarr") for part in ("tr", "te")])
    for other in parts[1:]:
        for (Xa, ya), (Xb, yb) in zip(parts[0], other):
            np.testing.assert_array_equal(Xa, Xb)
            np.testing.assert_array_equal(ya, yb)


def test_split_keeps_the_attributes(data, tmp_path):
    io.split_dataset(data, tmp_path / "tr.zarr", tmp_path / "te.zarr", test_size=P, random_state=SEED)
    source = io.dataset_info(data)["attrs"]
    for part in ("tr", "te"):
        attrs = io.dataset_info(tmp_path / f"{part}.zarr")["attrs"]
        for key in ("classes", "categorical", "feature_names", "fill_values", "task", "columns", "label_column"):
            assert attrs[key] == source[key], key
        assert attrs["split"] == {"of": str(data), "part": {"tr": "train", "te": "test"}[part], "test_size": P,
                                  "random_state": SEED, "stratify": False}
        y = _rows(tmp_path / f"{part}.zarr")[1]
        assert attrs["n_rows"] == len(y)
        assert attrs["class_counts"] == {c: int((y == i).sum()) for i, c in enumerate(source["classes"])}
        # the one-hot columns are found as in DATA: rfstream fit passes them through the standardizer
        assert io.onehot_columns(tmp_path / f"{part}.zarr") == io.onehot_columns(data) != []


def test_stratify_keeps_the_class_proportions(data, tmp_path):
    summary = io.split_dataset(data, tmp_path / "tr.zarr", tmp_path / "te.zarr", test_size=P, random_state=SEED,
                               stratify=True)
    y = _rows(data)[1]
    y_te = _rows(tmp_path / "te.zarr")[1]
    for c in np.unique(y):
        n_c = int((y == c).sum())
        # exact: round(P * n_c) test rows of each class, so its share is P within 0.5 / n_c
        assert (y_te == c).sum() == np.floor(P * n_c + 0.5)
        assert abs((y_te == c).sum() / n_c - P) <= 0.5 / n_c + 1e-12
    assert summary["stratify"] is True and summary["test_rows"] == len(y_te)
    # the same uniforms as the plain split: the stratified test set is mostly the plain one
    plain_te = train_test_split(np.arange(N), test_size=P, random_state=SEED)[1]
    w_te = zarr.open_group(str(tmp_path / "te.zarr"))["w"][:]
    assert len(np.intersect1d(plain_te, w_te)) > 0.8 * len(w_te)


def test_split_on_memory_urls(data, tmp_path, capsys):
    root = f"memory://split-{uuid.uuid4().hex[:8]}"
    X, y = _rows(data)
    io.write_dataset(f"{root}/d.zarr", X, y, attrs=io.dataset_info(data)["attrs"], rows_per_chunk=200)
    try:
        assert run(["split", f"{root}/d.zarr", f"{root}/tr.zarr", f"{root}/te.zarr", "--random-state", SEED,
                    "--stratify", "--scheduler", "threads", "--quiet"]) == 0
        local = io.split_dataset(data, tmp_path / "tr.zarr", tmp_path / "te.zarr", random_state=SEED,
                                 stratify=True)
        for part in ("tr", "te"):
            got, want = _rows(f"{root}/{part}.zarr"), _rows(tmp_path / f"{part}.zarr")
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        assert io.dataset_info(f"{root}/te.zarr")["attrs"]["n_rows"] == local["test_rows"]
        assert fsspec.filesystem("memory").exists(f"{root}/te.zarr/rfstream-commit.json")  # committed last
    finally:
        fsspec.filesystem("memory").rm(root, recursive=True)


def test_split_errors(data, tmp_path, capsys):
    capsys.readouterr()
    tr, te = tmp_path / "tr.zarr", tmp_path / "te.zarr"
    cases = [
        (["--test-size", 0], "--test-size must be a fraction between 0 and 1"),
        (["--test-size", 1.5], "--test-size must be a fraction between 0 and 1"),
    ]
    for extra, message in cases:
        assert run(["split", data, tr, te, *extra, "--quiet"]) == 2
        assert message in one_error_line(capsys)
    assert run(["split", data, tr, tr, "--quiet"]) == 2
    assert "TRAIN and TEST are the same location" in one_error_line(capsys)
    assert run(["split", data, data, te, "--quiet"]) == 2
    assert "is DATA itself" in one_error_line(capsys)
    assert run(["split", tmp_path / "nope.zarr", tr, te, "--quiet"]) == 2
    assert "nope.zarr does not exist" in one_error_line(capsys)
    assert run(["split", data, tr, te, "--scheduler", "threads", "--quiet"]) == 0
    assert run(["split", data, tr, te, "--quiet"]) == 2
    assert re.search(r"tr\.zarr already exists; pass --overwrite", one_error_line(capsys))
    assert run(["split", data, tr, te, "--overwrite", "--scheduler", "threads", "--quiet"]) == 0
    X, y = _rows(data)
    io.write_dataset(tmp_path / "r.zarr", X, y.astype(np.float32))  # regression targets
    assert run(["split", tmp_path / "r.zarr", tmp_path / "a.zarr", tmp_path / "b.zarr", "--stratify", "--quiet"]) == 2
    assert "--stratify keeps the proportions of classes" in one_error_line(capsys)
    with pytest.raises(ValueError, match=r"test_size \(CLI: --test-size\) must be a fraction in \(0, 1\)"):
        io.split_dataset(data, tmp_path / "a.zarr", tmp_path / "b.zarr", test_size=1.0)
    assert not (tmp_path / "a.zarr").exists() and not (tmp_path / "b.zarr").exists()


FIT = ["--n-components", 100, "--alpha", 1.0, "--random-state", SEED, "--scheduler", "threads", "--quiet"]


def test_fit_holdout_reports_the_metrics_of_the_split_test_set(data, tmp_path, capsys):
    capsys.readouterr()
    assert run(["fit", data, "--out", tmp_path / "held", "--holdout", P, *FIT[:-1]]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert run(["split", data, tmp_path / "tr.zarr", tmp_path / "te.zarr", "--test-size", P,
                "--random-state", SEED, "--scheduler", "threads", "--quiet"]) == 0
    assert run(["fit", tmp_path / "tr.zarr", "--out", tmp_path / "m", *FIT]) == 0
    assert run(["evaluate", tmp_path / "m", tmp_path / "te.zarr", "--out", tmp_path / "e.json", "--scheduler",
                "threads", "--quiet"]) == 0
    evaluated = json.loads((tmp_path / "e.json").read_text())
    held = summary["holdout"]
    assert held["rows"] == evaluated["rows"] and summary["rows"] == io.dataset_info(tmp_path / "tr.zarr")["shape"][0]
    for key in ("error_rate", "balanced_error", "log_loss"):
        if evaluated.get(key) is not None:
            assert held[key] == pytest.approx(evaluated[key], abs=1e-6), key
    saved = io.read_model_json(tmp_path / "held")["metadata"]["holdout"]
    assert saved["fraction"] == P and saved["random_state"] == SEED and saved["confusion_matrix"]
    assert saved["error_rate"] == held["error_rate"]


def test_fit_holdout_in_the_fingerprint_and_errors(data, tmp_path, capsys):
    def digest(**kw):
        return FitJob(data, n_components=8, **kw).fingerprint()[0]

    base = digest(holdout=0.2, random_state=1)
    assert base == digest(holdout=0.2, random_state=1)
    assert len({base, digest(holdout=0.3, random_state=1), digest(holdout=0.2, random_state=2),
                digest(random_state=1)}) == 4
    with pytest.raises(ValueError, match=r"holdout \(CLI: --holdout\) must be a fraction"):
        FitJob(data, holdout=1.0)
    with pytest.raises(ValueError, match="a transformer .* has no score"):
        FitJob(data, solver=None, holdout=0.2)
    capsys.readouterr()
    assert run(["fit", data, "--out", tmp_path / "m", "--holdout", 0, "--quiet"]) == 2
    assert "--holdout must be a fraction between 0 and 1" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()
