"""Frequency samplers: the ``d x m`` matrix ``W`` whose columns are frequencies.

A sampler ``sampler(kernel, gamma, d, m, rng) -> W`` returns a float64 ``(d, m)`` array whose
columns satisfy (at least marginally) ``E[cos(w' (x - y))] = k(x, y)`` for the kernels of
:mod:`rfstream.kernels`; :data:`SAMPLERS` registers each with the kernels it supports.
``"mc"``: i.i.d. draws from the spectral density (Rahimi & Recht 2007, Algorithm 1);
``"qmc"``: a scrambled Sobol sequence through the per-coordinate inverse CDF (Avron et al.
2016, "Quasi-Monte Carlo feature maps for shift-invariant kernels"); ``"orthogonal"``:
Gaussian kernel only (Yu et al. 2016, "Orthogonal Random Features").  Compared: docs/rff.md.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import qmc

from .kernels import (
    KERNELS,
    check_gamma,
    check_kernel,
    frequency_ppf,
    sample_frequencies,
)

#: name -> sampler function; each function has a ``kernels`` attribute.
SAMPLERS: dict = {}

# Sobol uniforms are clipped to [_EPS, 1 - _EPS] before the inverse CDF, so that
# a point on the boundary cannot give an infinite frequency.
_EPS = 2.0**-40


def register(name, kernels=KERNELS):
    """Decorator: register a sampler under ``name`` for the given kernels."""

    def wrap(func):
        func.kernels = tuple(kernels)
        SAMPLERS[name] = func
        return func

    return wrap


def check_sampler(sampler, kernel) -> None:
    """Raise ``ValueError`` if ``sampler`` is unknown or does not support ``kernel``."""
    check_kernel(kernel)
    if not isinstance(sampler, str) or sampler not in SAMPLERS:
        names = ", ".join(repr(s) for s in SAMPLERS)
        raise ValueError(f"sampler must be one of {names}; got {sampler!r}.")
    supported = SAMPLERS[sampler].kernels
    if kernel not in supported:
        others = [s for s, f in SAMPLERS.items() if kernel in f.kernels]
        raise ValueError(
            f"sampler={sampler!r} supports only kernel in {supported}; got "
            f"kernel={kernel!r}. Use sampler in {tuple(others)} for this kernel."
        )


def sample_weights(sampler, kernel, gamma, d, m, rng) -> np.ndarray:
    """Draw the ``(d, m)`` float64 frequency matrix with a registered sampler."""
    check_sampler(sampler, kernel)
    return SAMPLERS[sampler](kernel, check_gamma(gamma), int(d), int(m), rng)


@register("mc")
def sample_mc(kernel, gamma, d, m, rng):
    """Monte Carlo: i.i.d. entries from the kernel's per-coordinate spectral density."""
    return sample_frequencies(kernel, gamma, (d, m), rng)


@register("qmc")
def sample_qmc(kernel, gamma, d, m, rng):
    """Scrambled Sobol points (one per frequency) through the inverse CDF.

    The Sobol engine is seeded from ``rng``; ``2^ceil(log2 m)`` points are drawn
    (balanced sequence) and the first ``m`` kept.
    """
    max_dim = qmc.Sobol.MAXDIM
    if d > max_dim:
        raise ValueError(
            f"sampler='qmc' supports at most {max_dim} input features (Sobol "
            f"dimension); got {d}. Use sampler='mc'."
        )
    engine = qmc.Sobol(d, scramble=True, rng=rng)
    u = engine.random_base2(max(0, math.ceil(math.log2(m))))[:m]  # (m, d)
    np.clip(u, _EPS, 1.0 - _EPS, out=u)
    return np.ascontiguousarray(frequency_ppf(kernel, gamma, u).T)


@register("orthogonal", kernels=("gaussian",))
def sample_orthogonal(kernel, gamma, d, m, rng):
    """Orthogonal random features (Yu et al. 2016), Gaussian kernel only.

    ``ceil(m / d)`` independent blocks ``S Q`` are stacked, where ``Q`` is a
    Haar-random ``d x d`` orthogonal matrix (QR of a Gaussian matrix, signs fixed
    by ``diag(R)``) and ``S`` is diagonal with chi(d) entries (norms of
    ``d``-dimensional standard Gaussian vectors), then scaled by ``sqrt(2 gamma)``.
    Each frequency is then exactly ``N(0, 2 gamma I)``, and the frequencies
    within a block are orthogonal, which lowers the kernel approximation error.
    """
    if kernel != "gaussian":  # pragma: no cover - check_sampler catches it first
        raise ValueError(f"sampler='orthogonal' supports only kernel='gaussian'; got {kernel!r}.")
    blocks = []
    for _ in range(-(-m // d)):
        Q, R = np.linalg.qr(rng.standard_normal((d, d)))
        Q *= np.sign(np.diag(R))  # Haar measure: make the QR unique
        norms = np.linalg.norm(rng.standard_normal((d, d)), axis=1)
        blocks.append(Q * norms)  # column j of Q scaled by chi(d) norm j
    W = np.concatenate(blocks, axis=1)[:, :m]
    W *= np.sqrt(2.0 * gamma)
    return np.ascontiguousarray(W)
