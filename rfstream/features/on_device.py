"""Feature maps' block functions on a device: the same features, written against the rows' namespace.

A map that runs on a device (:data:`rfstream.devices.ON_DEVICE`) gives, beside its numpy block
function, a picklable twin ``(x) -> features`` in ``x``'s array namespace (numpy, cupy,
array_api_strict): :class:`FourierOnDevice` for random Fourier features (Rahimi & Recht 2007,
Algorithm 1: every kernel and sampler, whose draws differ only on the client), and
:class:`PrefixOnDevice` for one size of a list of ``n_components``.  :func:`device_block`
finds the twin of a pass's block function.  The weights move to the device once per worker
(:func:`rfstream.devices.on_device_once`).  docs/gpu.md.
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import numpy as np

from ..devices import array_namespace, on_device_once
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
