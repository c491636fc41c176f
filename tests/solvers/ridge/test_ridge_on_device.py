"""Ridge's passes on a device (rfstream.solvers.ridge.on_device), run on CPU: every chunk function
of the Gram, scoring, leave-one-out and calibration passes, given array_api_strict rows, gives the
numpy path's partials to float32 rounding (the specs are the ones a real fit builds: folds,
weights, several targets, a gamma grid, sizes); and whole fits through the device path
(:class:`rfstream.devices.GenericRows`) give the CPU's models."""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

import array_api_strict as xps

from rfstream.devices import GenericRows, on_device, to_host
from rfstream.features import RandomFourierFeatures
from rfstream.preprocess import Standardizer
from rfstream.solvers import StreamingRidge, StreamingRidgeClassifier
from rfstream.solvers.ridge import calibration, cv, estimators, gram, loo
from rfstream.solvers.linear import _device_linear_block, _linear_block

pytestmark = pytest.mark.filterwarnings("ignore:the chosen alpha")

RNG = np.random.default_rng(3)
X = RNG.normal(size=(1500, 5)).astype(np.float32)
Y_CLASS = ((X[:, 0] * X[:, 1] > 0).astype(int) + (X[:, 2] > 0.8)).astype(np.int64)  # three classes
Y_REG = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * RNG.normal(size=X.shape[0])
W = RNG.uniform(0.5, 2.0, size=X.shape[0])
CHUNKS = 500


@pytest.fixture(autouse=True)
def _one_process():
    with dask.config.set(scheduler="sync"):
        yield


@pytest.fixture
def strict_twins(monkeypatch):
    """Every pass's chunk run twice, on the numpy rows and on the same rows as array_api_strict;
    the partials compared; the names of the chunk functions so checked, returned."""
    checked = []
    original = gram.group_chunk

    def both(x, *rows, offset, spec):
        host = original(x, *rows, offset=offset, spec=spec)
        twin = original(xps.asarray(x), *rows, offset=offset, spec=spec)
        np.testing.assert_allclose(twin, host, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(host).max())))
        checked.append(spec.chunk.__name__)
        return host

    for module in (estimators, cv, loo, calibration):
        monkeypatch.setattr(module, "group_chunk", both)
    return checked


def _pipeline(estimator, n_components=48, gamma=0.4, **params):
    return make_pipeline(Standardizer(), RandomFourierFeatures(n_components, gamma=gamma, random_state=0),
                         estimator(**params))


def _dask(a):
    return da.from_array(a, chunks=CHUNKS if a.ndim == 1 else (CHUNKS, -1))


@pytest.mark.parametrize("params", [
    {"alpha": [0.1, 1.0, 10.0], "cv": 3},  # Gram by fold, the scoring pass, calibration (Platt)
    {"alpha": [0.1, 1.0], "cv": "loo"},  # the leave-one-out pass
    {"alpha": [0.1, 1.0], "cv": 3, "scoring": "roc_auc", "binary": True},
], ids=["cv", "loo", "roc_auc"])
def test_classifier_chunks_on_strict_rows_equal_numpys(strict_twins, params):
    params = dict(params)
    y = (Y_CLASS > 0).astype(np.int64) if params.pop("binary", False) else Y_CLASS
    _pipeline(StreamingRidgeClassifier, **params).fit(_dask(X), _dask(y))
    assert "gram_chunk" in strict_twins
    assert ("loo_chunk" if params["cv"] == "loo" else "score_chunk") in strict_twins
    assert "calibration_chunk" in strict_twins


def test_regressor_chunks_with_weights_a_grid_and_sizes_on_strict_rows_equal_numpys(strict_twins):
    model = make_pipeline(Standardizer(), RandomFourierFeatures([16, 48], gamma=[0.2, 0.8], random_state=0),
                          StreamingRidge(alpha=[0.1, 1.0], cv=3, calibrate=True))
    model.fit(_dask(X), _dask(Y_REG), streamingridge__sample_weight=_dask(W))
    assert {"gram_chunk", "calibration_chunk"} <= set(strict_twins)


def test_decisions_on_strict_rows_equal_numpys():
    z = RNG.normal(size=(40, 6)).astype(np.float32)
    coef, intercept = RNG.normal(size=(3, 6)), RNG.normal(size=3)
    got = _device_linear_block(xps.asarray(z), coef, intercept, False)
    np.testing.assert_allclose(to_host(got), _linear_block(z, coef, intercept, False), rtol=1e-5, atol=1e-5)


def _same_models(a, b, rtol=1e-3):
    sa, sb = a[-1], b[-1]
    np.testing.assert_allclose(sb.coef_, sa.coef_, rtol=rtol, atol=rtol * np.abs(sa.coef_).max())
    assert getattr(sa, "alpha_", None) == getattr(sb, "alpha_", None)


@pytest.mark.parametrize("params", [
    {"alpha": [0.1, 1.0, 10.0], "cv": 3},
    {"alpha": [0.1, 1.0], "select": "evidence"},
    {"alpha": 1.0},
], ids=["cv", "evidence", "one-alpha"])
def test_a_fit_through_the_device_path_is_the_cpus(params):
    Xd, yd = _dask(X), _dask(Y_CLASS)
    cpu = _pipeline(StreamingRidgeClassifier, gamma="auto", **params).fit(Xd, yd)
    device = _pipeline(StreamingRidgeClassifier, gamma="auto", **params).fit(on_device(Xd, "generic"), yd)
    _same_models(cpu, device)
    labels = device.predict(on_device(Xd, "generic"))
    assert isinstance(labels._meta, GenericRows)  # the rows' kind in, the same kind out
    assert np.mean(np.asarray(labels.compute()) == cpu.predict(Xd).compute()) > 0.995
    if hasattr(cpu[-1], "platt_"):
        np.testing.assert_allclose(device.predict_proba(on_device(Xd, "generic")).compute(),
                                   cpu.predict_proba(Xd).compute(), atol=1e-3)


def test_a_regressors_posterior_through_the_device_path_is_the_cpus():
    Xd, yd = _dask(X), _dask(Y_REG)
    cpu = _pipeline(StreamingRidge, alpha=[0.1, 1.0], calibrate=True).fit(Xd, yd)
    device = _pipeline(StreamingRidge, alpha=[0.1, 1.0], calibrate=True).fit(on_device(Xd, "generic"), yd)
    _same_models(cpu, device)
    mean_c, std_c = cpu[-1].predict(cpu[:-1].transform(Xd), return_std=True)
    mean_d, std_d = device[-1].predict(device[:-1].transform(on_device(Xd, "generic")), return_std=True)
    np.testing.assert_allclose(np.asarray(mean_d.compute()), mean_c.compute(), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.asarray(std_d.compute()), std_c.compute(), rtol=1e-3)


@pytest.fixture
def strict_fused_twins(monkeypatch):
    """The same check for the passes that make their features a sub-block at a time
    (:func:`rfstream.features.fused.fused_chunk`: the CG and PCG passes)."""
    from rfstream.features import fused

    checked = []
    original = fused.fused_chunk

    def both(x, *others, offset, chunk, **kw):
        host = original(x, *others, offset=offset, chunk=chunk, **kw)
        twin = original(xps.asarray(x), *others, offset=offset, chunk=chunk, **kw)
        np.testing.assert_allclose(twin, host, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(host).max())))
        checked.append(getattr(chunk, "func", chunk).__name__)
        return host

    monkeypatch.setattr(fused, "fused_chunk", both)
    return checked


@pytest.mark.parametrize("solver", ["cg", "pcg"])
def test_cg_and_pcg_chunks_on_strict_rows_equal_numpys(strict_fused_twins, solver):
    _pipeline(StreamingRidge, solver=solver, alpha=1.0, pcg_rank=16, max_iter=30).fit(_dask(X), _dask(Y_REG))
    assert {"stats_chunk", "product_chunk"} <= set(strict_fused_twins)


@pytest.mark.parametrize("solver", ["cg", "pcg"])
def test_cg_and_pcg_through_the_device_path_are_the_cpus(solver):
    Xd, yd = _dask(X), _dask(Y_REG)
    kw = {"solver": solver, "alpha": 1.0, "pcg_rank": 16, "max_iter": 30}
    cpu = _pipeline(StreamingRidge, **kw).fit(Xd, yd)
    device = _pipeline(StreamingRidge, **kw).fit(on_device(Xd, "generic"), yd)
    _same_models(cpu, device, rtol=1e-3)


@pytest.mark.parametrize("method", ["gram", "randomized"])
def test_kernel_pca_on_strict_rows_and_through_the_device_path_is_the_cpus(monkeypatch, method):
    from rfstream.solvers import kpca

    checked = []
    for name in ("covariance_chunk", "product_chunk"):
        original = getattr(kpca, name)

        def both(x, *rows, offset, spec, original=original):
            host = original(x, *rows, offset=offset, spec=spec)
            twin = original(xps.asarray(x), *rows, offset=offset, spec=spec)
            np.testing.assert_allclose(twin, host, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(host).max())))
            checked.append(original.__name__)
            return host

        monkeypatch.setattr(kpca, name, both)
    Xd = _dask(X)
    model = lambda: make_pipeline(Standardizer(), kpca.KernelPCA(4, features=RandomFourierFeatures(
        32, gamma=0.4, random_state=0), method=method))  # noqa: E731
    cpu = model().fit(Xd)
    assert checked
    monkeypatch.undo()
    device = model().fit(on_device(Xd, "generic"))
    scores = device.transform(on_device(Xd, "generic"))
    assert isinstance(scores._meta, GenericRows)
    np.testing.assert_allclose(np.asarray(scores.compute()), cpu.transform(Xd).compute(), rtol=1e-3, atol=1e-3)


def test_in_memory_rows_of_another_namespace_come_back_in_it():
    """An in-memory array of another namespace (cupy on a GPU; here GenericRows and array_api_strict)
    goes in and comes out in that namespace, with the numpy path's numbers."""
    G = X.view(GenericRows)
    make = lambda: _pipeline(StreamingRidgeClassifier, gamma="auto", alpha=[0.1, 1.0])  # noqa: E731
    cpu, device = make().fit(X, Y_CLASS), make().fit(G, Y_CLASS)
    _same_models(cpu, device)
    scores = device.decision_function(G)
    assert isinstance(scores, GenericRows)
    np.testing.assert_allclose(np.asarray(scores), cpu.decision_function(X), atol=1e-3)
    assert np.mean(np.asarray(device.predict(G)) == cpu.predict(X)) > 0.995
    np.testing.assert_allclose(device.predict_proba(G), cpu.predict_proba(X), atol=1e-3)
    scaler = Standardizer().fit(xps.asarray(X))
    rff = RandomFourierFeatures(16, gamma=0.5, random_state=0).fit(xps.asarray(X))
    Z = rff.transform(scaler.transform(xps.asarray(X)))
    assert isinstance(Z, type(xps.asarray(X)))
    host = RandomFourierFeatures(16, gamma=0.5, random_state=0).fit(X).transform(Standardizer().fit(X).transform(X))
    np.testing.assert_allclose(to_host(Z), host, rtol=1e-4, atol=1e-5)
