"""A fit whose memory cannot hold is refused before its first pass (rfstream.solvers.memory,
rfstream.features.width): the planned width of every map, and the CLI's and fit_dataset's
one-line refusals with not a task run."""
import dask.array as da
import numpy as np
import pytest
from helpers.tasks import TaskCounter
from sklearn.base import clone

from rfstream import StreamingRidge, StreamingRidgeClassifier, catalog, cli, pipeline
from rfstream.cluster import set_progress
from rfstream.features.width import planned_features
from rfstream.io import write_dataset
from rfstream.solvers import memory
from rfstream.solvers.memory import check_ridge_memory, planned_folds
from rfstream.solvers.targets import planned_targets

GIB = 2**30


@pytest.fixture
def one_gib(monkeypatch):
    """Workers of 1 GiB and one thread, a client of 1 GiB: the Gram pass holds 3 partials
    (128 MiB each at D = 4096, 512 MiB at D = 8192)."""
    monkeypatch.setattr(memory, "worker_memory", lambda: (GIB, 1))
    monkeypatch.setattr(memory, "client_limit", lambda: GIB)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5)
    path = tmp_path_factory.mktemp("plan") / "d.zarr"
    write_dataset(path, X, y, attrs={"classes": ["a", "b", "c"]}, rows_per_chunk=200)
    return path, X, y


@pytest.mark.parametrize("name", sorted(catalog.FEATURES))
def test_the_planned_width_is_the_fitted_width(name, data):
    _, X, y = data
    fmap = catalog.FEATURES[name]()
    params = fmap.get_params()
    # small widths, and CNM's learning cut short (its loop lengths do not change its width)
    small = {"n_components": 40, "n_random_features": 80, "max_iter": 3, "n_steps_w": 10, "n_steps_theta": 10}
    fmap.set_params(**{k: v for k, v in small.items() if k in params})
    width, groups, sparse = planned_features(fmap, X.shape[1])
    fitted = clone(fmap).fit(np.abs(X), y)  # non-negative: the chi-squared maps take histograms
    assert width == fitted._n_features_out
    assert groups == 1 and sparse == fitted._sparse_output


def test_a_grid_plans_one_group_per_gamma_where_it_shares_the_passes():
    rff = catalog.FEATURES["rff"](n_components=30, gamma=[0.1, "auto", "auto*2"])
    assert planned_features(rff, 4) == (30, 3, False)
    tefm = catalog.FEATURES["tefm-s"](n_components=30, gamma=[0.1, 1.0])  # one fit per gamma
    assert planned_features(tefm, 4) == (30, 1, False)
    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    planned_features(catalog.FEATURES["rff"](n_components=30, random_state=gen), 4)
    assert gen.bit_generator.state == state  # the user's generator is not drawn from


def test_planned_targets_and_folds():
    assert planned_targets("classification", ["a", "b"]) == 1
    assert planned_targets("classification", list("abcdefg")) == 7
    assert planned_targets("classification", None) == 1
    assert planned_targets("regression", None, np.zeros((5, 3))) == 3
    assert planned_targets("regression", None, np.zeros(5)) == 1
    from sklearn.model_selection import GroupKFold, KFold

    assert [planned_folds(cv) for cv in (None, 3, "loo", KFold(4), [([0], [1])])] == [5, 3, 1, 4, 1]
    assert planned_folds(GroupKFold(3)) == 3


def test_check_ridge_memory(one_gib):
    check_ridge_memory(StreamingRidge(alpha=1.0), 4096, 1)  # one Gram: 3 x 128 MiB
    with pytest.raises(ValueError, match=r"1 fold\(s\) x D\^2 \(D=8192\).*lower n_components, or use "
                                         r"solver='pcg' \(CLI: --ridge-solver pcg\)"):
        check_ridge_memory(StreamingRidge(alpha=1.0), 8192, 1)
    check_ridge_memory(StreamingRidge(alpha=[0.1, 1.0]), 4096, 1)  # 5 folds do not fit: loo does
    with pytest.raises(ValueError, match=r"5 fold\(s\).*lower cv or n_components, or use cv='loo' "
                                         r"\(CLI: --cv loo\), which needs one Gram"):
        check_ridge_memory(StreamingRidge(alpha=[0.1, 1.0], cv=[([0], [1])] * 5), 4096, 1)
    with pytest.raises(ValueError, match=r"3 gammas x 1 fold\(s\).*lower the number of gammas or n_components"):
        check_ridge_memory(StreamingRidge(alpha=[0.1, 1.0], cv="loo"), 4096, 1, n_groups=3)
    check_ridge_memory(StreamingRidge(alpha=1.0, solver="cg"), 10**6, 1)  # D x T only
    check_ridge_memory(StreamingRidge(alpha=1.0), 10**5, 1, sparse=True)  # auto: CG for wide sparse
    check_ridge_memory(StreamingRidge(alpha=1.0, solver="pcg", pcg_rank=1024), 8192, 1)
    # a list of alphas: (folds + 1) x alphas systems of D x T arrays on the client
    check_ridge_memory(StreamingRidge(alpha=list(np.logspace(-3, 3, 10)), solver="pcg", pcg_rank=1024), 8192, 1)
    with pytest.raises(ValueError, match=r"solver='pcg' with pcg_rank=1024 at D=8192 needs about 1.\d GiB"):
        check_ridge_memory(StreamingRidge(alpha=list(np.logspace(-3, 3, 300)), solver="pcg", pcg_rank=1024), 8192, 1)
    with pytest.raises(ValueError, match=r"solver='pcg' with pcg_rank=8192 at D=8192 needs about 5.\d GiB"):
        check_ridge_memory(StreamingRidgeClassifier(alpha=1.0, solver="pcg", pcg_rank=8192), 8192, 1)
    # "cg" (and "pcg"): the D x P arrays of their systems, P = 26 targets x (5 + 1) folds x 100 alphas
    many = list(np.logspace(-3, 3, 100))
    with pytest.raises(ValueError, match=r"solver='cg' solves 15600 systems together \(targets x alphas x "
                                         r"\(folds \+ 1\)\) of D=4096: about 1.4 GiB per worker"):
        check_ridge_memory(StreamingRidge(alpha=many, solver="cg"), 4096, 26)
    with pytest.raises(ValueError, match=r"solver='cg' solves 48000 systems .* of D=256: about 1.1 GiB on the client"):
        check_ridge_memory(StreamingRidge(alpha=list(range(1, 801)), cv=5, solver="cg"), 256, 10)
    check_ridge_memory(StreamingRidge(alpha=many[:10], solver="cg"), 4096, 26)  # 1,560 systems fit (0.6 GiB on the client)


def test_an_iterative_search_too_big_is_refused_before_a_pass(monkeypatch):
    """The fit checks again with the features' width, before its statistics pass."""
    monkeypatch.setattr(memory, "worker_memory", lambda: (2**19, 1))  # workers of 0.5 MiB
    rng = np.random.default_rng(0)
    X, y = da.from_array(rng.normal(size=(200, 64)), chunks=100), da.from_array(rng.normal(size=200), chunks=100)
    tasks = TaskCounter()
    with tasks, pytest.raises(ValueError, match=r"solver='cg' solves 600 systems together .* of D=64: about "
                                                 r"0.0 GiB per worker, over its 0.0 GiB"):
        StreamingRidge(alpha=list(np.logspace(-3, 3, 100)), solver="cg", cv=5).fit(X, y)
    assert tasks.count == 0
    with tasks:
        StreamingRidge(alpha=list(np.logspace(-3, 3, 2)), solver="cg", cv=5).fit(X, y)  # 12 systems fit
    assert tasks.count > 0


@pytest.mark.parametrize("flags, message", [
    (["--n-components", "8192", "--alpha", "1e-3"], "D=8192) float64 partials: 0.50 GiB per task"),
    (["--features", "tefm-g", "--n-components", "8192", "--n-random-features", "8192", "--alpha", "1"],
     "--ridge-solver pcg"),
    (["--n-components", "4096", "--gamma", "0.1,1,10", "--alpha", "1e-3,0.1", "--cv", "loo"],
     "3 gammas x 1 fold(s) x D^2 (D=4096)"),
    (["--n-components", "8192", "--ridge-solver", "pcg", "--pcg-rank", "8192", "--alpha", "1"],
     "--ridge-solver pcg with --pcg-rank 8192 at D=8192"),
])
def test_the_cli_refuses_before_the_first_pass(data, tmp_path, capsys, one_gib, flags, message):
    tasks = TaskCounter()
    try:
        with tasks:
            code = cli.main(["fit", str(data[0]), "--out", str(tmp_path / "m"), "--scheduler", "threads",
                             "--quiet", *flags])
    finally:
        set_progress(False)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert tasks.count == 0  # not a task ran: not even the standardizer's moments
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.checkpoint").exists()


def test_fit_dataset_refuses_before_the_first_pass(data, one_gib):
    tasks = TaskCounter()
    with tasks, pytest.raises(ValueError, match=r"D=8192.*--ridge-solver pcg"):
        pipeline.fit_dataset(data[0], n_components=8192, alpha=1.0)
    assert tasks.count == 0
    with tasks:  # within the memory: the same call fits
        model, _ = pipeline.fit_dataset(data[0], n_components=64, alpha=1.0)
    assert tasks.count > 0 and model.named_steps["solver"].coef_.shape == (3, 64)
