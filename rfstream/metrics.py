"""Metrics computed as reductions: error rate, relative RMSE, kernel approximation.

* error rate: fraction of rows whose predicted class differs from the label
  (a label unseen in training, coded -1 by ``convert --like``, is an error);
* relative RMSE: ||y - y_hat||_2 / ||y||_2, the definition of Chen et al.
  (2015, Section 4.2);
* kernel approximation error: ||K - Z Z'||_F / ||K||_F on a sample of rows
  (Chen et al. 2015, Section 4.1; Chang et al. 2017, Section 5.1).
"""
from __future__ import annotations

import dask.array as da
import numpy as np

from .cluster import compute
from .kernels import kernel_matrix
from .random import check_seed, sample_rows


def _sum(a):
    return a.sum(dtype=np.float64) if isinstance(a, da.Array) else np.sum(a, dtype=np.float64)


def error_counts(y_true, y_pred):
    """Lazy (for dask) number of wrong predictions and of rows."""
    wrong = y_true != y_pred
    return _sum(wrong), y_true.shape[0]


def error_rate(y_true, y_pred) -> float:
    """Fraction of misclassified rows; numpy or dask inputs (one reduction)."""
    wrong, n = error_counts(y_true, y_pred)
    return float(compute(wrong)) / max(n, 1)


def squared_error_sums(y_true, y_pred):
    """Lazy (for dask) sum of (y - y_hat)^2 and of y^2, in float64."""
    y_true = y_true.astype(np.float64)
    return _sum((y_true - y_pred) ** 2), _sum(y_true**2)


def relative_rmse(y_true, y_pred) -> float:
    """||y - y_hat|| / ||y|| (Chen et al. 2015, Sec. 4.2); numpy or dask inputs."""
    sse, norm = compute(*squared_error_sums(y_true, y_pred))
    return float(np.sqrt(sse / norm)) if norm > 0 else float("nan")


def kernel_approximation_error(X, feature_map, *, kernel=None, gamma=None, n_samples=1000, random_state=0):
    """Relative Frobenius error ||K - Z Z'||_F / ||K||_F on sampled rows.

    Parameters
    ----------
    X : numpy or dask array (n, d)
        Rows in the feature map's input space; ``n_samples`` of them are
        sampled (only the chunks that hold them are read).
    feature_map : fitted transformer
        Anything with ``transform``; ``kernel`` and ``gamma`` default to its
        ``kernel`` and fitted ``gamma_``.
    """
    kernel = kernel or getattr(feature_map, "kernel", None)
    gamma = gamma if gamma is not None else getattr(feature_map, "gamma_", None)
    if kernel is None or gamma is None:
        raise ValueError(
            "kernel_approximation_error needs kernel= and gamma= when the feature map "
            "does not define kernel and gamma_."
        )
    rows = sample_rows(X, n_samples, check_seed(random_state))
    K = kernel_matrix(rows, rows, kernel, gamma)
    Z = np.asarray(feature_map.transform(rows), dtype=np.float64)
    return float(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))
