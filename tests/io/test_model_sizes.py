"""A model of a few KB whose constructor parameter or fitted scalar asks for a huge width
(AdditiveChi2Sampler's ``sample_steps``, a sketch's ``n_components``, KernelPCA's
``n_components_``) is refused at load in one line, exit 2, under ``RLIMIT_AS``: the output
width of every estimator is bounded (:func:`rfstream.sizes.check_model_width`) before the
model is probed or run."""
import json

import numpy as np
import pytest
from sklearn.pipeline import Pipeline

from helpers.capped import one_line_exit_2

from rfstream import (
    AdditiveChi2Sampler,
    KernelPCA,
    PolynomialCountSketch,
    RandomFourierFeatures,
    StreamingRidge,
    save_model,
)
from rfstream.io import write_dataset


def _models():
    return {
        "chi2": (lambda: Pipeline([("features", AdditiveChi2Sampler()), ("solver", StreamingRidge())]),
                 "AdditiveChi2Sampler", "params", "sample_steps", 10**9, {"sample_interval": 0.1}),
        "sketch": (lambda: Pipeline([("features", PolynomialCountSketch(n_components=16, random_state=0)),
                                     ("solver", StreamingRidge())]),
                   "PolynomialCountSketch", "params", "n_components", 10**9, {}),
        "kpca": (lambda: KernelPCA(3, features=RandomFourierFeatures(n_components=16, random_state=0)),
                 "KernelPCA", "fitted", "n_components_", 10**9, {}),
    }


def _edit(doc, cls, part, name, value, extra):
    stack = [doc["estimator"]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if str(node.get("$estimator", "")).endswith(cls):
                node[part][name] = value
                node["params"].update(extra)
                return
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    raise AssertionError(f"no {cls} in the model")


@pytest.mark.parametrize("case", ["chi2", "sketch", "kpca"])
def test_a_huge_width_in_a_small_model_is_refused_at_load(tmp_path, case):
    make, cls, part, name, value, extra = _models()[case]
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(50, 4))).astype(np.float32)
    y = X[:, 0] - X[:, 1]
    model = make().fit(X, y) if case != "kpca" else make().fit(X)
    path = tmp_path / "model"
    save_model(model, path)
    doc = json.loads((path / "model.json").read_text())
    _edit(doc, cls, part, name, value, extra)
    (path / "model.json").write_text(json.dumps(doc))
    assert sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) < 100_000
    write_dataset(tmp_path / "data.zarr", X, y)
    command = ["transform", path, tmp_path / "data.zarr", "--out", tmp_path / "out"] if case == "kpca" else \
        ["predict", path, tmp_path / "data.zarr", "--out", tmp_path / "out"]
    width = 4 * (2 * value - 1) if case == "chi2" else value
    # KernelPCA's n_components_ also disagrees with its components_: either check may say it first
    needle = "n_components_" if case == "kpca" else f"output width is {width:,}"
    one_line_exit_2(command, needle, timeout=180)
    assert not (tmp_path / "out").exists()
