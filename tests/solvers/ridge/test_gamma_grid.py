"""A bandwidth grid in one pass (rfstream.features.grid, rfstream.solvers.ridge.gram).

The oracles: a map fitted with a list of gammas makes, for each gamma, exactly
the features of the map fitted with that gamma alone (same seed); the grid's
cross-validation equals the explicit loop over the same gammas with the same
folds; and each (gamma, alpha, fold) error rate equals scikit-learn's
RidgeClassifier refitted on the fold's training rows and scored on its held-out
rows.
"""
import json
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.linear_model import RidgeClassifier
from sklearn.pipeline import make_pipeline

import rfstream
from rfstream import (
    RandomBinningFeatures,
    RandomFourierFeatures,
    StreamingRidge,
    StreamingRidgeClassifier,
    StreamingSGDClassifier,
    cli,
    pipeline,
)
from rfstream.features.grid import gamma_items
from rfstream.preprocess import Standardizer
from rfstream.random import STREAM_FOLDS, row_integers

ALPHAS = [0.01, 1.0, 100.0]
GRID = ["auto*0.25", "auto", "auto*4"]


@pytest.fixture(scope="module")
def magic(prepared):
    """4,000 random rows of MAGIC (binary; the file is sorted by class), standardized,
    as dask arrays of 1,000-row chunks."""
    X, y = rfstream.io.open_dataset(prepared("magic_gamma", test=False)[0])
    rows = np.sort(np.random.default_rng(0).permutation(X.shape[0])[:4000])
    X, y = np.asarray(X, dtype=np.float64)[rows], np.asarray(y)[rows]
    X = (X - X.mean(0)) / X.std(0)
    return da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000)


@pytest.fixture(scope="module")
def cpusmall(prepared):
    X, y = rfstream.io.open_dataset(prepared("cpusmall", test=False)[0])
    rows = np.sort(np.random.default_rng(0).permutation(X.shape[0])[:3000])
    X, y = np.asarray(X, dtype=np.float64)[rows], np.asarray(y, dtype=np.float64)[rows]
    X = (X - X.mean(0)) / X.std(0)
    return da.from_array(X, chunks=(750, -1)), da.from_array(y, chunks=750)


@pytest.mark.parametrize("params", [
    {}, {"kernel": "laplacian"}, {"kernel": "cauchy"}, {"sampler": "qmc"}, {"sampler": "orthogonal"},
    {"variant": "cossin"}, {"dtype": "float64"},
])
def test_each_gamma_is_the_map_fitted_alone(params):
    X = np.random.default_rng(0).normal(size=(300, 5))
    items = [0.1, "auto", "auto*2"]
    grid = RandomFourierFeatures(64, gamma=items, random_state=1, **params).fit(X)
    Z = grid.transform(X)
    assert isinstance(Z, da.Array) and Z.shape == (300, 3 * 64)
    for g, item in enumerate(items):
        alone = RandomFourierFeatures(64, gamma=item, random_state=1, **params).fit(X)
        assert grid.gamma_grid_[g] == alone.gamma_
        np.testing.assert_array_equal(grid._grid_maps[g].transform(X), alone.transform(X))
        np.testing.assert_array_equal(np.asarray(Z[:, g * 64:(g + 1) * 64]), alone.transform(X))


def test_binning_pitches_scale_with_gamma():
    X = np.random.default_rng(0).normal(size=(300, 4))
    items = ["auto*0.5", 0.3, "auto*2"]
    grid = RandomBinningFeatures(12, n_bins=32, gamma=items, random_state=2).fit(X)
    for g, item in enumerate(items):
        alone = RandomBinningFeatures(12, n_bins=32, gamma=item, random_state=2).fit(X)
        np.testing.assert_array_equal(grid._grid_maps[g].pitches_, alone.pitches_)
        assert (grid._grid_maps[g].transform(X) != alone.transform(X)).nnz == 0


def _explicit_loop(make_map, Solver, X, y, items, **solver_params):
    fits = [make_pipeline(make_map(item), Solver(alpha=ALPHAS, **solver_params)).fit(X, y) for item in items]
    means = np.concatenate([f[-1].cv_results_["mean_score"] for f in fits])
    return fits, means


@pytest.mark.parametrize("scoring", ["error_rate", "balanced_error", "roc_auc", "squared_error"])
def test_grid_choice_equals_the_explicit_loop_classification(magic, scoring):
    X, y = magic

    def make_map(gamma):
        return RandomFourierFeatures(200, gamma=gamma, random_state=0)

    grid = make_pipeline(make_map(GRID), StreamingRidgeClassifier(alpha=ALPHAS, scoring=scoring)).fit(X, y)
    fits, means = _explicit_loop(make_map, StreamingRidgeClassifier, X, y, GRID, scoring=scoring)
    solver = grid[-1]
    np.testing.assert_allclose(solver.cv_results_["mean_score"], means, rtol=0, atol=1e-12)
    best = int(np.argmax(means) if scoring == "roc_auc" else np.argmin(means))
    chosen = fits[best // len(ALPHAS)]
    assert solver.alpha_ == ALPHAS[best % len(ALPHAS)]
    assert solver.gamma_ == grid[0].gamma_ == chosen[0].gamma_
    assert solver.cv_results_["gamma_label"][best] == GRID[best // len(ALPHAS)]
    # the chosen model is the fit of that gamma and alpha on the same fold partials
    # (a one-element alpha list: the same K-fold pass, summed)
    refit = make_pipeline(make_map(GRID[best // len(ALPHAS)]),
                          StreamingRidgeClassifier(alpha=[solver.alpha_], scoring=scoring))
    refit.fit(X, y)
    np.testing.assert_allclose(solver.coef_, refit[-1].coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(grid.predict(X[:500]).compute(), refit.predict(X[:500]).compute())
    assert solver.n_features_in_ == 200 and grid[0].transform(X).shape == (4000, 200)


@pytest.mark.parametrize("features", ["rff", "binning"])
def test_grid_choice_equals_the_explicit_loop_regression(cpusmall, features):
    X, y = cpusmall

    def make_map(gamma):
        if features == "rff":
            return RandomFourierFeatures(150, gamma=gamma, random_state=0)
        return RandomBinningFeatures(20, n_bins=32, gamma=gamma, random_state=0)

    grid = make_pipeline(make_map(GRID), StreamingRidge(alpha=ALPHAS)).fit(X, y)
    fits, means = _explicit_loop(make_map, StreamingRidge, X, y, GRID)
    np.testing.assert_allclose(grid[-1].cv_results_["mean_score"], means, rtol=1e-10)
    best = int(np.argmin(means))
    assert grid[-1].alpha_ == ALPHAS[best % len(ALPHAS)]
    assert grid[-1].gamma_ == fits[best // len(ALPHAS)][0].gamma_
    np.testing.assert_allclose(grid[-1].cv_mse_, means, rtol=1e-10)


def test_cv_error_rates_equal_a_direct_computation(magic):
    # float64 features: the fold models agree with scikit-learn's to ~1e-12, so every
    # held-out prediction and every error rate is the same.
    X, y = magic
    items, K, seed = [0.05, 0.2], 4, 3
    grid = make_pipeline(RandomFourierFeatures(100, gamma=items, dtype="float64", random_state=0),
                         StreamingRidgeClassifier(alpha=ALPHAS, cv=K, random_state=seed)).fit(X, y)
    Xn, yn = X.compute(), y.compute()
    folds = row_integers(seed, STREAM_FOLDS, 0, Xn.shape[0], K)
    expected = np.zeros((len(items) * len(ALPHAS), K))
    for g, gamma in enumerate(items):
        Z = RandomFourierFeatures(100, gamma=gamma, dtype="float64", random_state=0).fit(Xn).transform(Xn)
        for k in range(K):
            test = folds == k
            for a, alpha in enumerate(ALPHAS):
                model = RidgeClassifier(alpha=alpha, solver="cholesky").fit(Z[~test], yn[~test])
                expected[g * len(ALPHAS) + a, k] = np.mean(model.predict(Z[test]) != yn[test])
    np.testing.assert_allclose(grid[-1].cv_results_["fold_scores"], expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(grid[-1].cv_results_["gamma"], np.repeat(items, len(ALPHAS)))


def test_two_passes_for_any_grid(magic):
    X, y = magic
    reads = []

    def read(block):
        if block.shape[0]:
            reads.append(block.shape[0])
        return block

    counted = X.map_blocks(read, dtype=X.dtype)
    rff = RandomFourierFeatures(64, gamma=[0.02, 0.05, 0.1, 0.2, 0.5, 1.0], random_state=0)
    make_pipeline(rff, StreamingRidgeClassifier(alpha=ALPHAS, calibrate=False)).fit(counted, y)
    assert sum(reads) == 2 * X.shape[0]  # the Gram pass and the scoring pass, 6 gammas x 3 alphas


def test_numpy_input_and_regressor_squared_error_from_one_pass():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=800)
    model = make_pipeline(Standardizer(), RandomFourierFeatures(80, gamma=[0.1, 0.5, 2.0], random_state=0),
                          StreamingRidge(alpha=[0.1, 1.0]))
    model.fit(X, y)
    out = model.predict(X)
    assert isinstance(out, np.ndarray) and out.shape == (800,)
    assert model[-1].gamma_ in (0.1, 0.5, 2.0) and model[1].gamma_ == model[-1].gamma_
    assert not hasattr(model[1], "_grid_maps")


def test_edge_warning_names_the_direction():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] > 0).astype(int)  # a wide kernel and little regularization win
    with pytest.warns(UserWarning, match="gamma=0.001 is the smallest of its grid.*towards smaller gamma"):
        make_pipeline(RandomFourierFeatures(50, gamma=[0.001, 1.0, 30.0], random_state=0),
                      StreamingRidgeClassifier(alpha=[1e-4, 10.0, 1e4])).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # two gammas: no edge to speak of
        make_pipeline(RandomFourierFeatures(50, gamma=[0.001, 1.0], random_state=0),
                      StreamingRidgeClassifier(alpha=1.0)).fit(X, y)


def test_memory_refusal_before_the_pass(monkeypatch):
    import rfstream.solvers.memory as memory

    monkeypatch.setattr(memory, "worker_memory", lambda: (2**26, 2))  # 64 MiB: the ratios of D = 2000 to 1 GiB at D = 500
    X = np.random.default_rng(0).normal(size=(100, 3))
    y = np.arange(100) % 2
    model = make_pipeline(RandomFourierFeatures(6000, gamma=[0.1, 1.0, 10.0]), StreamingRidgeClassifier())
    with pytest.raises(ValueError, match=r"3 gammas x 5 fold\(s\) x D\^2 \(D=6000\).*4.02 GiB per task.*lower "
                                         r"the number of gammas, cv or n_components \(or"):
        model.fit(X, y)
    # 3 x 5 Grams of D=500 do not fit 64 MiB, 3 x 1 do: exact leave-one-out instead
    model = make_pipeline(RandomFourierFeatures(500, gamma=[0.1, 1.0, 10.0]), StreamingRidgeClassifier())
    with pytest.warns(UserWarning, match="using exact leave-one-out from one Gram"):
        model.fit(X, y)
    assert model[-1].cv_results_["cv"] == "loo"


@pytest.mark.parametrize("gamma, match", [
    ([], "gamma is an empty grid"),
    (["auto", ""], "gamma grid item 2 is empty"),
    ([0.1, -1.0], r"gamma grid item 2 \(-1.0\): gamma must be a finite number > 0"),
    (["auto*x"], r"gamma grid item 1 \('auto\*x'\): 'auto\*' needs a finite number > 0"),
    ("auto*0", r"'auto\*' needs a finite number > 0"),
    (["wide"], r"gamma grid item 1 \('wide'\) is not a number, 'auto' or 'auto\*F'"),
])
def test_bad_grids(gamma, match):
    with pytest.raises(ValueError, match=match):
        RandomFourierFeatures(10, gamma=gamma).fit(np.zeros((5, 2)))


def test_grid_refused_where_it_cannot_be_searched():
    X = np.random.default_rng(0).normal(size=(100, 3))
    y = np.arange(100) % 2
    with pytest.raises(ValueError, match="NystroemFeatures takes one gamma, not a grid"):
        rfstream.datadriven.NystroemFeatures(10, gamma=[0.1, 1.0]).fit(X)
    with pytest.raises(ValueError, match="StreamingSGDClassifier takes the features of one gamma"):
        make_pipeline(RandomFourierFeatures(10, gamma=[0.1, 1.0]), StreamingSGDClassifier()).fit(X, y)
    with pytest.raises(ValueError, match="searched by cross-validation of the ridge solver"):
        pipeline.check_model(pipeline.make_model("classification", solver="sgd",
                                                 feature_params={"gamma": [0.1, 1.0]}), 3)


def test_data_driven_map_one_fit_per_gamma(magic):
    X, y = magic
    X, y = X[::2], y[::2]
    items = ["auto*0.5", "auto*2"]
    model = pipeline.make_model("classification", features="tefm-g",
                                feature_params={"n_components": 40, "gamma": items, "random_state": 0},
                                solver_params={"alpha": [0.1, 10.0]})
    fitted, meta = pipeline.fit_dataset("magic", model=model, X=X, y=y, attrs={"task": "classification"})
    loop = []
    for item in items:
        single = pipeline.make_model("classification", features="tefm-g",
                                     feature_params={"n_components": 40, "gamma": item, "random_state": 0},
                                     solver_params={"alpha": [0.1, 10.0]}).fit(X, y)
        loop.append(single.named_steps["solver"].cv_results_["mean_score"])
    means = np.concatenate(loop)
    solver = fitted.named_steps["solver"]
    np.testing.assert_allclose(solver.cv_results_["mean_score"], means, rtol=0, atol=1e-12)
    assert solver.cv_results_["gamma_label"] == [items[0], items[0], items[1], items[1]]
    assert meta["selection"]["alpha"] == solver.alpha_ == [0.1, 10.0][int(np.argmin(means)) % 2]
    assert meta["selection"]["gamma"] == fitted.named_steps["features"].gamma_


def test_cli_grid_summary_metadata_and_heat_map(tmp_path, prepared, capsys):
    data = prepared("magic_gamma", test=False)[0]
    out = tmp_path / "model"
    code = cli.main(["fit", str(data), "--out", str(out), "--n-components", "100", "--gamma",
                     "auto*0.25,auto,auto*4", "--alpha", "0.1,10", "--scheduler", "threads", "--progress",
                     "never"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cv"]["gamma_label"] == [g for g in GRID for _ in range(2)]
    assert len(summary["cv"]["mean_score"]) == len(summary["cv"]["std_score"]) == 6
    best = int(np.argmin(summary["cv"]["mean_score"]))
    assert summary["alpha"] == summary["cv"]["alpha"][best] and summary["gamma"] == summary["cv"]["gamma"][best]
    assert summary["report"] == str(out / "cv_heatmap.png")
    assert (out / "cv_heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = rfstream.io.read_model_json(out)["metadata"]["selection"]
    assert meta["cv"] == {k: summary["cv"][k] for k in meta["cv"]} and meta["gamma"] == summary["gamma"]
    model = rfstream.load_model(out)
    assert model.named_steps["features"].gamma_ == summary["gamma"]


@pytest.mark.parametrize("gamma, match", [
    ("auto,,2", "gamma grid item 2 is empty"),
    ("auto*x", r"'auto\*' needs a finite number > 0"),
    ("0.1,-2", "gamma grid item 2"),
])
def test_cli_bad_grid_one_line(tmp_path, prepared, capsys, gamma, match):
    data = prepared("magic_gamma", test=False)[0]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["fit", str(data), "--out", str(tmp_path / "m"), "--gamma", gamma])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and pytest.importorskip("re").search(match, err)
    assert not (tmp_path / "m").exists()


def test_cli_report_needs_matplotlib(tmp_path, prepared, capsys, monkeypatch):
    from rfstream import selection

    monkeypatch.setattr(selection, "have_matplotlib", lambda: False)
    data = prepared("magic_gamma", test=False)[0]
    code = cli.main(["fit", str(data), "--out", str(tmp_path / "m"), "--alpha", "1,2", "--report"])
    assert code == 2 and "pip install 'rfstream[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_items_parse():
    assert gamma_items("auto") == (["auto"], False)
    assert gamma_items("auto*0.5,2") == ([("auto", 0.5), 2.0], True)
    assert gamma_items(np.array([0.5, 1.0])) == ([0.5, 1.0], True)
