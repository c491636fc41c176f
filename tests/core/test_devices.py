"""rfstream.devices: namespaces, the host copy, the device and precision checks, and the moments
and standardizing of rows in another namespace (array_api_strict), equal to the numpy path's."""
from __future__ import annotations

import numpy as np
import pytest

import array_api_strict as xps

from rfstream import devices
from rfstream.devices import DeviceError, GenericRows, array_namespace, check_device, check_precision, to_host
from rfstream.options import ParameterError
from rfstream.preprocess import Standardizer
from rfstream.reductions import moments_chunk

RNG = np.random.default_rng(0)
X = RNG.normal(3.0, 2.0, size=(257, 5)).astype(np.float32)


def test_namespaces_of_numpy_generic_rows_and_a_standard_array():
    assert array_namespace(X) is np
    assert array_namespace(X.view(GenericRows)) is np
    assert array_namespace(xps.asarray(X)) is xps
    assert devices.is_numpy(X) and not devices.is_numpy(X.view(GenericRows))
    assert not devices.is_numpy(xps.asarray(X))


def test_to_host_gives_plain_numpy_with_the_same_numbers():
    for a in (X, X.view(GenericRows), xps.asarray(X)):
        host = to_host(a)
        assert type(host) is np.ndarray
        np.testing.assert_array_equal(host, X)


def test_device_names_are_checked():
    assert check_device("cpu") == "cpu" and check_device(None) == "cpu"
    with pytest.raises(ParameterError, match="device must be one of cpu, cuda, auto; got 'gpu'"):
        check_device("gpu")


@pytest.mark.skipif(devices.cuda_available()[0], reason="a CUDA device is present")
def test_cuda_without_a_device_is_one_line_naming_the_extra_and_the_cpu():
    with pytest.raises(DeviceError) as info:
        check_device("cuda")
    message = str(info.value)
    assert "\n" not in message
    assert 'pip install "rfstream[cuda]"' in message and "device='cpu'" in message
    assert check_device("auto") == "cpu"


def test_tf32_is_a_device_precision():
    assert check_precision(None, "cpu") == "fp32"
    assert check_precision("tf32", "cuda") == "tf32"
    with pytest.raises(ParameterError, match="precision='tf32' is a CUDA device's"):
        check_precision("tf32", "cpu")
    with pytest.raises(ParameterError, match="precision must be one of fp32, tf32"):
        check_precision("bf17", "cuda")


@pytest.mark.parametrize("rows", [lambda x: x.view(GenericRows), xps.asarray], ids=["generic", "strict"])
def test_moments_of_rows_in_another_namespace_equal_numpys(rows):
    np.testing.assert_allclose(moments_chunk(rows(X)), moments_chunk(X), rtol=1e-12)
    assert moments_chunk(rows(X[:0])).shape == moments_chunk(X[:0]).shape


@pytest.mark.parametrize("rows", [lambda x: x.view(GenericRows), xps.asarray], ids=["generic", "strict"])
def test_standardizing_rows_in_another_namespace_equals_numpys(rows):
    scaler = Standardizer().fit(X)
    got = scaler._block(rows(X))
    assert array_namespace(got) is array_namespace(rows(X))
    np.testing.assert_allclose(to_host(got), scaler._block(X), rtol=1e-6, atol=1e-6)


def test_the_clients_eigh_moves_to_the_jobs_device_from_its_rule_up():
    A = np.random.default_rng(2).normal(size=(devices.DEVICE_EIGH_MIN, 40))
    G = A @ A.T + np.eye(A.shape[0])
    assert devices.symmetric_eigh(G) is None  # outside a job on a device
    with devices.running_on("generic"):
        values, vectors = devices.symmetric_eigh(G)
        assert devices.symmetric_eigh(G[:-1, :-1]) is None  # below the rule's order
    np.testing.assert_allclose(vectors @ (values[:, None] * vectors.T), G, atol=1e-8)
    with devices.running_on("cpu"):
        assert devices.symmetric_eigh(G) is None
