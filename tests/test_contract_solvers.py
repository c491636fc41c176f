"""The contract of every solver of :data:`rfstream.catalog.SOLVERS`, for both tasks, and of
kernel PCA: the solvers' half of the contract suite (tests/test_contract.py holds the
feature maps' half and explains the contract and its tolerances; the cases are in
tests/helpers/contract_cases.py)."""
from __future__ import annotations

import dask.array as da
import distributed
import numpy as np
import pytest
from helpers.contract_cases import (
    CHUNKINGS,
    EXACT,
    PREDICTORS,
    SOLVER_CASES,
    SOLVER_CHECKS,
    SOLVER_IDS,
    SOLVER_PARAMS,
    D,
    N,
    assert_same_fit,
    assert_text_columns_refused,
    assert_unknown_columns_refused,
    fitted_state,
    make_map,
    make_solver,
    on_dask,
    text_frame,
    two_process_cluster,
)
from helpers.contract_data import contract_data
from sklearn.base import is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from rfstream import load_model, save_model
from rfstream.catalog import SOLVERS, TASKS
from rfstream.cluster import connect
from rfstream.solvers.kpca import KernelPCA


@pytest.fixture(scope="module")
def data():
    """240 rows, 5 columns; three imbalanced classes that depend on products of the inputs."""
    return contract_data(N, D)


@pytest.fixture(scope="module")
def cluster():
    """One real LocalCluster for the module: 2 single-threaded worker processes."""
    with two_process_cluster() as c:
        yield c


# ================================================================== solvers
@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_every_solver_and_task_has_a_case(solver, task):
    assert set(SOLVER_PARAMS) == set(PREDICTORS) and set(TASKS) == set(PREDICTORS[solver])
    assert set(SOLVERS) - set(PREDICTORS) == {"kpca"}
    est = make_solver(solver, task)
    assert (is_classifier(est), is_regressor(est)) == (task == "classification", task == "regression")


def _y(data, task):
    X, y_class, y_reg = data
    return X, (y_class if task == "classification" else y_reg)


def _assert_same_predictions(pred, ref, task, rtol=1e-12):
    if task == "classification":
        np.testing.assert_array_equal(pred, ref)
    else:
        np.testing.assert_allclose(pred, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


#: fitted arrays of a dask fit vs a numpy fit: ridge sums the same float64 partials in
#: another order (1e-13 relative, times the condition number); SGD on one chunk runs
#: exactly the numpy computation (one block of NUMPY_BLOCK rows)
SOLVER_TOL = {"ridge": dict(rtol=1e-10, atol=1e-12), "sgd": EXACT}


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_numpy_in_numpy_out_dask_in_lazy_dask_out(data, solver, task):
    X, y = _y(data, task)
    ref = make_solver(solver, task).fit(X, y)
    est = make_solver(solver, task).fit(*on_dask(X, y, ((N,), (D,))))
    assert_same_fit(est, ref, **SOLVER_TOL[solver])
    pred = ref.predict(X)
    assert isinstance(pred, np.ndarray) and pred.shape == (N,)
    Xd = da.from_array(X, chunks=(60, D))
    lazy = est.predict(Xd)
    assert isinstance(lazy, da.Array) and lazy.chunks == (Xd.chunks[0],)
    assert lazy.dtype == pred.dtype
    assert lazy.name == est.predict(Xd).name  # deterministic graph name
    _assert_same_predictions(lazy.compute(), pred, task)


#: solver="sgd" averages per-chunk SGD runs, so its model depends on the chunking by
#: design (docs/sgd.md; test_sgd.py::test_chunking_changes_the_model_but_not_its_quality);
#: its Newton solver is a sum over all rows and is chunk-invariant.  The regressor has
#: no Newton solver.
CHUNK_INVARIANT = [("ridge", "classification", {}), ("ridge", "regression", {}),
                   ("sgd", "classification", dict(solver="newton", loss="log_loss", tol=1e-10,
                                                  max_iter=30))]


@pytest.mark.parametrize("solver, task, params", CHUNK_INVARIANT,
                         ids=["ridge-classification", "ridge-regression", "sgd-newton-classification"])
def test_solver_fit_on_any_chunking_equals_numpy(data, solver, task, params):
    # Newton: the same float64 sums in another order, to its tol 1e-10 (1e-8 relative)
    X, y = _y(data, task)
    ref = make_solver(solver, task, **params).fit(X, y)
    tol = SOLVER_TOL["ridge"] if solver == "ridge" else dict(rtol=1e-8, atol=1e-10)
    for chunks in CHUNKINGS:
        est = make_solver(solver, task, **params).fit(*on_dask(X, y, chunks))
        for attr in ("coef_", "intercept_"):
            np.testing.assert_allclose(getattr(est, attr), getattr(ref, attr), **tol, err_msg=attr)
        _assert_same_predictions(est.predict(da.from_array(X, chunks=chunks)).compute(),
                                 ref.predict(X), task, rtol=1e-8)


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_deterministic_in_random_state(data, solver, task):
    X, y = _y(data, task)
    Xd, yd = on_dask(X, y, ((60,) * 4, (D,)))
    a, b, c = (fitted_state(make_solver(solver, task, random_state=rs).fit(Xd, yd)) for rs in (3, 3, 4))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # other CV folds (ridge) or another row order (SGD)
    assert any(not np.array_equal(a[key], c[key]) for key in a)


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_threads_equal_processes(data, solver, task, cluster):
    # the same float64 partials summed in the same tree; 1e-10 allows for BLAS
    # differences between processes (none seen)
    X, y = _y(data, task)
    Xd, yd = on_dask(X, y, ((60,) * 4, (D,)))
    with connect("threads"):
        ref = make_solver(solver, task).fit(Xd, yd)
        pred_ref = ref.predict(Xd).compute()
    with distributed.Client(cluster) as client:
        est = make_solver(solver, task).fit(Xd, yd)
        pred = est.predict(Xd).compute()
        assert len(client.scheduler_info()["workers"]) == 2
    assert_same_fit(est, ref, rtol=1e-10, atol=1e-12)
    _assert_same_predictions(pred, pred_ref, task, rtol=1e-10)


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_save_load_round_trip(data, solver, task, tmp_path):
    X, y = _y(data, task)
    est = make_solver(solver, task).fit(X, y)
    loaded = load_model(save_model(est, tmp_path / "model"))
    assert type(loaded) is type(est) and loaded.get_params() == est.get_params()
    assert_same_fit(loaded, est)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    Xd = da.from_array(X, chunks=(60, D))
    np.testing.assert_array_equal(loaded.predict(Xd).compute(), est.predict(Xd).compute())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
# scikit-learn's checks fit Newton's default 20 passes on data it cannot separate: the warning by design
@pytest.mark.filterwarnings("ignore:Newton stopped after max_iter=.*:UserWarning")
@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_check_estimator(solver, task):
    # the estimators' own defaults, as a user makes them
    check_estimator(PREDICTORS[solver][task](), expected_failed_checks=SOLVER_CHECKS.get((solver, task), {}))


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_bad_input(data, solver, task):
    X, y = _y(data, task)
    cls = type(make_solver(solver, task)).__name__
    for X_in in (X, da.from_array(X, chunks=60)):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            make_solver(solver, task).predict(X_in)
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        make_solver(solver, task).fit(X[:, 0], y)
    with pytest.raises(ValueError, match=r"Expected a 2-d dask array for X; got ndim=1"):
        make_solver(solver, task).fit(da.from_array(X[:, 0], chunks=60), da.from_array(y, chunks=60))
    assert_unknown_columns_refused(make_solver(solver, task), X, y)
    X_nan = X.copy()
    X_nan[7, 2] = np.nan
    with pytest.raises(ValueError, match=f"Input X contains NaN.\n{cls} does not accept missing values"):
        make_solver(solver, task).fit(X_nan, y)
    with pytest.raises(ValueError, match=r"X has 240 rows but y has 200; pass one target per row"):
        make_solver(solver, task).fit(da.from_array(X, chunks=60), y[:200])
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[240, 200\]"):
        make_solver(solver, task).fit(X, y[:200])
    est = make_solver(solver, task).fit(X, y)
    wrong = f"X has 4 features, but {cls} is expecting 5 features as input"
    with pytest.raises(ValueError, match=wrong):
        est.predict(X[:, :4])
    with pytest.raises(ValueError, match=wrong):
        est.predict(da.from_array(X[:, :4], chunks=60))
    if task == "classification":
        with pytest.raises(ValueError, match="at least 2 classes"):
            make_solver(solver, task).fit(X, np.zeros(N, dtype=int))
        with pytest.raises(ValueError, match="at least 2 classes"):
            make_solver(solver, task).fit(da.from_array(X, chunks=60), da.zeros(N, chunks=60, dtype=int))


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_refuses_nan_in_dask_input(data, solver, task):
    X, y = _y(data, task)
    X_nan = X.copy()
    X_nan[7, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        make_solver(solver, task).fit(da.from_array(X_nan, chunks=60), da.from_array(y, chunks=60))


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_refuses_text_columns_of_a_dask_dataframe(data, solver, task):
    X, y = _y(data, task)
    assert_text_columns_refused(make_solver(solver, task), X, y)
    fitted = make_solver(solver, task).fit(X, y)
    with pytest.raises(ValueError, match=r"non-numeric column\(s\): 'city'"):
        fitted.predict(text_frame(X[:, :-1]))


# ================================================================== kernel PCA (a transformer)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_kpca_check_estimator():
    check_estimator(KernelPCA())


def test_kpca_then_ridge_pipeline_numpy_dask_threads_processes_and_files(data, cluster, tmp_path):
    # rff -> KernelPCA -> ridge: the transformer in the middle keeps every contract of a step
    from sklearn.pipeline import make_pipeline

    X, y, _ = data

    def model():
        return make_pipeline(make_map("rff"), KernelPCA(4), make_solver("ridge", "classification"))

    ref = model().fit(X, y)
    Xd, yd = on_dask(X, y, ((60,) * 4, (D,)))
    with connect("threads"):
        est = model().fit(Xd, yd)
    np.testing.assert_allclose(est[1].components_, ref[1].components_, rtol=1e-5, atol=1e-6)
    lazy = est.predict(Xd)
    assert isinstance(lazy, da.Array) and lazy.chunks == (Xd.chunks[0],)
    np.testing.assert_array_equal(lazy.compute(), est.predict(X))
    with distributed.Client(cluster):
        far = model().fit(Xd, yd)
    np.testing.assert_allclose(far[1].components_, est[1].components_, rtol=1e-10, atol=1e-12)
    loaded = load_model(save_model(est, tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded[1].transform(loaded[0].transform(X)), est[1].transform(est[0].transform(X)))
