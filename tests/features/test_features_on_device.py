"""The device twins of random Fourier features (rfstream.features.on_device): every kernel,
sampler and variant, the prefix sizes and a gamma grid's maps give the numpy block's features
to float32 rounding, on array_api_strict rows."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import array_api_strict as xps

from rfstream.devices import array_namespace, to_host
from rfstream.features import RandomFourierFeatures
from rfstream.features.components import prefix_block
from rfstream.features.on_device import device_block

X = np.random.default_rng(1).normal(size=(300, 6)).astype(np.float32)


@pytest.mark.parametrize("kernel,sampler", [("gaussian", "mc"), ("gaussian", "orthogonal"), ("gaussian", "qmc"),
                                            ("laplacian", "mc"), ("cauchy", "qmc")])
@pytest.mark.parametrize("variant", ["cos", "cossin"])
def test_fourier_features_on_another_namespace_equal_numpys(kernel, sampler, variant):
    rff = RandomFourierFeatures(64, kernel=kernel, sampler=sampler, variant=variant, gamma=0.3,
                                random_state=0).fit(X)
    twin = device_block(rff._fused_block())
    got = twin(xps.asarray(X))
    assert array_namespace(got) is xps
    np.testing.assert_allclose(to_host(got), rff.transform(X), rtol=2e-5, atol=2e-6)


def test_a_size_of_a_list_is_the_largest_maps_prefix_on_the_device_too():
    rff = RandomFourierFeatures(64, gamma=0.5, random_state=0).fit(X)
    columns = rff._prefix_columns(16)
    block = partial(prefix_block, block=rff._fused_block(), columns=columns, scale=2.0)
    np.testing.assert_allclose(to_host(device_block(block)(xps.asarray(X))), block(X), rtol=2e-5, atol=2e-6)


def test_each_gamma_of_a_grid_has_its_twin():
    rff = RandomFourierFeatures(32, gamma=[0.1, 1.0], random_state=0).fit(X)
    for gamma in (0.1, 1.0):
        one = rff.at_gamma(gamma)
        np.testing.assert_allclose(to_host(device_block(one._fused_block())(xps.asarray(X))), one._block(X),
                                   rtol=2e-5, atol=2e-6)


def test_a_block_without_a_twin_has_none():
    assert device_block(lambda x, out=None: x) is None
    assert device_block(None) is None


@pytest.mark.parametrize("coef0", [0.0, 1.0])
def test_the_polynomial_sketch_on_another_namespace_equals_numpys(coef0):
    from rfstream.features import PolynomialCountSketch

    sketch = PolynomialCountSketch(degree=3, coef0=coef0, gamma=0.5, n_components=64, random_state=0).fit(X)
    twin = device_block(sketch._fused_block())
    got = twin(xps.asarray(X))
    assert array_namespace(got) is xps
    np.testing.assert_allclose(to_host(got), sketch.transform(X), rtol=1e-4, atol=1e-5)
