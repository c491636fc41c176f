"""Ridge leverage scores of every row from a random Fourier pilot map: Nystroem's landmark weights.

``NystroemFeatures(landmarks="leverage")`` samples its landmarks with probability proportional
to approximate ridge leverage scores (Alaoui & Mahoney 2015; Musco & Musco 2017, Algorithm 3),
``l_i = z_i' (Z'Z + lambda I)^{-1} z_i`` for pilot features ``z`` of ``D0 = max(2 m, 256)``
columns: one Gram pass (:func:`pilot_gram`), then the landmark pass scores its rows
(:class:`LeverageScores`).  Departs from the papers: one round with a data-independent pilot
instead of their recursion (a pass per level).  Method and measurements: docs/nystroem.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..cluster import compute
from ..features.fourier import RandomFourierFeatures
from ..features.fused import FUSED_SUB_BLOCK, even_sub_blocks
from ..reductions import sum_rows, whole_sum

__all__ = ["LeverageScores", "PILOT_MIN", "leverage_scores", "pilot_gram", "pilot_gram_chunk",
           "pilot_map", "pilot_size", "ridge_lambda", "target_rank"]

#: the fewest columns of the pilot map, whatever ``m``
PILOT_MIN = 256


def pilot_size(m: int) -> int:
    """Columns ``D0 = max(2 m, 256)`` of the pilot map for ``m`` landmarks (even: cosines and sines)."""
    return max(2 * int(m), PILOT_MIN)


def pilot_map(n_features: int, m: int, kernel: str, gamma: float, rng) -> RandomFourierFeatures:
    """The pilot map: random Fourier features ("cossin", float32, so ``trace(Z'Z) = n =
    trace(K)``) of the landmarks' kernel, seeded from ``rng``, the Nystroem map's generator."""
    seed = int(rng.integers(0, 2**32 - 1))  # a random_state every map accepts
    return RandomFourierFeatures.for_columns(n_features, n_components=pilot_size(m), kernel=kernel,
                                             gamma=gamma, variant="cossin", random_state=seed,
                                             dtype="float32")


def pilot_gram_chunk(x, *, offset, pilot):
    """``Z'Z`` of the pilot features of rows ``x``, raveled, float64.

    One float32 SYRK per sub-block of at most ``FUSED_SUB_BLOCK`` rows, added in float64
    (as the ridge Gram, :mod:`rfstream.solvers.ridge.gram`).  ``offset`` is unused: a row's
    features depend on the row alone.
    """
    D = int(pilot.n_components)
    G = np.zeros((D, D), dtype=np.float64)
    for start, stop in even_sub_blocks(x.shape[0], FUSED_SUB_BLOCK):
        z = pilot.block(x[start:stop])
        G += z.T @ z
    return G.ravel()


def pilot_gram(X, pilot, *, split_every=None):
    """``Z'Z`` (float64, ``D0 x D0``) of the pilot features of every row of ``X``: one pass."""
    D = int(pilot.n_components)
    spans = [(0, 1, D)]  # travels as its triangle (rfstream.triangles)
    return whole_sum(compute(sum_rows(partial(pilot_gram_chunk, pilot=pilot), D * D, X, split_every=split_every,
                                      symmetric=spans)), D * D, spans).reshape(D, D)


def target_rank(m: int) -> int:
    """``k = ceil(m / (4 ln m))``, ``ln m`` floored at 1: the rank whose ``lambda`` suits ``m``
    samples (Musco & Musco 2017, Algorithm 3, ``recursiveNystrom.m``)."""
    m = int(m)
    return max(1, math.ceil(m / (4.0 * max(math.log(m), 1.0))))


def ridge_lambda(eigenvalues, m: int) -> float:
    """``lambda = (trace - sum of the k largest eigenvalues) / k``, ``k = target_rank(m)``, for
    the eigenvalues of the pilot's ``Z'Z``; a zero tail is floored at ``1e-10 trace``."""
    s = np.sort(np.clip(np.asarray(eigenvalues, dtype=np.float64), 0.0, None))[::-1]
    k = target_rank(m)
    trace = float(s.sum())
    tail = trace - float(s[:k].sum())
    return max(tail / k, 1e-10 * trace, np.finfo(np.float64).tiny)


@dataclass(frozen=True, eq=False)
class LeverageScores:
    """``x -> l(x) = ||pilot(x) @ factor||^2``: approximate ridge leverage scores of rows.

    ``factor = V diag(s + lambda)^{-1/2}`` (float32, ``D0 x D0``) for ``Z'Z = V diag(s) V'``,
    so ``l(x) = z' (Z'Z + lambda I)^{-1} z``, in ``[0, 1)`` for a training row.  Pure numpy,
    picklable: it travels into the landmark pass's tasks, which call it on their rows
    (dense or sparse), a sub-block at a time.
    """

    pilot: RandomFourierFeatures
    factor: np.ndarray

    def __call__(self, x):
        out = np.empty(x.shape[0], dtype=np.float64)
        for start, stop in even_sub_blocks(x.shape[0], FUSED_SUB_BLOCK):
            y = self.pilot.block(x[start:stop]) @ self.factor
            out[start:stop] = np.einsum("ij,ij->i", y, y, dtype=np.float64)
        return out


def leverage_scores(X, pilot, m, *, split_every=None):
    """``(scores, lambda, d_eff)`` for ``m`` landmarks after the pilot's Gram pass over ``X``:
    a :class:`LeverageScores`, :func:`ridge_lambda` and ``sum_j s_j / (s_j + lambda)``."""
    s, V = np.linalg.eigh(pilot_gram(X, pilot, split_every=split_every))
    s = np.clip(s, 0.0, None)
    lam = ridge_lambda(s, m)
    factor = (V / np.sqrt(s + lam)).astype(np.float32)
    return LeverageScores(pilot, factor), lam, float(np.sum(s / (s + lam)))
