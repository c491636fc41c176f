"""The contract every feature map and solver keeps (DESIGN.md, "Contracts"), written once.

As scipy's shared QMC tests give every engine the same invariant tests, each test
here runs over every map of :data:`rfstream.pipeline.FEATURES` (the partials
``tefm-g``/``tefm-s`` included), the maps outside the registry (Fastfood, compact
maps) and every solver of :data:`rfstream.pipeline.SOLVERS` for both tasks:

* numpy in -> numpy out; dask in -> lazy dask out with the input's row chunks,
  explicit meta and a deterministic graph name; fitting on dask equals fitting on
  numpy, whatever the chunking (empty chunks and split columns included);
* the same ``random_state`` gives the same result, another one a different one;
* threads and a real distributed LocalCluster (2 worker processes) give the same model;
* ``save_model``/``load_model`` gives back the same transform and predictions;
* scikit-learn's ``check_estimator`` with the estimators' default parameters;
* bad input fails with a ``ValueError``/``TypeError`` that names the problem.

The per-method files keep what is particular to a method: its mathematics, the
paper's claims, accuracy floors.  A map or solver added to a registry is tested
here without a line more than its small parameters in :data:`MAP_PARAMS`.

Tolerances.  Within one process the same fitted map gives the same features on
numpy and dask up to float32 GEMM rounding, which OpenBLAS makes depend on the
number of rows of a block (1 ulp ~ 6e-8 relative of arguments and features of
order 1): ``atol=1e-6`` as the per-map tests always used, relative for the
unbounded arc-cosine features, exact for binning.  A map fitted by a reduction
(TEFM) sums float32 products in another grouping for another chunking: its Q
moves by ~1e-6, bounded by ``atol=2e-5``; EERF/LKRF scores are float32 feature
sums (1e-6 relative); every other fitted array is drawn from the seed alone or
from rows gathered by index and must be identical.
"""
from __future__ import annotations

from functools import partial

import dask.array as da
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from _contract_data import contract_data
from _sklearn_checks import FLOAT32_ROW_GROUPING
from sklearn.base import BaseEstimator, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import (
    check_estimator,
    check_methods_sample_order_invariance,
    check_methods_subset_invariance,
)

import rfstream
from rfstream import Standardizer, load_model, save_model
from rfstream.cluster import connect
from rfstream.features import CompactRandomFeatures, FastfoodFeatures
from rfstream.pipeline import FEATURES, SOLVERS, TASKS
from rfstream.solvers.kpca import KernelPCA

#: the predicting solvers, one estimator per task (a transformer entry, kpca, is one class:
#: its contract is test_kpca_* below)
PREDICTORS = {name: entry for name, entry in SOLVERS.items() if isinstance(entry, dict)}

# ------------------------------------------------------------------ the cases
#: CNM's loop lengths cut short: its defaults (200 rounds of 100 + 100 SGD steps) are the
#: paper's, and a fit on a toy set takes 0.5 s of them (62 s of check_estimator's fits)
CNM_SHORT = {"max_iter": 3, "n_steps_w": 10, "n_steps_theta": 10}
CNM_FAST = {**CNM_SHORT, "batch_size": 100}

#: small parameters for each registered map (random_state is set by the tests)
MAP_PARAMS = {
    "rff": dict(n_components=16, gamma=0.5),
    "tefm-g": dict(n_components=8, gamma=0.3),
    "tefm-s": dict(n_components=8, gamma=0.3),
    "eerf": dict(n_components=8, subsample=0.5, gamma=0.3),
    "lkrf": dict(n_components=8, subsample=0.5, gamma=0.3),
    "arccos": dict(n_components=16),
    "ses": dict(n_components=8, gamma=0.3, n_pairs=100),
    "binning": dict(n_grids=6, n_bins=16, gamma=1.0),
    "rff+binning": dict(n_components=8, n_grids=4, n_bins=8, gamma=1.0),
    "cnm": dict(n_components=6, **CNM_FAST),
    "circulant": dict(n_components=12, gamma=0.5),
    "nystroem": dict(n_components=12, gamma=0.3),
    "polysketch": dict(n_components=16, degree=2, coef0=1.0),
    "chi2": dict(sample_steps=2),
    "skewed-chi2": dict(n_components=16, skewedness=1.0),
}
#: maps outside the registry (baselines of the papers)
OTHER_MAPS = {
    "fastfood": (FastfoodFeatures, dict(n_components=16, gamma=0.3)),
    "compact": (CompactRandomFeatures, dict(n_components=8, gamma=0.3)),
}
MAPS = sorted(FEATURES) + sorted(OTHER_MAPS)

#: fitted arrays of a fit on dask vs one on numpy, or on another chunking (module docstring)
FIT_TOL = {
    "tefm-g": dict(rtol=0, atol=2e-5),
    "tefm-s": dict(rtol=0, atol=2e-5),
    "eerf": dict(rtol=1e-5, atol=1e-7),
    "lkrf": dict(rtol=1e-5, atol=1e-7),
}
EXACT = dict(rtol=0, atol=0)
#: the same fitted map on numpy and on dask (float32 GEMM rounding, module docstring):
#: features bounded by ~1 (cosines times sqrt(2 / D), and projections of them)
OUT_TOL = dict(rtol=0, atol=1e-6)
#: per map: arc-cosine features grow with |x' w|^degree (relative rounding); the hybrid's
#: Fourier half is Laplacian, whose Cauchy frequencies make arguments x'w of ~100, rounded
#: to ~1e-5 in float32 (measured: 1.3e-6 on a feature); binning has no arithmetic on the
#: way to a feature (a bin is floor((x - u) / delta)): exact
OUT_TOLS = {"arccos": dict(rtol=1e-5, atol=1e-6), "rff+binning": dict(rtol=0, atol=1e-5),
            "binning": EXACT}


#: maps whose sparse input gives sparse output (dense input, dense output)
KEEPS_SPARSE = {"chi2"}


def out_tol(name):
    return OUT_TOLS.get(name, OUT_TOL)


#: check_estimator runs on every map with its DEFAULT parameters (as a user makes it), but
#: for CNM's loop lengths (CHECK_PARAMS: the API is the same at any length); its
#: expected failures, per map, only where a check's premise does not hold.  The float32
#: maps' outputs go through a float32 GEMM (or FFT), which rounds a row by 1 ulp
#: differently in another batch (FLOAT32_ROW_GROUPING): the two checks that compare
#: batches at rtol 1e-7 then run on the float64 map (test_map_row_grouping_checks_in_float64)
CHECKS = {
    "rff": FLOAT32_ROW_GROUPING,
    "tefm-g": FLOAT32_ROW_GROUPING,
    "tefm-s": FLOAT32_ROW_GROUPING,
    "eerf": FLOAT32_ROW_GROUPING,
    "lkrf": FLOAT32_ROW_GROUPING,
    "arccos": FLOAT32_ROW_GROUPING,
    "ses": FLOAT32_ROW_GROUPING,
    "binning": {},  # sparse output: no arithmetic on the way to a feature, exact
    "rff+binning": FLOAT32_ROW_GROUPING,  # the Fourier half
    "cnm": {},  # its phases are float64 whatever dtype (cnm.py, _features64)
    "circulant": FLOAT32_ROW_GROUPING,
    "nystroem": {},  # no float32 rounding to excuse: the block is float64, rounded once
    "polysketch": {},  # count sketches and FFTs in float64, rounded once
    "chi2": {},  # deterministic, float64, rounded once
    "skewed-chi2": FLOAT32_ROW_GROUPING,  # a float32 GEMM, as rff
    "fastfood": FLOAT32_ROW_GROUPING,
    "compact": FLOAT32_ROW_GROUPING,
}
#: the only parameters check_estimator's maps do not take at their defaults (CHECKS above)
CHECK_PARAMS = {"cnm": CNM_SHORT}

#: small parameters for each solver (an alpha list: the CV folds use random_state; the
#: SGD steps, which solver="auto" would replace by Newton passes on 5 columns)
SOLVER_PARAMS = {"ridge": dict(alpha=[0.1, 1.0]), "sgd": dict(alpha=1e-3, max_iter=3, solver="sgd")}
SOLVER_CASES = [(s, t) for s in sorted(PREDICTORS) for t in TASKS]
SOLVER_IDS = [f"{s}-{t}" for s, t in SOLVER_CASES]
SOLVER_CHECKS = {}

N, D = 240, 5
#: row chunkings of the N rows (with the column chunks): one block, equal blocks,
#: a one-row and an empty block, and column chunks that the estimators merge
CHUNKINGS = [((N,), (D,)), ((60,) * 4, (D,)), ((1, 99, 0, 140), (D,)), ((37,) * 6 + (18,), (2, 3))]


@pytest.fixture(scope="module")
def data():
    """240 rows, 5 columns; three imbalanced classes that depend on products of the inputs."""
    return contract_data(N, D)


@pytest.fixture(scope="module")
def cluster():
    """One real LocalCluster for the module: 2 single-threaded worker processes."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as c:
        yield c


# ------------------------------------------------------------------ helpers
def map_class(name):
    """The factory of the map ``name`` (a class, or a ``partial`` of one)."""
    return FEATURES[name] if name in FEATURES else OTHER_MAPS[name][0]


def make_map(name, **overrides):
    """The map ``name`` with its small parameters, random_state=0 unless overridden (a map
    without randomness, the additive chi-squared map, has no random_state)."""
    factory, params = (FEATURES[name], MAP_PARAMS[name]) if name in FEATURES else OTHER_MAPS[name]
    seeded = "random_state" in factory().get_params()
    return factory(**{**params, **({"random_state": 0} if seeded else {}), **overrides})


def is_seeded(name):
    return "random_state" in map_class(name)().get_params()


def map_data(data, name):
    """``(X, y)`` for the map ``name``: the contract's rows, their absolute values for a map
    of histograms (its declared ``input_floor``: the chi-squared maps)."""
    X, y, _ = data
    return (np.abs(X) if hasattr(map_class(name)(), "input_floor") else X), y


def make_solver(name, task, **overrides):
    """The solver ``name`` for ``task`` with its small parameters, random_state=0 unless overridden."""
    return PREDICTORS[name][task](**{**SOLVER_PARAMS[name], "random_state": 0, **overrides})


def needs_y(est):
    return est.__sklearn_tags__().target_tags.required


def on_dask(X, y, chunks):
    """``X`` and ``y`` as dask arrays with the given (rows, columns) chunks."""
    return da.from_array(X, chunks=chunks), da.from_array(y, chunks=(chunks[0],))


def dense(Z):
    return Z.toarray() if sp.issparse(Z) else np.asarray(Z)


def fitted_state(est, prefix=""):
    """Every fitted numeric attribute (``name_``), sub-estimators' included, as arrays."""
    out = {}
    for key, value in vars(est).items():
        if not key.endswith("_") or key.startswith("_"):
            continue
        if isinstance(value, BaseEstimator):
            out.update(fitted_state(value, f"{prefix}{key}."))
            continue
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):  # ragged lists
            continue
        if arr.dtype.kind in "biuf":
            out[prefix + key] = arr
    return out


def assert_same_fit(est, ref, rtol=0, atol=0):
    a, b = fitted_state(est), fitted_state(ref)
    assert a.keys() == b.keys()
    assert a, "no fitted arrays to compare"
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=rtol, atol=atol, err_msg=key)


def assert_same_output(Z, ref, tol):
    assert Z.shape == ref.shape and sp.issparse(Z) == sp.issparse(ref)
    np.testing.assert_allclose(dense(Z), dense(ref), **tol)


# ================================================================== feature maps
def test_every_registered_map_has_a_case():
    assert set(MAP_PARAMS) == set(FEATURES) and set(CHECKS) == set(MAPS)
    # the labelled maps are recognised (they get y in every test)
    assert {name for name in MAPS if needs_y(make_map(name))} == {"cnm", "eerf", "lkrf"}


@pytest.mark.parametrize("name", MAPS)
def test_map_numpy_in_numpy_out_dask_in_lazy_dask_out(data, name):
    X, y = map_data(data, name)
    est = make_map(name).fit(X, y)
    Z = est.transform(X)
    sparse = est._sparse_output
    assert isinstance(Z, sp.csr_matrix if sparse else np.ndarray)
    assert Z.dtype == np.float32 and Z.shape == (N, est._n_features_out)
    Xd = da.from_array(X, chunks=(60, D))
    Zd = est.transform(Xd)
    assert isinstance(Zd, da.Array)
    assert Zd.chunks == (Xd.chunks[0], (Z.shape[1],))  # one output block per row block
    assert Zd.dtype == np.float32
    assert type(Zd._meta) is (sp.csr_matrix if sparse else np.ndarray) and Zd._meta.ndim == 2
    assert Zd.name == est.transform(Xd).name  # deterministic graph name
    if is_seeded(name):
        assert Zd.name != make_map(name, random_state=1).fit(X, y).transform(Xd).name
    assert_same_output(Zd.compute(), Z, out_tol(name))


@pytest.mark.parametrize("name", MAPS)
def test_map_transform_is_lazy(data, name):
    X, y = map_data(data, name)
    est = make_map(name).fit(X, y)

    def boom(block):
        raise RuntimeError("data was read")

    Z = est.transform(da.from_array(X, chunks=(60, D)).map_blocks(boom, dtype=X.dtype))
    assert Z.shape == (N, est._n_features_out) and Z.numblocks == (4, 1)
    with pytest.raises(RuntimeError, match="data was read"):
        Z.compute()


@pytest.mark.parametrize("name", MAPS)
def test_map_fit_on_any_chunking_equals_numpy(data, name):
    X, y = map_data(data, name)
    ref = make_map(name).fit(X, y)
    for chunks in CHUNKINGS:
        Xd, yd = on_dask(X, y, chunks)
        est = make_map(name).fit(Xd, yd)
        assert_same_fit(est, ref, **FIT_TOL.get(name, EXACT))
        Zd = est.transform(Xd)
        assert Zd.chunks[0] == chunks[0] and Zd.numblocks[1] == 1  # column chunks merged
        assert_same_output(Zd.compute(), est.transform(X), out_tol(name))


@pytest.mark.parametrize("name", MAPS)
def test_map_sparse_input_equals_dense(data, name):
    X, y = map_data(data, name)
    est = make_map(name).fit(X, y)
    Zs = est.transform(sp.csr_matrix(X))
    if name in KEEPS_SPARSE:  # sparse in, sparse out (as scikit-learn's)
        assert sp.issparse(Zs)
        Zs = Zs.toarray()
    assert_same_output(Zs, est.transform(X), out_tol(name))
    # gamma="auto" measures distances between sparse rows in another order: 1e-16 relative
    assert_same_fit(make_map(name).fit(sp.csr_matrix(X), y), est, **FIT_TOL.get(name, dict(rtol=1e-12, atol=0)))


@pytest.mark.parametrize("name", MAPS)
def test_map_dtype(data, name):
    X, y = map_data(data, name)
    est = make_map(name, dtype="float64").fit(X, y)
    assert est.transform(X).dtype == np.float64
    assert est.transform(X.astype(np.float32)).dtype == np.float64
    assert est.transform(da.from_array(X, chunks=(60, D))).dtype == np.float64
    assert make_map(name).fit(X.astype(np.float32), y).transform(X).dtype == np.float32


@pytest.mark.parametrize("name", MAPS)
def test_map_deterministic_in_random_state(data, name):
    X, y = map_data(data, name)
    if not is_seeded(name):  # nothing drawn: the same map whatever the seed would be
        assert_same_output(make_map(name).fit(X, y).transform(X), make_map(name).fit(X, y).transform(X), EXACT)
        return
    Xd, yd = on_dask(X, y, ((60,) * 4, (D,)))
    fits = [make_map(name, random_state=rs).fit(Xd, yd) for rs in (3, 3, 4)]
    a, b, c = (dense(est.transform(X)) for est in fits)
    assert_same_fit(fits[1], fits[0])  # every fitted array, bit for bit
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("name", MAPS)
def test_map_threads_equal_processes(data, name, cluster):
    # same chunks, same reduction tree: only where a task runs differs; the chunk
    # functions pickle, and the fit is numpy's (within FIT_TOL)
    X, y = map_data(data, name)
    Xd, yd = on_dask(X, y, ((60,) * 4, (D,)))
    with connect("threads"):
        ref = make_map(name).fit(Xd, yd)
        Z_ref = ref.transform(Xd).compute()
    with distributed.Client(cluster) as client:
        est = make_map(name).fit(Xd, yd)
        Z = est.transform(Xd).compute()
        assert len(client.scheduler_info()["workers"]) == 2
    tol = FIT_TOL.get(name, EXACT)
    assert_same_fit(est, ref, **tol)
    assert_same_fit(est, make_map(name).fit(X, y), **tol)
    assert_same_output(Z, Z_ref, out_tol(name))
    assert_same_output(Z, est.transform(X), out_tol(name))


@pytest.mark.parametrize("name", MAPS)
def test_map_save_load_round_trip(data, name, tmp_path):
    X, y = map_data(data, name)
    est = make_map(name).fit(X, y)
    loaded = load_model(save_model(est, tmp_path / "model"))
    assert type(loaded) is type(est) and loaded.get_params() == est.get_params()
    assert_same_fit(loaded, est)  # bit for bit
    # and in the same memory layout: TEFM's Q comes from scipy's QR in Fortran order, and the
    # same Q in C order makes OpenBLAS sum ``f @ Q`` in another order (features off by ulps)
    a, b = fitted_state(loaded), fitted_state(est)
    for key in a:
        assert (a[key].flags.c_contiguous, a[key].flags.f_contiguous) == \
            (b[key].flags.c_contiguous, b[key].flags.f_contiguous), key
    assert_same_output(loaded.transform(X), est.transform(X), EXACT)
    Xd = da.from_array(X, chunks=(60, D))
    assert_same_output(loaded.transform(Xd).compute(), est.transform(Xd).compute(), EXACT)
    if hasattr(est, "predict"):  # CNM is also a classifier
        np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
@pytest.mark.parametrize("name", MAPS)
def test_map_check_estimator(name):
    # the map's own defaults, as a user makes it (a registry partial fixes only the method)
    check_estimator(map_class(name)(**CHECK_PARAMS.get(name, {})), expected_failed_checks=CHECKS[name])


@pytest.mark.parametrize("name", [name for name in MAPS if CHECKS[name] == FLOAT32_ROW_GROUPING])
def test_map_row_grouping_checks_in_float64(name):
    # what FLOAT32_ROW_GROUPING excuses in float32 must hold exactly enough in float64
    est = map_class(name)(dtype="float64")
    check_methods_sample_order_invariance(type(est).__name__, est)
    check_methods_subset_invariance(type(est).__name__, est)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_standardizer_check_estimator():
    check_estimator(Standardizer())


def test_every_public_estimator_is_checked():
    # every estimator class the package exports meets check_estimator above
    checked = {type(map_class(name)()) for name in MAPS} | {Standardizer}
    checked |= {cls for tasks in PREDICTORS.values() for cls in tasks.values()} | {KernelPCA}
    exported = {obj for obj in map(partial(getattr, rfstream), rfstream.__all__)
                if isinstance(obj, type) and issubclass(obj, BaseEstimator)}
    assert exported <= checked, exported - checked


def _text_frame(X):
    """A dask DataFrame of X with a text column (DataFrames are accepted: tests/test_dataframes.py)."""
    return dd.from_pandas(pd.DataFrame(X).assign(city="Paris"), npartitions=2)


def _assert_text_columns_refused(est, X, y):
    # a DataFrame is converted lazily, but a text column must be encoded first; the message names it
    with pytest.raises(ValueError, match=r"X has 1 non-numeric column\(s\): 'city' .*rfstream convert"):
        est.fit(_text_frame(X), da.from_array(y, chunks=N // 2))


def _assert_unknown_columns_refused(est, X, y):
    unknown = da.from_array(X, chunks=(N // 2, 3)).map_blocks(
        lambda b: b, chunks=((N // 2, N // 2), (np.nan, np.nan)))
    with pytest.raises(ValueError, match="unknown number of columns"):
        est.fit(unknown, da.from_array(y, chunks=N // 2))


@pytest.mark.parametrize("name", MAPS)
def test_map_bad_input(data, name):
    X, y = map_data(data, name)
    cls = type(make_map(name)).__name__
    with pytest.raises(NotFittedError, match="not fitted yet"):
        make_map(name).transform(X)
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        make_map(name).fit(X[:, 0], y)
    with pytest.raises(ValueError, match=r"Expected a 2-d dask array for X; got ndim=1"):
        make_map(name).fit(da.from_array(X[:, 0], chunks=60), da.from_array(y, chunks=60))
    with pytest.raises(ValueError, match=r"X must have a real numeric dtype; got dtype <U"):
        make_map(name).fit(da.from_array(X.astype(str), chunks=(60, D)), da.from_array(y, chunks=60))
    _assert_text_columns_refused(make_map(name), X, y)
    _assert_unknown_columns_refused(make_map(name), X, y)
    X_nan = X.copy()
    X_nan[7, 2] = np.nan
    with pytest.raises(ValueError, match=f"Input X contains NaN.\n{cls} does not accept missing values"):
        make_map(name).fit(X_nan, y)
    est = make_map(name).fit(X, y)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        est.transform(X_nan)
    wrong = f"X has 4 features, but {cls} is expecting 5 features as input"
    with pytest.raises(ValueError, match=wrong):
        est.transform(X[:, :4])
    with pytest.raises(ValueError, match=wrong):
        est.transform(da.from_array(X[:, :4], chunks=60))
    if needs_y(est):
        with pytest.raises(ValueError, match=f"{cls} requires y to be passed, but the target y is None"):
            make_map(name).fit(X)
        for X_in in (X, da.from_array(X, chunks=60)):
            with pytest.raises(ValueError, match=r"X has 240 rows but y has 200; pass one target per row"):
                make_map(name).fit(X_in, y[:200])


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
    _assert_unknown_columns_refused(make_solver(solver, task), X, y)
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
    _assert_text_columns_refused(make_solver(solver, task), X, y)
    fitted = make_solver(solver, task).fit(X, y)
    with pytest.raises(ValueError, match=r"non-numeric column\(s\): 'city'"):
        fitted.predict(_text_frame(X[:, :-1]))


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
