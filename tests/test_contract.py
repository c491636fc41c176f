"""The contract every feature map and solver keeps, written once.

As scipy's shared QMC tests give every engine the same invariant tests, each test
here runs over every map of :data:`rfstream.catalog.FEATURES` (the partials
``tefm-g``/``tefm-s`` included), the maps outside the registry (Fastfood, compact
maps) and every solver of :data:`rfstream.catalog.SOLVERS` for both tasks:

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
here without a line more than its small parameters in :data:`MAP_PARAMS`.  This file
holds the feature maps' half; tests/test_contract_solvers.py the solvers' and kernel
PCA's; tests/helpers/contract_cases.py the cases and helpers both use.

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
import distributed
import numpy as np
import pytest
import scipy.sparse as sp
from helpers.contract_cases import (
    CHECKS,
    CHECK_PARAMS,
    CHUNKINGS,
    EXACT,
    FIT_TOL,
    KEEPS_SPARSE,
    MAPS,
    MAP_PARAMS,
    PREDICTORS,
    D,
    N,
    assert_same_fit,
    assert_same_output,
    assert_text_columns_refused,
    assert_unknown_columns_refused,
    dense,
    fitted_state,
    is_seeded,
    make_map,
    map_class,
    map_data,
    needs_y,
    on_dask,
    out_tol,
    two_process_cluster,
)
from helpers.contract_data import contract_data
from helpers.sklearn_checks import FLOAT32_ROW_GROUPING
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import (
    check_estimator,
    check_methods_sample_order_invariance,
    check_methods_subset_invariance,
)

import rfstream
from rfstream import Standardizer, load_model, save_model
from rfstream.catalog import FEATURES
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
# scikit-learn's checks fit on fewer rows than Nystroem's 100 landmarks: the warning by design
@pytest.mark.filterwarnings("ignore:n_components=.* > n_samples=.*every row is a landmark:UserWarning")
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
    assert_text_columns_refused(make_map(name), X, y)
    assert_unknown_columns_refused(make_map(name), X, y)
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
