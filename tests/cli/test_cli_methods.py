"""The command line's options per method (rfstream.cli): what a flag sets on the
estimator, which flags a method refuses, and a fit of each method through the CLI.
The commands themselves, end to end and with a user's mistakes: tests/cli/test_cli.py."""
import json

import numpy as np
import pytest
from helpers import import_test_module
from helpers.sgd_cases import blobs

from rfstream import (
    TEFM,
    SESFeatures,
    Standardizer,
    StreamingSGDClassifier,
    cli,
    load_model,
)
from rfstream.cli import build_parser
from rfstream.cli.options import UserError, split_params
from rfstream.cluster import set_progress
from rfstream.io import open_dataset


@pytest.fixture(autouse=True)
def _no_progress():
    yield
    set_progress(False)  # main() switches progress bars on unless --quiet


# ------------------------------------------------------------------ options per method
def test_cli_options_that_do_not_apply_to_binning():
    def split(*flags):
        args = build_parser().parse_args(["fit", "d.zarr", "--out", "m", *flags])
        return split_params(args, args.features, args.solver, "classification")

    with pytest.raises(UserError, match="--n-components does not apply to --features binning"):
        split("--features", "binning", "--n-components", "10", "--n-grids", "4")
    # the options most maps share are dropped at their usual values
    feature_params, _ = split("--features", "binning", "--n-components", "1000", "--n-grids", "4",
                              "--kernel", "gaussian")
    assert feature_params == {"n_grids": 4, "gamma": "auto", "random_state": 0}
    # no --kernel: the hybrid keeps its own laplacian Fourier half (the CLI used to force gaussian)
    assert "kernel" not in split("--features", "rff+binning", "--n-components", "100")[0]


# the per-method tests' own data, as fixtures of this module too
test_cnm = import_test_module("datadriven/test_cnm.py")
test_cnm_multiclass = import_test_module("datadriven/test_cnm_multiclass.py")
test_tefm = import_test_module("datadriven/test_tefm.py")
cpusmall, magic, rings3 = test_tefm.cpusmall, test_cnm.magic, test_cnm_multiclass.rings3


@pytest.fixture(scope="module")
def cpusmall_standardized(prepared):
    """cpusmall standardized (dask), and its targets (as test_ses.py's fixture)."""
    Xd, y = open_dataset(prepared("cpusmall", rows_per_chunk=2000)[0])
    return Standardizer().fit(Xd).transform(Xd), y


def test_cli_fit_tefm(cpusmall, tmp_path, capsys):
    X, y = cpusmall
    src = tmp_path / "small.zarr"
    from rfstream.io import write_dataset
    write_dataset(src, X[:1500], y[:1500], attrs={"task": "regression"})
    for features in ("tefm-g", "tefm-s"):
        out = tmp_path / features
        code = cli.main(["fit", str(src), "--out", str(out), "--features", features,
                         "--n-components", "16", "--n-random-features", "48", "--power-iter", "2",
                         "--scheduler", "threads", "--quiet"])
        assert code in (0, None)
        model = load_model(out)
        tefm = model.named_steps["features"]
        assert isinstance(tefm, TEFM)
        assert (tefm.method, tefm.n_random_features, tefm.n_power_iter) == (
            {"tefm-g": "gaussian", "tefm-s": "srht"}[features], 48, 2)
        assert tefm.components_.shape == (48, 16)
    code = cli.main(["fit", str(src), "--out", str(tmp_path / "rff"), "--features", "rff",
                     "--power-iter", "2", "--scheduler", "threads", "--quiet"])
    assert code == 2
    assert "--power-iter does not apply to --features rff" in capsys.readouterr().err


def test_cli_fit_ses(cpusmall_standardized, tmp_path, capsys):
    from rfstream.io import write_dataset

    Xs, y = cpusmall_standardized
    src = tmp_path / "small.zarr"
    write_dataset(src, Xs[:1500], y[:1500], attrs={"task": "regression"})
    out = tmp_path / "ses"
    code = cli.main(["fit", str(src), "--out", str(out), "--features", "ses", "--n-components", "16",
                     "--n-pairs", "64", "--reg", "0.25", "--weights", "ses", "--sampler", "qmc",
                     "--scheduler", "threads", "--quiet"])
    assert code in (0, None)
    ses = load_model(out).named_steps["features"]
    assert isinstance(ses, SESFeatures)
    assert (ses.n_pairs, ses.reg, ses.weights, ses.sampler, ses.reg_) == (64, 0.25, "ses", "qmc", 0.25)
    code = cli.main(["fit", str(src), "--out", str(tmp_path / "rff"), "--features", "rff",
                     "--n-pairs", "64", "--scheduler", "threads", "--quiet"])
    assert code == 2
    assert "--n-pairs does not apply to --features rff" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse: usage error, exit code 2
        cli.main(["fit", str(src), "--out", str(tmp_path / "x"), "--features", "ses",
                  "--reg", "-1", "--scheduler", "threads", "--quiet"])
    assert exc.value.code == 2
    assert "--reg must be positive" in capsys.readouterr().err


def test_cli_fit_eerf_and_flag_errors(tmp_path, capsys):
    from rfstream.io import write_dataset

    X, y = np.random.default_rng(0).normal(size=(500, 3)), np.arange(500) % 2
    write_dataset(tmp_path / "d.zarr", X, y, rows_per_chunk=128)
    argv = ["fit", tmp_path / "d.zarr", "--out", tmp_path / "m", "--features", "lkrf",
            "--n-components", 8, "--n-candidates", 40, "--subsample", 0.5, "--rho", 0.5,
            "--base", "arccos1", "--scheduler", "threads", "--quiet"]
    assert cli.main([str(a) for a in argv]) == 0
    f = load_model(tmp_path / "m").named_steps["features"]
    assert (type(f).__name__, f.n_candidates, f.subsample, f.rho, f.base) == ("LKRFFeatures", 40, 0.5, 0.5, "arccos1")
    capsys.readouterr()
    bad = ["fit", tmp_path / "d.zarr", "--out", tmp_path / "m2", "--features", "eerf", "--rho", 2,
           "--scheduler", "threads", "--quiet"]
    assert cli.main([str(a) for a in bad]) == 2
    assert "--rho does not apply to --features eerf" in capsys.readouterr().err


def test_cli_fit_cnm_and_circulant(magic, tmp_path, capsys):
    from rfstream.io import write_dataset

    Xtr, _, ytr, _ = magic
    src = tmp_path / "small.zarr"
    write_dataset(src, Xtr[::10], ytr[::10], attrs={"task": "classification", "classes": [0, 1]})
    try:
        for extra in (["--features", "cnm", "--structure", "circulant", "--theta-step", "0.3",
                       "--cnm-max-iter", "5"], ["--features", "circulant"]):
            out = tmp_path / extra[1]
            code = cli.main(["fit", str(src), "--out", str(out), "--n-components", "16", "--quiet",
                             "--scheduler", "threads", *extra])
            assert code == 0, capsys.readouterr().err
            model = load_model(out)
            assert model.named_steps["features"].n_components == 16
            if extra[1] == "cnm":  # --cnm-max-iter: CNM's max_iter, its rounds
                assert model.named_steps["features"].max_iter == 5 >= model.named_steps["features"].n_iter_
        code = cli.main(["fit", str(src), "--out", str(tmp_path / "bad"), "--features", "rff",
                         "--theta-step", "0.1", "--scheduler", "threads", "--quiet"])
        assert code == 2 and "--theta-step does not apply" in capsys.readouterr().err
    finally:
        set_progress(False)
    params = model.named_steps["features"].get_params()
    assert json.loads(json.dumps(params)) == params  # plain parameters: a JSON round trip


def test_cli_multiclass_flag(rings3, tmp_path, capsys):
    from rfstream import cli
    from rfstream.cluster import set_progress
    from rfstream.io import write_dataset

    X, y = rings3
    src = tmp_path / "rings.zarr"
    write_dataset(src, X[:600], y[:600], attrs={"task": "classification", "classes": [0, 1, 2]})
    try:
        code = cli.main(["fit", str(src), "--out", str(tmp_path / "m"), "--features", "cnm",
                         "--n-components", "8", "--multiclass", "crammer-singer", "--quiet",
                         "--scheduler", "threads"])
        assert code == 0, capsys.readouterr().err
        assert load_model(tmp_path / "m").named_steps["features"].multiclass == "crammer-singer"
        code = cli.main(["fit", str(src), "--out", str(tmp_path / "bad"), "--features", "rff",
                         "--multiclass", "multinomial", "--scheduler", "threads", "--quiet"])
        assert code == 2 and "--multiclass does not apply" in capsys.readouterr().err
        code = cli.main(["fit", str(src), "--out", str(tmp_path / "p"), "--features", "cnm",
                         "--n-components", "8", "--gamma", "paper", "--quiet", "--scheduler", "threads"])
        assert code == 0, capsys.readouterr().err
        assert load_model(tmp_path / "p").named_steps["features"].gamma == "paper"
        code = cli.main(["fit", str(src), "--out", str(tmp_path / "bad2"), "--features", "rff",
                         "--gamma", "paper", "--scheduler", "threads", "--quiet"])
        assert code == 2 and "RandomFourierFeatures: gamma ('paper') is not a number" in capsys.readouterr().err
    finally:
        set_progress(False)


def test_cli_fit_sgd_and_evaluate(tmp_path, capsys):
    from rfstream import cli, load_model, save_model
    from rfstream.io import write_dataset

    X, y = blobs(n=3000, d=4, noise=0.5)
    write_dataset(tmp_path / "d.zarr", X, y, attrs={"classes": ["no", "yes"]}, rows_per_chunk=1000)
    rc = cli.main(["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m"), "--solver", "sgd",
                   "--loss", "log_loss", "--epochs", "3", "--alpha", "1e-3", "--n-components", "64",
                   "--scheduler", "threads", "--quiet"])
    assert rc == 0
    model = load_model(tmp_path / "m")
    solver = model.named_steps["solver"]
    assert isinstance(solver, StreamingSGDClassifier)
    assert (solver.loss, solver.max_iter, solver.alpha) == ("log_loss", 3, 1e-3)
    assert rc == 0 and cli.main(["evaluate", str(tmp_path / "m"), str(tmp_path / "d.zarr"),
                                 "--scheduler", "threads", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert '"error_rate"' in out
    # a loaded model continues training with partial_fit from its weights
    coef = solver.coef_.copy()
    Z = model[:-1].transform(X)
    solver.partial_fit(Z, y)
    assert solver.coef_.shape == coef.shape and not np.array_equal(solver.coef_, coef)
    save_model(model, tmp_path / "m2")
    # options of the SGD solver are refused for ridge, with a one-line error
    rc = cli.main(["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m3"), "--loss", "hinge",
                   "--scheduler", "threads", "--quiet"])
    assert rc == 2
    assert "--loss does not apply to StreamingRidgeClassifier" in capsys.readouterr().err
    # ridge has a max_iter of its own (CG); --epochs must still be refused, not passed to it
    rc = cli.main(["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m5"), "--epochs", "3",
                   "--scheduler", "threads", "--quiet"])
    assert rc == 2
    assert "--epochs does not apply to StreamingRidgeClassifier" in capsys.readouterr().err
    rc = cli.main(["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m4"), "--solver", "sgd",
                   "--alpha", "0.1,1", "--scheduler", "threads", "--quiet"])
    assert rc == 2
    assert "alpha" in capsys.readouterr().err


def test_cli_fit_newton(tmp_path):
    from rfstream import cli, load_model
    from rfstream.io import write_dataset

    X, y = blobs(n=2000, d=4, noise=0.5)
    write_dataset(tmp_path / "d.zarr", X, y, attrs={"classes": ["no", "yes"]}, rows_per_chunk=500)
    args = ["fit", str(tmp_path / "d.zarr"), "--solver", "sgd", "--sgd-solver", "newton", "--loss",
            "squared_hinge", "--alpha", "1e-3", "--n-components", "32", "--scheduler", "threads", "--quiet"]
    assert cli.main(args + ["--out", str(tmp_path / "m")]) == 0
    solver = load_model(tmp_path / "m").named_steps["solver"]
    assert solver.solver == "newton" and solver.n_iter_ <= 8 and solver.gap_ <= 1e-3 * solver.objective_
    assert cli.main(["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m2"), "--sgd-solver",
                     "newton", "--scheduler", "threads", "--quiet"]) == 2  # not for ridge
