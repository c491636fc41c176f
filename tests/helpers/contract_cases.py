"""The cases of the contract suite and what its two files share: tests/test_contract.py (the
feature maps) and tests/test_contract_solvers.py (the solvers and kernel PCA).

Each map's and solver's small parameters, tolerances and expected check_estimator
failures, the chunkings, and the assertions both files make; the tolerances are
explained in tests/test_contract.py's docstring.
"""
from __future__ import annotations

from contextlib import contextmanager

import dask.array as da
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator

from helpers.sklearn_checks import FLOAT32_ROW_GROUPING
from rfstream.catalog import FEATURES, SOLVERS
from rfstream.features import CompactRandomFeatures, FastfoodFeatures
from rfstream.options import TASKS

#: the predicting solvers, one estimator per task (a transformer entry, kpca, is one class:
#: its contract is test_kpca_* in tests/test_contract_solvers.py)
PREDICTORS = {name: entry for name, entry in SOLVERS.items() if isinstance(entry, dict)}

# ------------------------------------------------------------------ the cases
#: CNM's loop lengths cut short: its defaults (200 rounds of 100 + 100 SGD steps) are the
#: paper's, and a fit on a toy set takes 0.5 s of them (62 s of check_estimator's fits)
CNM_SHORT = {"max_iter": 3, "n_steps_w": 10, "n_steps_theta": 10}
CNM_FAST = {**CNM_SHORT, "batch_size": 100}
#: check_estimator's loop lengths: 3 rounds left the default decaying map step (first step 1.0)
#: at 0.83 accuracy on check_classifiers_train's blobs, its floor; 10 rounds: 0.91-0.94
CNM_CHECK = {**CNM_SHORT, "max_iter": 10}

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
    # a float gamma, as the others: "auto" from sparse rows is 1 ulp off (4e-17), which 30 map
    # steps of the default decay (first step 1.0) grew into one held-out row's flip
    "cnm": dict(n_components=6, gamma=0.5, **CNM_FAST),
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

#: fitted arrays of a fit on dask vs one on numpy, or on another chunking (tests/test_contract.py's docstring)
FIT_TOL = {
    "tefm-g": dict(rtol=0, atol=2e-5),
    "tefm-s": dict(rtol=0, atol=2e-5),
    "eerf": dict(rtol=1e-5, atol=1e-7),
    "lkrf": dict(rtol=1e-5, atol=1e-7),
}
EXACT = dict(rtol=0, atol=0)
#: the same fitted map on numpy and on dask (float32 GEMM rounding, tests/test_contract.py's docstring):
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
CHECK_PARAMS = {"cnm": CNM_CHECK}

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


def text_frame(X):
    """A dask DataFrame of X with a text column (DataFrames are accepted: tests/test_dataframes.py)."""
    return dd.from_pandas(pd.DataFrame(X).assign(city="Paris"), npartitions=2)


def assert_text_columns_refused(est, X, y):
    # a DataFrame is converted lazily, but a text column must be encoded first; the message names it
    with pytest.raises(ValueError, match=r"X has 1 non-numeric column\(s\): 'city' .*rfstream convert"):
        est.fit(text_frame(X), da.from_array(y, chunks=N // 2))


def assert_unknown_columns_refused(est, X, y):
    unknown = da.from_array(X, chunks=(N // 2, 3)).map_blocks(
        lambda b: b, chunks=((N // 2, N // 2), (np.nan, np.nan)))
    with pytest.raises(ValueError, match="unknown number of columns"):
        est.fit(unknown, da.from_array(y, chunks=N // 2))


@contextmanager
def two_process_cluster():
    """A real LocalCluster: 2 single-threaded worker processes on 127.0.0.1."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as c:
        yield c
