"""DataFrames in, lazily: pandas and dask DataFrames for X, pandas and dask Series for y.

Every map of :data:`rfstream.catalog.FEATURES`, every solver of
:data:`rfstream.catalog.SOLVERS`, the Standardizer and the whole Pipeline take

* a pandas DataFrame (``feature_names_in_`` from its columns, scikit-learn's
  warnings and errors for other names later), the same fit as on its values;
* a dask DataFrame, converted lazily (only partition lengths are computed on the
  way in), with its column names, and the same fit as on the equivalent dask array;
* a pandas or dask Series for y (a dask Series lazily, with X's row chunks).

Tolerances: a dask DataFrame with the partitions of a dask array's row chunks is
converted to exactly that array, so every fitted array must be bit for bit the
same (``EXACT``); a pandas DataFrame is its numpy values, the same.
"""
from __future__ import annotations

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers.contract_cases import (
    SOLVER_CASES,
    SOLVER_IDS,
    D,
    N,
    assert_same_fit,
    make_map,
    make_solver,
    map_data,
)
from helpers.contract_data import contract_data
from dask.callbacks import Callback

from rfstream import Standardizer
from rfstream.catalog import FEATURES, make_model

MAPS = sorted(FEATURES)
COLUMNS = [f"x{i}" for i in range(D)]
PARTS = 4  # partitions of N // PARTS rows: the row chunks of the dask arrays compared with


@pytest.fixture(scope="module")
def data():
    """The contract suite's data (240 x 5, three imbalanced classes, a regression target)."""
    return contract_data(N, D)


def frames(X, y):
    """``(pandas X, pandas y, dask X, dask y)``: X and y taken from one dask DataFrame."""
    pdf = pd.DataFrame(X, columns=COLUMNS).assign(label=y)
    ddf = dd.from_pandas(pdf, npartitions=PARTS)
    return pdf[COLUMNS], pdf["label"], ddf[COLUMNS], ddf["label"]


def arrays(X, y):
    return da.from_array(X, chunks=(N // PARTS, D)), da.from_array(y, chunks=N // PARTS)


def assert_same_predictions(pred, ref, task):
    # pandas hands over its values in column-major order: BLAS may round a decision value
    # 1 ulp differently (2e-16 relative seen)
    if task == "classification":
        np.testing.assert_array_equal(pred, ref)
    else:
        np.testing.assert_allclose(pred, ref, rtol=1e-13, atol=1e-13)


def dense(Z):
    return Z.toarray() if sp.issparse(Z) else np.asarray(Z)


def _y(data, task):
    X, y_class, y_reg = data
    return X, (y_class if task == "classification" else y_reg)


def assert_names_checked(est, X, method):
    """scikit-learn's rules for the column names after a fit on ``COLUMNS``, for pandas and dask."""
    call = getattr(est, method)
    renamed = pd.DataFrame(X, columns=[f"z{i}" for i in range(D)])
    for other in (renamed, dd.from_pandas(renamed, npartitions=2)):
        with pytest.raises(ValueError, match="The feature names should match those that were passed"):
            call(other)
    for no_names in (X, da.from_array(X, chunks=N // 2)):
        with pytest.warns(UserWarning, match="X does not have valid feature names"):
            call(no_names)


# ================================================================== feature maps
@pytest.mark.parametrize("name", MAPS)
def test_map_pandas_dataframe(data, name):
    X, y = map_data(data, name)
    pX, py, _, _ = frames(X, y)
    ref = make_map(name).fit(X, y)
    est = make_map(name).fit(pX, py)
    assert list(est.feature_names_in_) == COLUMNS and not hasattr(ref, "feature_names_in_")
    assert_same_fit(est, ref)
    np.testing.assert_array_equal(dense(est.transform(pX)), dense(ref.transform(X)))
    assert_names_checked(est, X, "transform")


@pytest.mark.parametrize("name", MAPS)
def test_map_dask_dataframe_equals_dask_array(data, name):
    X, y = map_data(data, name)
    _, _, dX, dy = frames(X, y)
    Xd, yd = arrays(X, y)
    ref = make_map(name).fit(Xd, yd)
    est = make_map(name).fit(dX, dy)
    assert list(est.feature_names_in_) == COLUMNS
    assert_same_fit(est, ref)
    Z = est.transform(dX)
    assert isinstance(Z, da.Array) and Z.chunks[0] == Xd.chunks[0] and Z.numblocks[1] == 1
    np.testing.assert_array_equal(dense(Z.compute()), dense(ref.transform(Xd).compute()))
    assert_names_checked(est, X, "transform")


@pytest.mark.parametrize("name", ["cnm", "eerf", "lkrf"])
def test_labelled_map_takes_a_pandas_or_dask_series_with_a_dask_array(data, name):
    # y alone as a Series: pandas is wrapped with X's chunks, dask converted lazily
    X, y, _ = data
    _, py, _, dy = frames(X, y)
    Xd, yd = arrays(X, y)
    ref = make_map(name).fit(Xd, yd)
    assert_same_fit(make_map(name).fit(Xd, py), ref)
    assert_same_fit(make_map(name).fit(Xd, dy), ref)


def test_cnm_classifier_predicts_from_a_dask_dataframe(data):
    X, y, _ = data
    _, _, dX, dy = frames(X, y)
    est = make_map("cnm").fit(dX, dy)
    pred = est.predict(dX)
    assert isinstance(pred, da.Array)
    pX = pd.DataFrame(X, columns=COLUMNS)
    np.testing.assert_array_equal(pred.compute(), est.predict(pX))
    np.testing.assert_array_equal(est.decision_function(dX).compute(), est.decision_function(pX))


# ================================================================== solvers
@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_pandas_dataframe(data, solver, task):
    X, y = _y(data, task)
    pX, py, _, _ = frames(X, y)
    ref = make_solver(solver, task).fit(X, y)
    est = make_solver(solver, task).fit(pX, py)
    assert list(est.feature_names_in_) == COLUMNS
    assert_same_fit(est, ref)
    assert_same_predictions(est.predict(pX), ref.predict(X), task)
    assert est.score(pX, py) == pytest.approx(ref.score(X, y), rel=1e-12)
    assert_names_checked(est, X, "predict")


@pytest.mark.parametrize("solver, task", SOLVER_CASES, ids=SOLVER_IDS)
def test_solver_dask_dataframe_equals_dask_array(data, solver, task):
    X, y = _y(data, task)
    _, py, dX, dy = frames(X, y)
    Xd, yd = arrays(X, y)
    ref = make_solver(solver, task).fit(Xd, yd)
    est = make_solver(solver, task).fit(dX, dy)
    assert list(est.feature_names_in_) == COLUMNS
    assert_same_fit(est, ref)
    pred = est.predict(dX)
    assert isinstance(pred, da.Array) and pred.chunks == (Xd.chunks[0],)
    np.testing.assert_array_equal(pred.compute(), ref.predict(Xd).compute())
    if task == "classification":
        scores = est.decision_function(dX)
        assert isinstance(scores, da.Array)
        np.testing.assert_array_equal(scores.compute(), ref.decision_function(Xd).compute())
    assert est.score(dX, dy) == pytest.approx(ref.score(X, y), rel=1e-12)
    assert_names_checked(est, X, "predict")
    # the same model from a dask Series y with a dask array X, and from a pandas y
    assert_same_fit(make_solver(solver, task).fit(Xd, dy), ref)
    assert_same_fit(make_solver(solver, task).fit(dX, py), ref)


def test_sgd_partial_fit_and_objective_take_dask_dataframes(data):
    X, y, _ = data
    _, _, dX, dy = frames(X, y)
    Xd, yd = arrays(X, y)
    est = make_solver("sgd", "classification").partial_fit(dX, dy, classes=[0, 1, 2])
    ref = make_solver("sgd", "classification").partial_fit(Xd, yd, classes=[0, 1, 2])
    assert list(est.feature_names_in_) == COLUMNS
    assert_same_fit(est.partial_fit(dX, dy), ref.partial_fit(Xd, yd))
    assert est.objective(dX, dy) == ref.objective(Xd, yd)


def test_text_labels_in_a_dask_series(data):
    # pandas 3 keeps text as its string dtype; the labels arrive as an object array
    X, y, _ = data
    names = np.array(["low", "mid", "high"], dtype=object)[y]
    _, _, dX, dy = frames(X, names)
    Xd, yd = arrays(X, names)
    for solver in ("ridge", "sgd"):
        est = make_solver(solver, "classification").fit(dX, dy)
        ref = make_solver(solver, "classification").fit(Xd, yd)
        assert list(est.classes_) == ["high", "low", "mid"]
        assert_same_fit(est, ref)
        np.testing.assert_array_equal(est.predict(dX).compute(), ref.predict(Xd).compute())


def test_dask_series_with_other_partitions(data):
    X, y, _ = data
    _, _, dX, _ = frames(X, y)
    Xd, yd = arrays(X, y)
    ref = make_solver("ridge", "classification").fit(Xd, yd)
    # another number of partitions: its lengths are computed and it is rechunked to X's rows
    other = dd.from_pandas(pd.Series(y), npartitions=3)
    assert_same_fit(make_solver("ridge", "classification").fit(dX, other), ref)
    # as many partitions as X but other lengths: refused by the first pass, naming the partition
    shifted = dd.from_pandas(pd.Series(y), npartitions=PARTS).repartition(divisions=[0, 50, 120, 180, N - 1])
    with pytest.raises(ValueError, match=r"y's partition [0-3] has [57]0 rows but X's row block [0-3] has 60"):
        make_solver("ridge", "classification").fit(dX, shifted)


# ================================================================== Standardizer and Pipeline
def test_standardizer_dataframes(data):
    X, y, _ = data
    pX, _, dX, _ = frames(X, y)
    ref = Standardizer().fit(X)
    for frame in (pX, dX):
        est = Standardizer().fit(frame)
        assert list(est.feature_names_in_) == COLUMNS
        assert list(est.get_feature_names_out()) == COLUMNS
        # moments merged over 4 partitions vs one block: the last bits of the mean and scale
        # differ, so standardized values of order 1 by 1e-16 or so
        assert_same_fit(est, ref, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(est.transform(frame)), ref.transform(X), rtol=0, atol=1e-14)
        assert_names_checked(est, X, "transform")
    assert_same_fit(Standardizer().fit(dX), Standardizer().fit(da.from_array(X, chunks=N // PARTS)))


# the two doors' fits are compared pass for pass, not their convergence in Newton's default 20 passes
@pytest.mark.filterwarnings("ignore:Newton stopped after max_iter=.*:UserWarning")
@pytest.mark.parametrize("solver", ["ridge", "sgd"])
@pytest.mark.parametrize("features", ["rff", "eerf"])
def test_pipeline_on_a_dask_dataframe(data, features, solver):
    X, y, _ = data
    _, _, dX, dy = frames(X, y)
    Xd, yd = arrays(X, y)
    params = {"feature_params": {"n_components": 16, "gamma": "auto", "random_state": 0},
              "solver_params": {"random_state": 0}}
    est = make_model("classification", features=features, solver=solver, **params).fit(dX, dy)
    ref = make_model("classification", features=features, solver=solver, **params).fit(Xd, yd)
    assert list(est.feature_names_in_) == COLUMNS
    for (_, a), (_, b) in zip(est.steps, ref.steps):
        assert_same_fit(a, b)
    pred = est.predict(dX)
    assert isinstance(pred, da.Array) and pred.chunks == (Xd.chunks[0],)
    np.testing.assert_array_equal(pred.compute(), ref.predict(Xd).compute())


# ================================================================== bad columns
def test_non_numeric_columns_are_named(data):
    X, y, _ = data
    bad = pd.DataFrame(X, columns=COLUMNS).assign(
        city=np.where(y == 1, "Paris", "Rome"), kind=pd.Categorical(y), when=pd.Timestamp("2020-01-01"))
    fitted = [Standardizer().fit(X), make_map("rff").fit(X), make_solver("ridge", "classification").fit(X, y)]
    for frame in (bad, dd.from_pandas(bad, npartitions=2)):
        for est in (Standardizer(), make_map("rff"), make_map("eerf"), make_solver("ridge", "classification"),
                    make_solver("sgd", "regression")):
            with pytest.raises(ValueError, match=r"X has 3 non-numeric column\(s\): 'city' \(str.*\), "
                                                 r"'kind' \(category\), 'when' \(datetime64.*rfstream convert") as err:
                est.fit(frame, y)
            assert "\n" not in str(err.value)
        for est, method in zip(fitted, ("transform", "transform", "predict")):
            with pytest.raises(ValueError, match="non-numeric column"):
                getattr(est, method)(frame.iloc[:, :D].assign(x0=frame["city"]))


def test_nullable_and_boolean_columns_are_numbers(data):
    # pandas' nullable Int64 and bool columns become float64, as scikit-learn converts pandas
    X, y, _ = data
    Xi = np.round(X * 10)
    frame = pd.DataFrame(Xi, columns=COLUMNS).astype({"x0": "Int64", "x1": "Float64"}).assign(x2=X[:, 2] > 0)
    values = Xi.copy()
    values[:, 2] = X[:, 2] > 0
    ref = make_solver("ridge", "classification").fit(values, y)
    for f in (frame, dd.from_pandas(frame, npartitions=PARTS)):
        # the same float64 sums in another order (test_contract_solvers's SOLVER_TOL)
        assert_same_fit(make_solver("ridge", "classification").fit(f, y), ref, rtol=1e-10, atol=1e-12)
    missing = frame.assign(x0=frame["x0"].mask(frame.index == 3))
    with pytest.raises(ValueError, match="NaN or infinity"):  # a missing value is a NaN
        Standardizer().fit(dd.from_pandas(missing, npartitions=2))


# ================================================================== laziness
class RowsOfResults(Callback):
    """The length of the longest pandas object or array that any task returned (dask's local schedulers)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        if isinstance(result, (pd.DataFrame, pd.Series, np.ndarray)) and np.ndim(result) >= 1:
            self.largest = max(self.largest, len(result))


def _rows(i, rows, calls):
    calls.append(i)
    rng = np.random.default_rng(i)
    x = rng.normal(size=(rows, D))
    return pd.DataFrame(x, columns=COLUMNS).assign(label=(x[:, 0] * x[:, 1] > 0).astype(np.int64))


def test_a_dask_dataframe_is_never_materialized_whole():
    # 6 partitions of 1000 rows made by dd.from_map.  Every task result is watched: a
    # conversion that loaded the frame or the labels (X.compute(), np.asarray(y), a
    # computed to_dask_array) has a task whose result holds all 6000 rows.  The longest
    # legitimate results are a partition, gamma="auto"'s 1000 sampled rows and the
    # reductions' vectors of partials (1091 numbers for 32 features, whatever the rows).
    parts, rows = 6, 1000
    calls = []
    frame = dd.from_map(_rows, range(parts), rows=rows, calls=calls, meta=_rows(0, 0, []))
    X, y = frame[COLUMNS], frame["label"]
    watch = RowsOfResults()
    with dask.config.set(scheduler="threads"), watch:
        model = make_model("classification", feature_params={"n_components": 32, "gamma": "auto",
                                                             "random_state": 0}).fit(X, y)
        pred = model.predict(X)
        error = float((pred != y.to_dask_array(lengths=pred.chunks[0])).mean().compute())
    assert list(model.feature_names_in_) == COLUMNS
    assert pred.chunks == ((rows,) * parts,)
    assert error < 0.3  # a model was fitted: the sign of x0 x1 is learned
    assert set(calls) == set(range(parts))  # the partitions were made by the tasks, each whole
    assert 0 < watch.largest < parts * rows // 2, f"a task result held {watch.largest} rows"
