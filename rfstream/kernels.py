"""Shift-invariant kernels, their spectral densities, and the bandwidth rule.

Rahimi & Recht (2007), Figure 1, with a bandwidth ``gamma > 0``: by Bochner's theorem
``k(delta) = E_w[cos(w' delta)]`` with i.i.d. coordinates ``w_j`` -- gaussian
``exp(-gamma ||delta||_2^2)``, ``w_j ~ Normal(0, var=2 gamma)``; laplacian
``exp(-gamma ||delta||_1)``, ``w_j ~ Cauchy(0, scale=gamma)``; cauchy
``prod_j 1 / (1 + gamma delta_j^2)``, ``w_j ~ Laplace(0, scale=sqrt(gamma))``.  Departs from
the paper: the Cauchy kernel is normalised to ``k(0) = 1``.  :func:`kernel_matrix` is a test
oracle; :func:`auto_gamma` the papers' bandwidth rule.  Derivation: docs/kernels.md.
"""
from __future__ import annotations

import numbers

import numpy as np
from scipy import special, stats

from .cluster import compute
from .devices import take_rows, to_host
from .options import KERNELS
from .preprocess import gather_rows
from .random import sample_row_indices

# Distance that each kernel is a function of (for the bandwidth rule).
_METRIC = {"gaussian": "euclidean", "laplacian": "manhattan", "cauchy": "euclidean"}


def check_kernel(kernel) -> str:
    """Return ``kernel`` if it is a known kernel name, else raise ``ValueError``."""
    if not isinstance(kernel, str) or kernel not in KERNELS:
        names = ", ".join(repr(k) for k in KERNELS)
        raise ValueError(f"kernel must be one of {names}; got {kernel!r}.")
    return kernel


def check_gamma(gamma) -> float:
    """Return ``gamma`` as a float if it is a finite real > 0, else raise ``ValueError``."""
    if (
        not isinstance(gamma, numbers.Real)
        or isinstance(gamma, bool)
        or not np.isfinite(gamma)
        or gamma <= 0
    ):
        raise ValueError(f"gamma must be a finite float > 0; got {gamma!r}.")
    return float(gamma)


# ---------------------------------------------------------------------------
# exact kernels
# ---------------------------------------------------------------------------
def kernel_matrix(X, Y=None, kernel="gaussian", gamma=1.0) -> np.ndarray:
    """Exact kernel matrix ``K[i, j] = k(X[i], Y[j])`` (float64).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    Y : ndarray of shape (m, d), default=None
        ``None`` means ``Y = X``.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        ``exp(-gamma ||x-y||_2^2)`` (:func:`sklearn.metrics.pairwise.rbf_kernel`),
        ``exp(-gamma ||x-y||_1)`` (:func:`~sklearn.metrics.pairwise.laplacian_kernel`),
        ``prod_j 1 / (1 + gamma (x_j - y_j)^2)`` (separable Cauchy).
    gamma : float > 0, default=1.0

    Returns
    -------
    K : ndarray of shape (n, m)

    Notes
    -----
    Builds dense ``n x m`` matrices: meant for test oracles and metrics on
    samples, not for full datasets.
    """
    from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

    kernel = check_kernel(kernel)
    gamma = check_gamma(gamma)
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"X and Y must be 2-d with the same number of columns; got shapes {X.shape} "
            f"and {Y.shape}."
        )
    if kernel == "gaussian":
        return rbf_kernel(X, Y, gamma=gamma)
    if kernel == "laplacian":
        return laplacian_kernel(X, Y, gamma=gamma)
    # Cauchy: one column at a time keeps memory at n x m.
    K = np.ones((X.shape[0], Y.shape[0]))
    for j in range(X.shape[1]):
        diff = X[:, j, None] - Y[None, :, j]
        diff *= diff
        diff *= gamma
        diff += 1.0
        K /= diff
    return K


# ---------------------------------------------------------------------------
# spectral densities
# ---------------------------------------------------------------------------
def frequency_distribution(kernel, gamma):
    """Per-coordinate law of the frequencies, as a frozen ``scipy.stats`` distribution.

    The frequency vector ``w`` has i.i.d. coordinates with this law, and
    ``E[cos(w' (x - y))] = k(x, y)`` (see the module docstring).
    """
    kernel = check_kernel(kernel)
    gamma = check_gamma(gamma)
    if kernel == "gaussian":
        return stats.norm(loc=0.0, scale=np.sqrt(2.0 * gamma))
    if kernel == "laplacian":
        return stats.cauchy(loc=0.0, scale=gamma)
    return stats.laplace(loc=0.0, scale=np.sqrt(gamma))


def sample_frequencies(kernel, gamma, size, rng) -> np.ndarray:
    """Draw i.i.d. frequency coordinates from the kernel's spectral density (float64).

    Parameters
    ----------
    kernel : {"gaussian", "laplacian", "cauchy"}
    gamma : float > 0
    size : int or tuple of int
    rng : numpy.random.Generator
    """
    kernel = check_kernel(kernel)
    gamma = check_gamma(gamma)
    if kernel == "gaussian":
        return rng.normal(0.0, np.sqrt(2.0 * gamma), size=size)
    if kernel == "laplacian":
        return gamma * rng.standard_cauchy(size=size)
    return rng.laplace(0.0, np.sqrt(gamma), size=size)


#: How a frequency scales with gamma: ``w(gamma) = gamma**exponent * w(1)`` (the laws
#: above are scale families: standard deviation sqrt(2 gamma), scale gamma, scale sqrt(gamma)).
FREQUENCY_SCALE_EXPONENT = {"gaussian": 0.5, "laplacian": 1.0, "cauchy": 0.5}


def frequency_scale(kernel, gamma) -> float:
    """The factor that turns frequencies drawn for ``gamma = 1`` into frequencies of ``gamma``.

    Every sampler of :mod:`rfstream.samplers` draws from a scale family, so
    ``frequency_scale(kernel, g) * W(1)`` has exactly the law of ``W(g)``: the
    bandwidth grid of :mod:`rfstream.features.grid` draws once and scales.
    """
    return float(check_gamma(gamma) ** FREQUENCY_SCALE_EXPONENT[check_kernel(kernel)])


def frequency_ppf(kernel, gamma, u) -> np.ndarray:
    """Inverse CDF of the per-coordinate frequency law, for ``u`` in (0, 1).

    Used by the quasi-Monte Carlo sampler (inverse-transform sampling).
    ``u`` equal to 0 or 1 gives infinities: clip it first.
    """
    kernel = check_kernel(kernel)
    gamma = check_gamma(gamma)
    u = np.asarray(u, dtype=np.float64)
    if kernel == "gaussian":
        return np.sqrt(2.0 * gamma) * special.ndtri(u)
    if kernel == "laplacian":
        return gamma * np.tan(np.pi * (u - 0.5))
    # Laplace(0, b): -b sign(u - 1/2) log(1 - 2 |u - 1/2|)
    c = u - 0.5
    return -np.sqrt(gamma) * np.sign(c) * np.log1p(-2.0 * np.abs(c))


# ---------------------------------------------------------------------------
# bandwidth rule
# ---------------------------------------------------------------------------
def _gamma_from_sigma(kernel, sigma):
    # k(x, y) written with a length scale sigma:
    #   gaussian  exp(-||d||_2^2 / (2 sigma^2))  -> gamma = 1 / (2 sigma^2)
    #   laplacian exp(-||d||_1 / sigma)          -> gamma = 1 / sigma
    #   cauchy    prod 1 / (1 + d_j^2 / sigma^2) -> gamma = 1 / sigma^2
    if kernel == "gaussian":
        return 1.0 / (2.0 * sigma**2)
    if kernel == "laplacian":
        return 1.0 / sigma
    return 1.0 / sigma**2


#: rows ``gamma="auto"`` samples (:func:`auto_gamma`)
AUTO_SAMPLE_ROWS = 1000


def auto_sample_indices(n_rows, random_state, n_samples=AUTO_SAMPLE_ROWS):
    """The rows :func:`auto_gamma` samples from ``n_rows`` with ``random_state``."""
    return sample_row_indices(n_rows, n_samples, np.random.default_rng(random_state))


def auto_gamma(X, kernel="gaussian", *, n_samples=AUTO_SAMPLE_ROWS, k=50, random_state=None) -> float:
    """Bandwidth rule of the papers: gamma from the mean k-th nearest-neighbour distance.

    ``sigma`` is the mean, over ``n_samples`` rows sampled without replacement
    from ``X``, of the distance from each sampled row to its ``k``-th nearest
    neighbour among the other sampled rows, measured with the kernel's own
    distance (L2 for "gaussian" and "cauchy", L1 for "laplacian").  Then
    ``sigma`` is the kernel's length scale:

    * gaussian: ``exp(-||x-y||_2^2 / (2 sigma^2))``, so ``gamma = 1 / (2 sigma^2)``;
    * laplacian: ``exp(-||x-y||_1 / sigma)``, so ``gamma = 1 / sigma``;
    * cauchy: ``prod_j 1 / (1 + (x_j-y_j)^2 / sigma^2)``, so ``gamma = 1 / sigma^2``.

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n, d)
        A dask array is never loaded: the sampled row indices are sorted and
        gathered with ``X[idx]``, which reads only the chunks that hold them.
        Its number of rows must be known.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
    n_samples : int, default=1000
        Rows sampled.  If ``X`` has fewer rows, all rows are used.
    k : int, default=50
        Neighbour rank; capped at ``(number of rows used) - 1``.
    random_state : None, int or numpy.random.Generator
        Seed of the row sample; the same seed picks the same rows of a numpy
        and a dask array.

    Returns
    -------
    gamma : float
    """
    kernel = check_kernel(kernel)
    for name, value, low in (("n_samples", n_samples, 2), ("k", k, 1)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low}; got {value!r}.")
    if getattr(X, "ndim", None) != 2:
        raise ValueError(
            f"X must be a 2-d array; got {type(X).__name__} with ndim={getattr(X, 'ndim', None)}."
        )
    n = X.shape[0]
    if not isinstance(n, numbers.Integral) and not np.isfinite(n):
        raise ValueError(
            "X has an unknown number of rows (nan chunk sizes); call "
            "X.compute_chunk_sizes() first or pass a float gamma."
        )
    n = int(n)
    if n < 2:
        raise ValueError(f"gamma='auto' needs at least 2 rows in X; got n_samples={n}.")
    idx = auto_sample_indices(n, random_state, n_samples)
    k = min(int(k), idx.size - 1)

    if hasattr(X, "dask") and not hasattr(X, "iloc"):  # gather only the touched chunks, through the one door
        sample, finish = gather_rows(X, idx)
        sample = to_host(compute(sample))  # rows on a device: the sample's distances on the host
        sample = sample if finish is None else finish(sample)
    else:
        sample = X.iloc[idx] if hasattr(X, "iloc") else to_host(take_rows(X, idx))

    from sklearn.metrics import pairwise_distances

    D = pairwise_distances(sample, metric=_METRIC[kernel])
    # Column 0 of the sorted row is the row itself (distance 0), so rank k is
    # the k-th nearest *other* sampled row.
    kth = np.partition(D, k, axis=1)[:, k]
    sigma = float(np.mean(kth))
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(
            f"gamma='auto' failed: the mean distance to the {k}-th nearest neighbour "
            f"is {sigma} (duplicated rows or non-finite values in X); pass a float gamma."
        )
    return float(_gamma_from_sigma(kernel, sigma))
