"""The device on a dataset: fit_dataset, evaluate_dataset, predict_dataset and transform_dataset
through the device path (rfstream.devices.GenericRows, on CPU) give the CPU's model, metrics and
arrays; a model with a step that has no device form is refused before any pass, in one line;
the real GPU's run is marked ``gpu``."""
from __future__ import annotations

import numpy as np
import pytest
import zarr

from helpers.cli import one_error_line, run
from rfstream import devices, pipeline
from rfstream.cluster import set_progress
from rfstream.devices import DeviceError
from rfstream.io import write_dataset
from rfstream.devices import on_device
from rfstream.jobs import FitJob, open_data

pytestmark = pytest.mark.filterwarnings("ignore:the chosen alpha")


@pytest.fixture(autouse=True)
def _quiet():
    set_progress(False)


@pytest.fixture
def labelled(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(900, 4))
    y = (X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0).astype(np.int64)
    write_dataset(tmp_path / "d.zarr", X, y, rows_per_chunk=300)
    return tmp_path / "d.zarr"


@pytest.fixture
def numeric(tmp_path):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(900, 4))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=900)
    write_dataset(tmp_path / "r.zarr", X, y, rows_per_chunk=300)
    return tmp_path / "r.zarr"


def test_a_classifier_on_the_device_path_is_the_cpus(labelled, tmp_path):
    kw = {"n_components": 64, "alpha": [0.1, 1.0], "holdout": 0.25}
    models = {}
    for device in ("cpu", "generic"):
        model, meta = pipeline.fit_dataset(labelled, out=tmp_path / device, device=device, **kw)
        models[device] = (model, meta)
        pipeline.predict_dataset(tmp_path / device, labelled, tmp_path / f"p-{device}", scores=True, device=device)
    (cpu, cpu_meta), (dev, dev_meta) = models["cpu"], models["generic"]
    np.testing.assert_allclose(dev[-1].coef_, cpu[-1].coef_, rtol=1e-3, atol=1e-3 * np.abs(cpu[-1].coef_).max())
    assert dev_meta["selection"]["alpha"] == cpu_meta["selection"]["alpha"]
    assert abs(dev_meta["holdout"]["error_rate"] - cpu_meta["holdout"]["error_rate"]) <= 2 / 225
    assert dev_meta["device"] == {"device": "generic", "precision": "fp32"} and "device" not in cpu_meta
    got, want = (zarr.open_group(str(tmp_path / f"p-{d}"), mode="r") for d in ("generic", "cpu"))
    np.testing.assert_allclose(got["scores"][:], want["scores"][:], atol=1e-3)
    assert np.mean(got["y_pred"][:] == want["y_pred"][:]) > 0.99


def test_a_regressors_intervals_and_a_transformers_output_on_the_device_path(numeric, tmp_path):
    for device in ("cpu", "generic"):
        pipeline.fit_dataset(numeric, out=tmp_path / f"m-{device}", device=device, n_components=48,
                             alpha=[0.1, 1.0], calibrate=True)
        pipeline.predict_dataset(tmp_path / f"m-{device}", numeric, tmp_path / f"p-{device}", std=True,
                                 interval=0.9, device=device)
        pipeline.fit_dataset(numeric, out=tmp_path / f"t-{device}", device=device, solver=None, n_components=32,
                             gamma=0.5)
        pipeline.transform_dataset(tmp_path / f"t-{device}", numeric, tmp_path / f"z-{device}", device=device)
    got, want = (zarr.open_group(str(tmp_path / f"p-{d}"), mode="r") for d in ("generic", "cpu"))
    for name in ("y_pred", "std", "lower", "upper"):
        np.testing.assert_allclose(got[name][:], want[name][:], rtol=1e-3, atol=1e-3)
    got, want = (zarr.open_group(str(tmp_path / f"z-{d}"), mode="r")["X"][:] for d in ("generic", "cpu"))
    np.testing.assert_allclose(got, want, atol=1e-5)
    model, meta = pipeline.load_fitted(tmp_path / "m-generic")
    scored = pipeline.evaluate_dataset(model, meta, numeric, device="generic")
    assert scored["interval_coverage"] > 0.8


@pytest.mark.parametrize("params,named", [
    ({"features": "binning"}, "RandomBinningFeatures does not run on a device"),
    ({"features": "arccos"}, "ArcCosineFeatures does not run on a device"),
    ({"solver": "sgd"}, "StreamingSGDClassifier does not run on a device"),
    ({"features": "tefm-s"}, "TEFM does not run on a device"),
])
def test_what_does_not_run_on_the_device_is_refused_before_any_pass(labelled, params, named):
    with pytest.raises(DeviceError, match=named) as info:
        FitJob(labelled, device="generic", **params)
    assert "device='cpu'" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.skipif(devices.cuda_available()[0], reason="a CUDA device is present")
def test_the_cli_says_the_missing_gpu_in_one_line_naming_the_flags(labelled, tmp_path, capsys):
    assert run(["fit", str(labelled), "--out", str(tmp_path / "m"), "--device", "cuda"]) == 2
    line = one_error_line(capsys)
    assert "--device cuda needs cupy" in line and 'pip install "rfstream[cuda]"' in line and "--device cpu" in line
    assert run(["predict", str(labelled), str(labelled), "--out", str(tmp_path / "p"), "--device", "cuda"]) == 2
    assert "--device cuda needs cupy" in one_error_line(capsys)
    assert run(["fit", str(labelled), "--out", str(tmp_path / "m"), "--precision", "tf32"]) == 2
    assert "--precision tf32 is a CUDA device's" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "tf32"])
def test_on_a_gpu_the_fit_and_the_predictions_are_the_cpus(labelled, tmp_path, precision):
    cupy = pytest.importorskip("cupy")
    model, meta = pipeline.fit_dataset(labelled, out=tmp_path / "gpu", device="cuda", precision=precision,
                                       n_components=256, alpha=[0.1, 1.0])
    cpu, _ = pipeline.fit_dataset(labelled, out=tmp_path / "cpu", n_components=256, alpha=[0.1, 1.0])
    tolerance = 1e-3 if precision == "fp32" else 3e-2
    np.testing.assert_allclose(model[-1].coef_, cpu[-1].coef_, rtol=tolerance,
                               atol=tolerance * np.abs(cpu[-1].coef_).max())
    labels = model.predict(on_device(open_data(labelled)[0], "cuda"))
    assert isinstance(labels._meta, cupy.ndarray)  # cupy-backed in, cupy-backed out


def test_the_polynomial_sketch_on_the_device_path_is_the_cpus(labelled, tmp_path):
    fitted = {device: pipeline.fit_dataset(labelled, device=device, features="polysketch", degree=2,
                                           n_components=64, alpha=[0.1, 1.0])[0] for device in ("cpu", "generic")}
    cpu, dev = fitted["cpu"][-1], fitted["generic"][-1]
    np.testing.assert_allclose(dev.coef_, cpu.coef_, rtol=1e-3, atol=1e-3 * np.abs(cpu.coef_).max())
    assert dev.alpha_ == cpu.alpha_


def test_leave_one_out_past_the_eigh_rule_on_the_device_path_is_the_cpus(labelled):
    width = devices.DEVICE_EIGH_MIN + 16  # the client's eigendecomposition made by the device's namespace
    fitted = {device: pipeline.fit_dataset(labelled, device=device, n_components=width, gamma=0.3, cv="loo",
                                           alpha=[1.0, 10.0], calibrate=False)[0] for device in ("cpu", "generic")}
    cpu, dev = fitted["cpu"][-1], fitted["generic"][-1]
    np.testing.assert_allclose(dev.coef_, cpu.coef_, rtol=1e-3, atol=1e-3 * np.abs(cpu.coef_).max())
    assert dev.alpha_ == cpu.alpha_
