"""What a new user trips on in the first hour (issue: "The first hour"): convert says which
column it took as the label and warns when the only text column looks like it; the
one-hot helper takes a dataset's path."""
import json

import numpy as np

from rfstream import cli, io


def _run(*argv):
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def test_convert_names_its_label_and_doubts_a_default_one(tmp_path, capsys):
    rng = np.random.default_rng(0)
    letters = rng.choice(list("ABC"), size=60)
    lines = [f"{c},{a:.3f},{int(b)}" for c, a, b in zip(letters, rng.normal(size=60), rng.integers(0, 5, 60))]
    src = tmp_path / "letters.data"
    src.write_text("\n".join(lines) + "\n")
    assert _run("convert", src, tmp_path / "a.zarr") == 0
    out = capsys.readouterr()
    assert "column 'c0' is the only text column" in out.err and "--label-column 0." in out.err
    assert json.loads(out.out)["label"] == {"column": 2, "task": "classification", "classes": 5}
    assert _run("convert", src, tmp_path / "b.zarr", "--label-column", "0") == 0  # as the warning says
    out = capsys.readouterr()
    assert "warning" not in out.err
    assert io.dataset_info(tmp_path / "b.zarr")["attrs"]["classes"] == ["A", "B", "C"]


def test_onehot_columns_takes_a_path_or_attrs(tmp_path):
    src = tmp_path / "d.csv"
    src.write_text("city,x,y\nParis,1.0,0\nLyon,2.0,1\nParis,3.0,1\n")
    io.convert(src, tmp_path / "d.zarr")
    attrs = io.dataset_info(tmp_path / "d.zarr")["attrs"]
    assert io.onehot_columns(tmp_path / "d.zarr") == io.onehot_columns(attrs) == [0, 1]


def test_an_installed_package_finds_the_datasets_beside_the_working_directory(tmp_path, monkeypatch):
    from rfstream.datasets import registry

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "rfstream" / "datasets"
    monkeypatch.delenv("RFSTREAM_DATASETS", raising=False)
    monkeypatch.setattr(registry, "__file__", str(site / "registry.py"))  # no pyproject.toml above it
    (tmp_path / "shared" / "datasets").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert registry.datasets_folder() == tmp_path / "shared" / "datasets"  # the parent's, as in the README


def test_bench_converts_only_the_datasets_asked_for(tmp_path, monkeypatch):
    import rfstream.datasets
    from rfstream.bench import e2e

    asked = []
    monkeypatch.setattr(rfstream.datasets, "prepare", lambda entry, workdir, folder: asked.append(entry) or ("t", "v"))
    assert set(e2e.prepare_data(None, tmp_path, ["adult"])) == {"adult"}
    assert asked == [e2e.REGISTRY_NAMES["adult"]]


def test_a_librarys_unclosed_session_is_not_the_users_warning(capsys):
    import warnings

    from rfstream.cli.commands import _warnings_as_lines

    with _warnings_as_lines():
        warnings.warn("Unclosed client session <aiohttp.client.ClientSession>", ResourceWarning)
        warnings.warn("the chosen alpha=1 is the largest of its grid", UserWarning)
    assert capsys.readouterr().err == "rfstream: warning: the chosen alpha=1 is the largest of its grid\n"


def test_the_api_and_the_cli_make_the_same_model_on_adult(adult_train_zarr, adult_test_zarr, tmp_path):
    """fit_dataset applies the CLI's defaults (one-hot columns passed through the
    standardizer included): the same model, the same metrics, whichever door."""
    from rfstream.cluster import connect
    from rfstream.pipeline import evaluate_dataset, fit_dataset, load_fitted

    options = ["--n-components", "300", "--alpha", "0.01,0.1,1", "--random-state", "3"]
    assert _run("fit", adult_train_zarr, *options, "--out", tmp_path / "cli", "--scheduler", "threads",
                "--quiet") == 0
    with connect("threads"):
        api, _ = fit_dataset(str(adult_train_zarr), n_components=300, alpha=[0.01, 0.1, 1], random_state=3,
                             out=tmp_path / "api")
        cli_model, cli_meta = load_fitted(tmp_path / "cli")
        assert list(api.named_steps["standardize"].passthrough) == io.onehot_columns(adult_train_zarr)
        X, _ = io.open_dataset(adult_test_zarr)
        rows = X[:2000].compute()
        np.testing.assert_allclose(api.decision_function(rows), cli_model.decision_function(rows),
                                   rtol=1e-6, atol=1e-6)
        api_model, api_meta = load_fitted(tmp_path / "api")
        ours = evaluate_dataset(api_model, api_meta, str(adult_test_zarr))
        theirs = evaluate_dataset(cli_model, cli_meta, str(adult_test_zarr))
    assert ours["task"] == theirs["task"] == "classification"
    assert abs(ours["error_rate"] - theirs["error_rate"]) <= 1e-6


def test_a_classifier_saved_without_metadata_evaluates_as_a_classifier(tmp_path, capsys):
    """The README's estimator snippet: make_model + save_model records no dataset; evaluate
    takes the task from the estimator itself."""
    import rfstream
    from rfstream.pipeline import make_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(np.int32)
    io.write_dataset(tmp_path / "d.zarr", X, y, attrs={"task": "classification", "classes": ["no", "yes"]})
    model = make_model("classification", feature_params={"n_components": 50, "random_state": 0})
    model.fit(X, y)
    rfstream.save_model(model, tmp_path / "m")
    assert _run("evaluate", tmp_path / "m", tmp_path / "d.zarr", "--format", "json", "--scheduler",
                "threads") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["task"] == "classification" and result["error_rate"] < 0.2


def test_bench_without_its_datasets_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RFSTREAM_DATASETS", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    assert _run("bench", "--parts", "e2e", "--data", "adult", "--no-plots") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--datasets FOLDER" in err and "RFSTREAM_DATASETS" in err
    (tmp_path / "some").mkdir()
    assert _run("bench", "--datasets", tmp_path / "some", "--parts", "fused", "--out", tmp_path / "o",
                "--no-plots") == 2
    assert "kddcup99" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["some"]  # no output folder, nothing in the cwd


def test_a_source_file_given_for_a_dataset_says_convert(tmp_path, capsys):
    src = tmp_path / "d.csv"
    src.write_text("a,b,y\n1,2,0\n3,4,1\n")
    for command in (["fit", src, "--out", tmp_path / "m"], ["info", src]):
        assert _run(*command) == 2
        err = capsys.readouterr().err
        assert err == (f"rfstream: error: {src} is a file, not a Zarr dataset; convert it first: rfstream convert "
                       f"{src} d.zarr (Python: rfstream.io.convert), then use d.zarr\n")


def test_parameters_in_messages_are_the_flags_typed():
    from rfstream.cli.options import cli_message
    from rfstream.options import ParameterError

    assert cli_message(ParameterError("lower {pcg_rank} (or {n_components}); {cv=} keeps one Gram",
                                      pcg_rank=None, n_components=None, cv="loo")) == \
        "lower --pcg-rank (or --n-components); --cv loo keeps one Gram"
    assert cli_message(ParameterError("{solver=} needs {loss=}", solver="newton", loss="log_loss")) == \
        "--sgd-solver newton needs --loss log_loss"
    # names that mean something else on another estimator, paths, and words stay as they are
    assert cli_message(ValueError("tol=1e-3 and max_iter=5 in /data/n_components.zarr: a gamma grid")) == \
        "tol=1e-3 and max_iter=5 in /data/n_components.zarr: a gamma grid"


def test_the_fit_summary_counts_the_passes_it_printed(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    io.write_dataset(tmp_path / "d.zarr", X, X[:, 0] - X[:, 1], attrs={"task": "regression"})
    assert _run("fit", tmp_path / "d.zarr", "--alpha", "0.1,1", "--n-components", "40", "--out", tmp_path / "m",
                "--progress", "auto", "--scheduler", "threads") == 0  # not a terminal: one line a pass
    out = capsys.readouterr()
    summary = json.loads(out.out)
    # one progress line per pass: the moments, gamma's sample, the Gram, the calibration
    printed = [line for line in out.err.splitlines() if line.startswith("rfstream: pass ")]
    assert summary["passes"] == len(printed) >= 3 and summary["solver_passes"] <= summary["passes"]


def test_a_search_without_matplotlib_says_why_there_is_no_heat_map(tmp_path, capsys, monkeypatch):
    from rfstream import selection

    monkeypatch.setattr(selection, "have_matplotlib", lambda: False)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    io.write_dataset(tmp_path / "d.zarr", X, X[:, 0], attrs={"task": "regression"})
    assert _run("fit", tmp_path / "d.zarr", "--alpha", "0.1,1", "--n-components", "20", "--out", tmp_path / "m",
                "--scheduler", "threads", "--calibrate", "false") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["report"].startswith("not drawn: the heat map of the search needs matplotlib (pip install")
    assert not (tmp_path / "m" / "cv_heatmap.png").exists()


def test_convert_says_what_it_did(tmp_path, capsys):
    src = tmp_path / "house.csv"
    src.write_text("city,rooms,area,price\nParis,3,,250.5\nLyon,,70,120\n,2,55,99\nLyon,4,90,180.25\n")
    assert _run("convert", src, tmp_path / "h.zarr") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["label"] == {"column": "price", "task": "regression", "range": [99.0, 250.5]}
    assert out["features"] == 4 and out["one_hot"] == {"city": 2}
    assert out["missing_filled"] == {"city": 1, "rooms": 1, "area": 1}  # mean for numbers, zeros for one-hot
    assert io.dataset_info(tmp_path / "h.zarr")["attrs"]["missing_filled"] == out["missing_filled"]


def test_a_default_that_differs_by_task_says_which_task(capsys):
    assert _run("fit", "--help") == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: ridge classifier: error_rate; ridge regressor: squared_error)" in text
    assert "(default: ridge: 1.0; sgd: 0.0001)" in text  # per solver where the task does not matter
