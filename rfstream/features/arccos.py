"""Random features of the arc-cosine kernels (Cho & Saul 2009)."""
from __future__ import annotations

import math
from numbers import Integral
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval

from .base import FeatureMap

__all__ = ["ArcCosineFeatures", "arccos_kernel"]


def arccos_kernel(X, Y=None, degree=1) -> np.ndarray:
    r"""Exact arc-cosine kernel matrix of degree 0, 1 or 2 (Cho & Saul 2009, eqs. 1-3).

    ``k_n(x, y) = (1/pi) ||x||^n ||y||^n J_n(theta)`` with ``theta`` the angle
    between ``x`` and ``y`` and ``J_0 = pi - theta``,
    ``J_1 = sin theta + (pi - theta) cos theta``,
    ``J_2 = 3 sin theta cos theta + (pi - theta)(1 + 2 cos^2 theta)``.
    Dense float64 numpy; a test oracle for :class:`ArcCosineFeatures`.
    """
    if degree not in (0, 1, 2):
        raise ValueError(f"degree must be 0, 1 or 2; got {degree!r}.")
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    nx, ny = np.linalg.norm(X, axis=1), np.linalg.norm(Y, axis=1)
    denom = np.outer(nx, ny)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(denom > 0, (X @ Y.T) / denom, 1.0)
    cos = np.clip(cos, -1.0, 1.0)
    theta = np.arccos(cos)
    sin = np.sqrt(1.0 - cos**2)
    if degree == 0:
        J = np.pi - theta
    elif degree == 1:
        J = sin + (np.pi - theta) * cos
    else:
        J = 3.0 * sin * cos + (np.pi - theta) * (1.0 + 2.0 * cos**2)
    return denom**degree * J / np.pi


class ArcCosineFeatures(FeatureMap):
    r"""Random features of the arc-cosine kernel of degree 0, 1 or 2.

    Cho & Saul (2009, eq. 1) write the arc-cosine kernel of degree ``n`` as
    ``k_n(x, y) = 2 E_w[H(w'x) H(w'y) (w'x)^n (w'y)^n]`` with
    ``w ~ N(0, I_d)`` and ``H`` the Heaviside step.  Averaging over ``m``
    draws gives the unbiased map

    ``z(x) = sqrt(2/m) [H(w_i'x) (w_i'x)^n]_{i=1..m}``,

    i.e. a one-layer network of random threshold (n=0), ReLU (n=1) or
    ramp-squared (n=2) units.  These are the feature maps of Table 4 of
    Shahrampour, Beirami & Tarokh (2018) (``(w'x)^n H(w'x)``, ``w ~ N(0, I_d)``)
    and the "arccos0/1/2" bases of :class:`~rfstream.EERFFeatures`.  The kernel
    is homogeneous of degree ``n`` in each argument: it has no bandwidth, so
    standardize ``X`` first.  Prefix maps (:mod:`rfstream.features.prefix`):
    the first ``n`` columns, times ``sqrt(m / n)``, are the map of the first ``n``
    draws ``w_i``.

    Parameters
    ----------
    n_components : int, default=100
        Number of features ``m``.
    degree : {0, 1, 2}, default=1
        Degree ``n`` of the kernel.
    random_state : int, numpy Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features_in_, n_components)
        The ``w_i`` (one per column), in ``dtype``.
    n_features_in_ : int

    References
    ----------
    Y. Cho and L. K. Saul, "Kernel Methods for Deep Learning", NIPS 2009.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import ArcCosineFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> ArcCosineFeatures(8, degree=1, random_state=0).fit_transform(X).shape
    (5, 8)
    """

    _parameter_constraints: ClassVar[dict] = {
        **FeatureMap._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left"), "array-like", str],
        "degree": [Interval(Integral, 0, 2, closed="both")],
    }

    prefix_valid = True

    def __init__(self, n_components=100, *, degree=1, random_state=None, dtype="float32"):
        self.n_components = n_components
        self.degree = degree
        self.random_state = random_state
        self.dtype = dtype

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`)."""
        view.array("random_weights_", (view.int("n_features_in_"), view.int("n_components", param=True)))

    def _draw(self, rng, n_features):
        W = rng.standard_normal((n_features, self.n_components))
        self.random_weights_ = W.astype(self._output_dtype())

    @property
    def _n_features_out(self):
        return self.random_weights_.shape[1]

    def _keep_prefix(self, n):
        self.random_weights_ = self.random_weights_[:, :n].copy()

    def _block(self, x):
        W = self.random_weights_
        proj = np.asarray(x.astype(W.dtype) @ W) if sp.issparse(x) else np.asarray(x, W.dtype) @ W
        scale = math.sqrt(2.0 / W.shape[1])  # a Python float keeps the float32 loop
        if self.degree == 0:
            return (proj > 0).astype(W.dtype) * scale
        np.maximum(proj, 0, out=proj)
        if self.degree == 2:
            np.square(proj, out=proj)
        proj *= scale
        return proj
