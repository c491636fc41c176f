"""The size fuzzer's body, run under ``RLIMIT_AS`` by tests/io/test_size_fuzz.py (a MemoryError,
a kill or a traceback there fails the test): hypothesis writes sizes into model directories and
into a dataset's Zarr metadata, and each is either used as saved or refused in one line.

* models: an integer of ``model.json`` (a constructor parameter, a fitted scalar, a manifest
  shape) set to a size from :data:`SIZES`; ``load_model`` either raises one
  :class:`ModelFileError` line (no MemoryError inside it) or predicts exactly as saved;
* datasets: a size of ``X``'s or ``y``'s ``zarr.json`` (shape, chunk shape) or of the group's
  attributes (``n_rows``, the feature names) set the same way; ``rfstream predict`` with a
  saved model exits 0 with one prediction per declared row, or exits 2 with one line.

``python -c "from helpers.size_fuzz import main; main(kind, folder, examples)"`` with
``tests/`` on the path; exit 0 when every example held.
"""
import contextlib
import io
import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: sizes an attacker writes: the edges of int32 and int64, 10^9, 10^12, 2^40, and small ones
SIZES = [0, 1, 3, 10**6, 2**31 - 1, 2**31, 10**9, 10**12, 2**40, 2**62, 2**63 - 1]
#: sizes in a dataset's metadata: as :data:`SIZES` without the counts of rows that are within
#: the bounds yet many (10^6 declared rows are 62,500 chunks of fill values to predict: time, not memory)
DATASET_SIZES = [v for v in SIZES if v != 10**6]
ROWS, COLUMNS = 60, 4
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None)


def _data():
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(ROWS, COLUMNS))).astype(np.float32)
    return X, (X[:, 0] + X[:, 1] ** 2 > 1.0).astype(int)


def _models():
    from sklearn.pipeline import Pipeline

    from rfstream import (
        AdditiveChi2Sampler,
        KernelPCA,
        PolynomialCountSketch,
        RandomFourierFeatures,
        StreamingRidgeClassifier,
        StreamingSGDClassifier,
    )

    def pipe(fmap, solver=None):
        return Pipeline([("features", fmap), ("solver", solver or StreamingRidgeClassifier())])

    return {"rff": pipe(RandomFourierFeatures(n_components=8, random_state=0)),
            "chi2": pipe(AdditiveChi2Sampler()),
            "sketch": pipe(PolynomialCountSketch(n_components=8, random_state=0)),
            "sgd": pipe(RandomFourierFeatures(n_components=8, random_state=0),
                        StreamingSGDClassifier(random_state=0, max_iter=3)),
            "kpca": KernelPCA(3, features=RandomFourierFeatures(n_components=8, random_state=0))}


def _outputs(model, X):
    return [np.asarray(getattr(model, m)(X)) for m in ("decision_function", "predict", "transform")
            if hasattr(model, m)]


def _int_nodes(doc):
    """Every ``(container, key)`` holding an int (not a bool) among the estimators' parameters
    and fitted scalars and the manifest's shapes: the sizes a model declares."""
    out, stack = [], [doc["estimator"]] + [entry["shape"] for entry in doc["arrays"].values()]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if type(value) is int:
                out.append((node, key))
            stack.append(value)
    return out


def fuzz_models(folder: Path, examples: int) -> None:
    from rfstream import load_model, save_model
    from rfstream.io.model_checks import ModelFileError

    X, y = _data()
    saved = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in _models().items():
            model.fit(X) if name == "kpca" else model.fit(X, y)
            saved[name] = (save_model(model, folder / f"saved-{name}"), _outputs(model, X[:7]))

    @settings(max_examples=examples, **SETTINGS)
    @given(case=st.sampled_from(sorted(saved)), edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from(SIZES)), min_size=1, max_size=2))
    def one(case, edits):
        source, outputs = saved[case]
        path = folder / "model"
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(source, path)
        doc = json.loads((path / "model.json").read_text())
        for index, value in edits:
            nodes = _int_nodes(doc)
            container, key = nodes[index % len(nodes)]
            container[key] = value
        (path / "model.json").write_text(json.dumps(doc))
        try:
            model = load_model(path)
        except ModelFileError as exc:
            text = str(exc)
            assert "\n" not in text and "MemoryError" not in text and "allocate" not in text, text
            return
        for got, want in zip(_outputs(model, X[:7]), outputs):
            np.testing.assert_array_equal(got, want)

    one()


def _dataset(folder: Path):
    from rfstream import save_model
    from rfstream.io import write_dataset
    from rfstream.pipeline import make_model

    X, y = _data()
    write_dataset(folder / "saved.zarr", X, y, rows_per_chunk=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_model("classification", features="rff", solver="ridge",
                           feature_params={"n_components": 8, "random_state": 0}).fit(X, y)
    return save_model(model, folder / "model")


def _cli(argv):
    """``(exit status, stderr's non-blank lines)`` of the command line, in process."""
    from rfstream import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
    return code, [line for line in err.getvalue().splitlines() if line.strip()]


def fuzz_datasets(folder: Path, examples: int) -> None:
    model = _dataset(folder)

    @settings(max_examples=examples, **SETTINGS)
    @given(array=st.sampled_from(["X", "y", "group"]), field=st.integers(0, 10**6),
           value=st.sampled_from(DATASET_SIZES))
    def one(array, field, value):
        data, out = folder / "data.zarr", folder / "out.zarr"
        for p in (data, out):
            shutil.rmtree(p, ignore_errors=True)
        shutil.copytree(folder / "saved.zarr", data)
        meta_path = data / ("zarr.json" if array == "group" else f"{array}/zarr.json")
        meta = json.loads(meta_path.read_text())
        if array == "group":
            attrs = meta["attributes"]
            if field % 2:
                attrs["n_rows"] = value
            else:
                attrs["feature_names"] = [f"x{j}" for j in range(min(value, 10**6))]
        else:
            dims = [meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"]]
            dims[field % 2][(field // 2) % len(dims[field % 2])] = value
        meta_path.write_text(json.dumps(meta))
        code, lines = _cli(["predict", model, data, "--out", out, "--quiet"])
        assert (code == 0 and not lines) or (code == 2 and len(lines) == 1), (code, lines[-6:])
        assert not any(word in "".join(lines) for word in ("Traceback", "MemoryError", "allocate")), lines
        if code == 0:
            import zarr

            rows = zarr.open_group(str(data), mode="r")["X"].shape[0]
            assert zarr.open_group(str(out), mode="r")["y_pred"].shape[0] == rows

    one()


def main(kind: str, folder: str, examples: int) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    {"models": fuzz_models, "datasets": fuzz_datasets}[kind](folder, examples)
    print(f"{kind}: {examples} examples held", file=sys.stdout)
