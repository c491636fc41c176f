"""The one fit path: the CLI and the API build the same job, a transformer ends a pipeline,
and predictions hold any named outputs."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from rfstream import cli, pipeline
from rfstream.catalog import route
from rfstream.options import BY_NAME as PARAMETERS
from rfstream.cli import build_parser
from rfstream.cli.commands import fit_options
from rfstream.cli.options import split_params
from rfstream.options import OPTIONS as FIT_OPTIONS
from rfstream.cluster import connect, set_progress
from rfstream.io import open_dataset, read_predictions, write_dataset
from rfstream.jobs import FitJob

#: ``rfstream fit`` arguments that are not a keyword of fit_dataset under their own name,
#: and what they are in the API
NOT_KEYWORDS = {"no_standardize": "standardize=False", "no_checkpoint": "checkpoint=None",
                "scheduler": "rfstream.cluster.connect", "quiet": "progress='never'", "func": None,
                "format": "fit_dataset returns the summary's data; a table is the terminal's",
                "dry_run": "FitJob(...).plan(), rfstream.fit_plan"}


def fit_args(*argv):
    return build_parser().parse_args(["fit", "d.zarr", "--out", "m", *argv])


@pytest.fixture
def labelled(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(np.int64)
    write_dataset(tmp_path / "d.zarr", X, y, rows_per_chunk=200)
    return tmp_path / "d.zarr"


@pytest.fixture(autouse=True)
def _quiet():
    set_progress(False)


def test_every_fit_option_is_a_keyword_of_fit_dataset():
    parser = build_parser()
    fit = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith(" fit"))
    keywords = set(inspect.signature(pipeline.fit_dataset).parameters) | set(PARAMETERS)
    dests = {action.dest for action in fit._actions if action.dest != "help"}
    missing = sorted(d for d in dests if d not in keywords and d not in NOT_KEYWORDS)
    assert not missing, f"rfstream fit options the API does not take by name: {missing}"
    assert {o.name for o in FIT_OPTIONS} == set(PARAMETERS)  # one row per option in both tables


@pytest.mark.parametrize("argv, api", [
    (["--solver", "sgd", "--epochs", "3", "--sgd-solver", "newton"], {"epochs": 3, "sgd_solver": "newton"}),
    (["--ridge-solver", "pcg", "--pcg-rank", "16", "--cg-tol", "1e-6"],
     {"ridge_solver": "pcg", "pcg_rank": 16, "cg_tol": 1e-6}),
    (["--features", "tefm-s", "--power-iter", "2"], {"power_iter": 2}),
])
def test_the_cli_and_the_api_route_an_option_alike(argv, api):
    args = fit_args(*argv)
    solver = args.solver
    from_cli = split_params(args, args.features, solver, "classification")
    assert from_cli == route(args.features, solver, "classification", api)


def test_the_cli_and_the_api_make_one_fingerprint(labelled):
    args = fit_args("--n-components", "32", "--alpha", "0.1,1", "--ridge-solver", "gram", "--scheduler",
                    "threads", "--progress", "never")
    args.data = str(labelled)
    from_cli = FitJob(args.data, **fit_options(args))
    from_api = FitJob(str(labelled), out="elsewhere", n_components=32, alpha=[0.1, 1.0], ridge_solver="gram")
    assert from_cli.fingerprint()[0] == from_api.fingerprint()[0]
    other = FitJob(str(labelled), n_components=64, alpha=[0.1, 1.0])
    assert other.fingerprint()[0] != from_api.fingerprint()[0]


def test_the_fingerprint_holds_no_credential(tmp_path):
    rng = np.random.default_rng(0)
    write_dataset("memory://fp/d.zarr", rng.normal(size=(100, 2)), np.arange(100) % 2, rows_per_chunk=50)
    secret = "wJalrXUtnFEMI-K7MDENG-secret"
    jobs = [FitJob("memory://fp/d.zarr", n_components=8, storage_options=options)
            for options in ({"key": "AKIAOLD", "secret": secret}, {"key": "AKIANEW", "secret": "rotated"}, None)]
    digests = {job.fingerprint()[0] for job in jobs}
    assert len(digests) == 1  # credentials (rotated or absent) do not change the job
    assert secret not in jobs[0].fingerprint()[1] and "AKIA" not in jobs[0].fingerprint()[1]


def test_a_transformer_ends_a_pipeline_fitted_without_labels(tmp_path, capsys):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 4))
    write_dataset(tmp_path / "u.zarr", X, rows_per_chunk=125)  # no labels
    with connect("threads"):
        model, meta = pipeline.fit_dataset(tmp_path / "u.zarr", solver=None, n_components=16,
                                           out=tmp_path / "t")
        shape = pipeline.transform_dataset(tmp_path / "t", tmp_path / "u.zarr", tmp_path / "z.zarr")
    assert "solver" not in model.named_steps and shape == (500, 16)
    Z, y = open_dataset(tmp_path / "z.zarr")
    np.testing.assert_allclose(np.asarray(Z), model.transform(X), rtol=1e-6, atol=1e-6)
    assert y is None
    with pytest.raises(ValueError, match="is a transformer, which does not predict"):
        pipeline.predict_dataset(tmp_path / "t", tmp_path / "u.zarr", tmp_path / "p.zarr")
    # the same at the command line, with its one-line errors
    args = ["--scheduler", "threads", "--quiet"]
    assert cli.main(["fit", str(tmp_path / "u.zarr"), "--solver", "none", "--n-components", "8",
                     "--out", str(tmp_path / "t2"), *args]) == 0
    assert cli.main(["transform", str(tmp_path / "t2"), str(tmp_path / "u.zarr"), "--out",
                     str(tmp_path / "z2.zarr"), *args]) == 0
    assert np.asarray(open_dataset(tmp_path / "z2.zarr")[0]).shape == (500, 8)
    assert cli.main(["fit", str(tmp_path / "u.zarr"), "--out", str(tmp_path / "m"), *args]) == 2
    assert "--solver none for a transformer" in capsys.readouterr().err


def test_predictions_hold_named_outputs(labelled, tmp_path):
    with connect("threads"):
        model, _ = pipeline.fit_dataset(labelled, n_components=16, alpha=1.0, out=tmp_path / "m")
        rows = pipeline.predict_dataset(tmp_path / "m", labelled, tmp_path / "p.zarr", scores=True,
                                        outputs={"margin": lambda m, X: np.abs(m.decision_function(X))})
        with pytest.raises(ValueError, match="must be a Python identifier"):
            pipeline.predict_dataset(tmp_path / "m", labelled, tmp_path / "q.zarr",
                                     outputs={"../outside": lambda m, X: m.predict(X)})
    X = np.asarray(open_dataset(labelled)[0])
    margin = np.asarray(read_predictions(tmp_path / "p.zarr", array="margin"))
    assert rows == 600 and margin.shape == (600,)
    np.testing.assert_allclose(margin, np.abs(model.decision_function(X)), rtol=1e-5, atol=1e-6)
    assert not (tmp_path / "q.zarr").exists() and not (tmp_path / "outside").exists()


def test_cli_fit_summary_unchanged(labelled, tmp_path, capsys):
    code = cli.main(["fit", str(labelled), "--n-components", "16", "--alpha", "0.1,1,10", "--out",
                     str(tmp_path / "m"), "--scheduler", "threads", "--progress", "never"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["rows"] == 600 and summary["alpha"] in (0.1, 1.0, 10.0)
    assert summary["cv"]["scoring"] == "error_rate" and len(summary["cv"]["alpha"]) == 3
    assert not (tmp_path / "m.checkpoint").exists()  # removed once the model is saved


def test_a_registered_transformer_ends_a_pipeline(tmp_path, monkeypatch):
    # the room KernelPCA will take: a SOLVERS entry that is one class, not one per task
    from sklearn.decomposition import PCA

    from rfstream import catalog

    monkeypatch.setitem(catalog.SOLVERS, "pca", PCA)
    assert catalog.is_transformer("pca") and not catalog.is_transformer("ridge")
    X = np.random.default_rng(3).normal(size=(300, 4))
    write_dataset(tmp_path / "u.zarr", X, rows_per_chunk=100)
    with connect("threads"):
        model, _ = pipeline.fit_dataset(tmp_path / "u.zarr", solver="pca", n_components=16,
                                        solver_params={"n_components": 3})
    assert model.transform(X).shape == (300, 3) and not hasattr(model, "predict")


def test_a_checkpoint_is_refused_for_a_rewritten_dataset(tmp_path):
    import dask.array as da

    from rfstream.cluster import compute

    rng = np.random.default_rng(7)
    X, y = rng.normal(size=(300, 3)), (rng.normal(size=300) > 0).astype(np.int64)
    write_dataset(tmp_path / "d.zarr", X, y, rows_per_chunk=100)
    where = tmp_path / "m.checkpoint"
    job = FitJob(str(tmp_path / "d.zarr"), n_components=8, checkpoint=where)
    with pytest.raises(KeyboardInterrupt), job.resumable():  # one pass stored, then stopped
        compute(da.ones(10, chunks=5).sum())
        raise KeyboardInterrupt
    assert where.exists()
    before = job.fingerprint()[0]
    write_dataset(tmp_path / "d.zarr", X[::-1].copy(), y[::-1].copy(), rows_per_chunk=100, overwrite=True)
    same_shape = FitJob(str(tmp_path / "d.zarr"), n_components=8, checkpoint=where)
    assert same_shape.fingerprint()[0] != before  # same shape, chunks and attributes
    with pytest.raises(ValueError, match="dataset changed"), same_shape.resumable():
        pass
    restarted = FitJob(str(tmp_path / "d.zarr"), n_components=8, checkpoint=where, restart=True)
    with restarted.resumable() as stored:
        assert stored.reused == 0


def test_with_a_key_an_edited_pass_and_its_sha256_are_refused(tmp_path, monkeypatch):
    """The review's poisoning: a pass file and its SHA-256 in the manifest rewritten together.
    With RFSTREAM_CHECKPOINT_KEY set, each pass carries an HMAC the writer cannot forge."""
    import hashlib
    import io

    import dask.array as da

    from rfstream.cluster import compute
    from rfstream.io.checkpoints import MANIFEST, resumable

    monkeypatch.setenv("RFSTREAM_CHECKPOINT_KEY", "k3y-known-to-the-job-only")
    where, ones = tmp_path / "c", da.ones(10, chunks=5)
    with pytest.raises(KeyboardInterrupt), resumable(where, "job"):  # one pass stored, then stopped
        compute(ones.sum())
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt), resumable(where, "job") as stored:  # untouched: replayed
        assert compute(ones.sum()) == 10 and stored.reused == 1
        raise KeyboardInterrupt
    buf = io.BytesIO()
    np.savez(buf, v0=np.array(1e6))  # another value, with its SHA-256 written to match
    (where / "pass-00001.npz").write_bytes(buf.getvalue())
    manifest = json.loads((where / MANIFEST).read_text())
    manifest["steps"][0]["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    (where / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not authenticated by \\$RFSTREAM_CHECKPOINT_KEY"):
        with resumable(where, "job"):
            compute(ones.sum())


def test_a_list_of_alphas_for_a_solver_that_does_not_search_is_one_line(labelled, tmp_path, capsys):
    # the declared capability (searches_alpha), not scikit-learn's type message on the list
    with pytest.raises(ValueError, match="'alpha' parameter of StreamingSGDClassifier is one value.*a list of alphas is searched"):
        FitJob(str(labelled), solver="sgd", n_components=8, alpha=[1e-4, 1e-3])
    assert cli.main(["fit", str(labelled), "--solver", "sgd", "--alpha", "1e-4,1e-3", "--out",
                     str(tmp_path / "m"), "--scheduler", "threads", "--quiet"]) == 2
    assert "--solver ridge" in capsys.readouterr().err


def test_the_moments_the_auto_gammas_sample_and_the_classes_share_one_pass(labelled, tmp_path, monkeypatch):
    from rfstream import jobs

    kw = {"n_components": 64, "alpha": [0.1, 1.0], "gamma": "auto"}
    model, meta = pipeline.fit_dataset(labelled, **kw)
    monkeypatch.setattr(jobs, "first_look", lambda *args: [])  # each step's own pass, as before
    alone, alone_meta = pipeline.fit_dataset(labelled, **kw)
    assert meta["passes"] == alone_meta["passes"] - 2  # moments, sample and classes: one pass, not three
    assert model[1].gamma_ == alone[1].gamma_
    np.testing.assert_array_equal(model[0].mean_, alone[0].mean_)
    np.testing.assert_array_equal(model[-1].coef_, alone[-1].coef_)
