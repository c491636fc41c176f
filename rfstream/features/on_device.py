"""Feature maps' block functions on a device: the same features, written against the rows' namespace.

A map that runs on a device (:data:`rfstream.devices.ON_DEVICE`) gives, beside its numpy block
function, a picklable twin ``(x) -> features`` in ``x``'s array namespace (numpy, cupy,
array_api_strict): :class:`FourierOnDevice` for random Fourier features (Rahimi & Recht 2007,
Algorithm 1: every kernel and sampler, whose draws differ only on the client),
:class:`SketchOnDevice` for the polynomial sketch, and
:class:`PrefixOnDevice` for one size of a list of ``n_components``.  :func:`device_block`
finds the twin of a pass's block function.  The weights move to the device once per worker
(:func:`rfstream.devices.on_device_once`).  docs/gpu.md.
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import numpy as np
from dask.base import normalize_token

from ..devices import array_namespace, on_device_once, xp_dtype
from .components import prefix_block


class FourierOnDevice(NamedTuple):
    """Random Fourier features of rows ``x`` in their namespace, in ``W``'s dtype: ``sqrt(2/m)
    cos(x W + b)`` ("cos") or ``sqrt(1/m) [cos(x W), sin(x W)]`` ("cossin"), as
    :class:`rfstream.features.RandomFourierFeatures`' numpy block makes them."""

    W: np.ndarray
    b: np.ndarray | None
    variant: str

    def __call__(self, x):
        xp = array_namespace(x)
        W = on_device_once(self.W, xp)
        m = self.W.shape[1]
        proj = xp.matmul(xp.astype(x, W.dtype), W)
        if self.variant == "cos":
            proj = proj + on_device_once(self.b, xp)
            return xp.cos(proj) * math.sqrt(2.0 / m)
        return xp.concat([xp.cos(proj), xp.sin(proj)], axis=1) * math.sqrt(1.0 / m)


class SketchOnDevice:
    """The polynomial count sketch (Pham & Pagh 2013, TensorSketch) of rows ``x`` in their
    namespace: per degree, the count sketch of ``[sqrt(gamma) x, sqrt(coef0)]`` as a product
    with the ``(d, D)`` matrix holding ``sign[j]`` at ``(j, index[j])`` (the standard has no
    scatter-add; the CPU adds columns), their FFTs multiplied, one inverse FFT, in float64 and
    cast to ``dtype`` as the numpy block does.  The matrices are made on first use in each
    process and kept with the object (one key of the pass's graph)."""

    def __init__(self, index_hash, bit_hash, gamma, coef0, width, dtype):
        self.index_hash, self.bit_hash = index_hash, bit_hash
        self.gamma, self.coef0, self.width, self.dtype = float(gamma), float(coef0), int(width), np.dtype(dtype)
        self._matrices = None

    def __getstate__(self):
        return {**self.__dict__, "_matrices": None}

    def __dask_tokenize__(self):
        return normalize_token((type(self).__name__, self.index_hash, self.bit_hash, self.gamma, self.coef0,
                                self.width, self.dtype.name))

    def __call__(self, x):
        xp = array_namespace(x)
        if self._matrices is None:
            self._matrices = []
            for index, sign in zip(self.index_hash, self.bit_hash):
                S = np.zeros((index.shape[0], self.width))
                np.add.at(S, (np.arange(index.shape[0]), index), sign)
                self._matrices.append(S)
        xs = xp.astype(x, xp.float64) * math.sqrt(self.gamma)
        if self.coef0 != 0:
            xs = xp.concat([xs, xp.full((xs.shape[0], 1), math.sqrt(self.coef0), dtype=xp.float64)], axis=1)
        product = None
        for S in self._matrices:
            spectrum = xp.fft.rfft(xp.matmul(xs, on_device_once(S, xp)), axis=1)
            product = spectrum if product is None else product * spectrum
        return xp.astype(xp.fft.irfft(product, n=self.width, axis=1), xp_dtype(xp, self.dtype))


class PrefixOnDevice(NamedTuple):
    """One size of a list of ``n_components``: the largest map's ``columns`` times ``scale``
    (:func:`rfstream.features.components.prefix_block`)."""

    block: object
    columns: np.ndarray
    scale: float

    def __call__(self, x):
        z = self.block(x)
        xp = array_namespace(z)
        return xp.take(z, on_device_once(np.asarray(self.columns, dtype=np.int64), xp), axis=1) * self.scale


class DeviceTwin(NamedTuple):
    """A numpy block function ``block(x, out=None)`` that also has a ``device`` twin."""

    block: object
    device: object

    def __call__(self, x, out=None):
        return self.block(x, out)


def device_block(block):
    """The device twin of a pass's block function, or None when the map has none."""
    if block is None:
        return None
    if isinstance(block, partial) and block.func is prefix_block:
        inner = device_block(block.keywords["block"])
        return None if inner is None else PrefixOnDevice(inner, block.keywords["columns"],
                                                         float(block.keywords["scale"]))
    return getattr(block, "device", None)
