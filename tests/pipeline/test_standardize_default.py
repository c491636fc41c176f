"""standardize="auto" through the fit path: make_model, fit_dataset's metadata and summary, the
saved model, and the command line's --standardize (docs/accuracy.md)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.cli import run

from rfstream import load_model
from rfstream.catalog import STANDARDIZE_DEFAULT, make_model
from rfstream.cli import UserError, build_parser
from rfstream.cli.commands import fit_options
from rfstream.cluster import set_progress
from rfstream.io import write_dataset
from rfstream.jobs import FitJob
from rfstream.options import ParameterError
from rfstream.pipeline import fit_dataset
from rfstream.preprocess import Standardizer


@pytest.fixture(autouse=True)
def _quiet():
    set_progress(False)


@pytest.fixture
def pixels(tmp_path):
    """Pixel-like rows (integers 0-16) with a label that depends on them."""
    rng = np.random.default_rng(3)
    X = rng.integers(0, 17, size=(400, 12)).astype(np.float32)
    y = (X[:, 3] + X[:, 4] > 16).astype(np.int64)
    write_dataset(tmp_path / "px.zarr", X, y, rows_per_chunk=100)
    return tmp_path / "px.zarr"


def test_make_model_standardize_values():
    model = make_model("classification", standardize="auto", passthrough=[2])
    scaler = model.named_steps["standardize"]
    assert isinstance(scaler, Standardizer) and scaler.auto is True and scaler.passthrough == [2]
    assert make_model("classification", standardize=True).named_steps["standardize"].auto is False
    assert "standardize" not in make_model("classification", standardize=False).named_steps
    # a histogram map takes its input as it is: auto puts no standardizer before it
    assert "standardize" not in make_model("classification", features="chi2", standardize="auto").named_steps
    with pytest.raises(ParameterError, match=r"^standardize must be True, False or 'auto'; got 'maybe'\.$"):
        make_model("classification", standardize="maybe")


def test_fit_records_the_decision_and_the_model_keeps_it(pixels, tmp_path):
    job = FitJob(pixels, standardize="auto", n_components=32, gamma=0.05, alpha=1.0, out=tmp_path / "m",
                 checkpoint=None)
    model, meta = job.fit()
    job.save()
    decision = "auto -> off (every column in [0, 16], median range 16)"
    assert meta["standardize"] == decision and job.summary()["standardize"] == decision
    saved = json.loads((tmp_path / "m" / "model.json").read_text())["metadata"]
    assert saved["standardize"] == decision
    loaded = load_model(tmp_path / "m")
    scaler = loaded.named_steps["standardize"]
    assert scaler.applied_ is False and scaler.decision_ == decision
    X = np.random.default_rng(4).integers(0, 17, size=(50, 12)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    # the same fit without a standardizer: the same model (auto -> off is the identity)
    plain, _ = fit_dataset(pixels, standardize=False, n_components=32, gamma=0.05, alpha=1.0)
    np.testing.assert_allclose(plain.decision_function(X), model.decision_function(X), rtol=1e-5, atol=1e-6)
    # True and False record nothing: their summaries are as before
    _, meta = fit_dataset(pixels, standardize=True, n_components=32, gamma=0.05, alpha=1.0)
    assert "standardize" not in meta


def _fit_args(*argv):
    return build_parser().parse_args(["fit", "d.zarr", "--out", "m", *argv])


@pytest.mark.parametrize("argv, value", [
    ([], STANDARDIZE_DEFAULT), (["--standardize", "auto"], "auto"), (["--standardize", "yes"], True),
    (["--standardize", "no"], False), (["--no-standardize"], False),
    (["--no-standardize", "--standardize", "no"], False),
])
def test_cli_standardize_values(argv, value):
    got = fit_options(_fit_args(*argv))["standardize"]
    assert got == value and type(got) is type(value)


def test_cli_standardize_contradiction_is_one_line(pixels, tmp_path, capsys):
    with pytest.raises(UserError, match="--no-standardize and --standardize auto contradict each other"):
        fit_options(_fit_args("--no-standardize", "--standardize", "auto"))
    assert run(["fit", pixels, "--out", tmp_path / "m2", "--no-standardize", "--standardize", "yes"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("--no-standardize and --standardize yes contradict each other; "
                                             "pass one of them."), err


@pytest.mark.parametrize("form, line", [
    ("json", '"standardize": "auto -> off (every column in [0, 16], median range 16)"'),
    ("table", "standardize: auto -> off (every column in [0, 16], median range 16)"),
])
def test_cli_fit_standardize_auto_says_its_decision(pixels, tmp_path, capsys, form, line):
    code = run(["fit", pixels, "--out", tmp_path / "m3", "--standardize", "auto", "--n-components", 16,
                "--gamma", 0.05, "--scheduler", "threads", "--progress", "never", "--format", form])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert line in out.out
