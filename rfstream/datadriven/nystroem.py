"""Nystroem features: landmarks sampled by per-row keys, ``k(x, landmarks) K_mm^{+1/2}``.

Williams & Seeger 2001 (Drineas & Mahoney 2005).  Every row gets a key from
``row_uniform(seed, STREAM_NYSTROEM_LANDMARKS, row)`` (or, for ``landmarks="leverage"``,
Efraimidis & Spirakis' weighted key over its ridge leverage score) and the ``m`` rows with the
smallest keys are the landmarks: one tree reduction (:func:`landmark_chunk`,
:func:`merge_landmarks`), the same landmarks whatever the chunking.  Departs from
scikit-learn: a rank cutoff in ``K_mm^{+1/2}`` instead of clipping.  Method: docs/nystroem.md.
"""
from __future__ import annotations

import warnings
from functools import partial

import dask.array as da
import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import StrOptions

from .._validation import check_dask_array
from ..cluster import compute
from ..kernels import kernel_matrix
from ..random import STREAM_NYSTROEM_LANDMARKS, row_uniform
from ..reductions import reduce_rows
from ..features.base import KernelFeatureMap
from ..features.fused import FUSED_SUB_BLOCK, even_sub_blocks
from .leverage import leverage_scores, pilot_map

__all__ = ["LANDMARKS", "NystroemFeatures", "inverse_sqrt", "landmark_chunk", "merge_landmarks",
           "row_keys", "sample_landmarks"]

#: how the landmarks are sampled (``NystroemFeatures(landmarks=...)``)
LANDMARKS = ("uniform", "leverage")
#: the smallest weight of a row in a weighted sample (a row of weight 0 keeps a finite key)
MIN_WEIGHT = 1e-12


# ------------------------------------------------------------------ the landmark pass
def _pack(keys, index, rows, k):
    """``[keys (k), row indices (k), rows (k x d)]`` as one float64 vector, padded with key inf."""
    d = rows.shape[1]
    out = np.empty(k * (d + 2), dtype=np.float64)
    out[:k] = np.inf
    out[k:2 * k] = -1.0
    out[2 * k:] = 0.0
    j = keys.shape[0]
    out[:j] = keys
    out[k:k + j] = index
    out[2 * k:2 * k + j * d] = rows.ravel()
    return out


def _smallest(keys, index, k):
    """Positions of the ``k`` smallest ``(key, index)`` pairs, smallest first."""
    if keys.shape[0] > k:  # only the candidates at or below the k-th key need sorting
        cut = np.partition(keys, k - 1)[k - 1]
        candidates = np.flatnonzero(keys <= cut)
    else:
        candidates = np.arange(keys.shape[0])
    order = np.lexsort((index[candidates], keys[candidates]))[:k]
    return candidates[order]


def row_keys(x, offset, seed, weights=None):
    """The keys of rows ``x`` (global rows ``offset, ...``): ``u = row_uniform(seed,
    STREAM_NYSTROEM_LANDMARKS, row)``, or with ``weights`` (a function of the rows)
    ``-log(1 - u) / w(x)``, Efraimidis & Spirakis' (2006) weighted keys in logarithms."""
    u = row_uniform(seed, STREAM_NYSTROEM_LANDMARKS, offset, offset + x.shape[0])
    if weights is None:
        return u
    return -np.log1p(-u) / np.maximum(weights(x), MIN_WEIGHT)


def landmark_chunk(x, *, offset, k, seed, weights=None):
    """Partial of the landmark pass for rows ``x`` starting at global row ``offset``.

    The ``min(k, rows)`` rows of ``x`` with the smallest keys (:func:`row_keys`), packed
    with their keys and global indices (:func:`merge_landmarks` reads them).  ``x`` is
    dense or ``scipy.sparse``.
    """
    n, d = x.shape
    keys = row_keys(x, offset, seed, weights)
    index = np.arange(offset, offset + n, dtype=np.float64)
    pick = _smallest(keys, index, k)
    rows = x[pick]
    rows = np.asarray(rows.toarray() if sp.issparse(rows) else rows, dtype=np.float64)
    return _pack(keys[pick], index[pick], rows.reshape(-1, d), k)


def merge_landmarks(parts, axis=0, keepdims=True, *, k):
    """Combine packed partials (one per row of ``parts``): the ``k`` smallest keys of all."""
    parts = np.atleast_2d(parts)
    d = parts.shape[1] // k - 2
    keys = parts[:, :k].ravel()
    index = parts[:, k:2 * k].ravel()
    rows = parts[:, 2 * k:].reshape(-1, d)
    valid = np.flatnonzero(np.isfinite(keys))
    pick = valid[_smallest(keys[valid], index[valid], k)]
    out = _pack(keys[pick], index[pick], rows[pick], k)
    return out[None, :] if keepdims else out


def sample_landmarks(X, k, seed, *, weights=None, split_every=None):
    """``(indices, rows)``: the ``min(k, n)`` rows of ``X`` with the smallest keys, by row index.

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n, d)
        A dask array needs known row chunks; it is read once, by a tree
        reduction whose partials hold ``k`` rows each.
    k : int
        Number of landmarks.
    seed : int
        Seed of the per-row keys.
    weights : callable, optional
        ``rows -> (rows,)`` positive weights, evaluated inside the pass: a weighted
        sample without replacement (:func:`row_keys`); None: a uniform one.
    split_every : int, optional
        Fan-in of the dask reduction tree (it does not change the result).

    Returns
    -------
    indices : ndarray of int64, shape (min(k, n),)
        Global row indices, increasing.
    rows : ndarray of float64, shape (min(k, n), d)
        The rows, exactly as stored (converted to float64).
    """
    packed = compute(reduce_rows(partial(landmark_chunk, k=k, seed=seed, weights=weights),
                                 partial(merge_landmarks, k=k),
                                 k * (X.shape[1] + 2), X, split_every=split_every))
    keys, index = packed[:k], packed[k:2 * k]
    rows = packed[2 * k:].reshape(k, -1)
    valid = np.flatnonzero(np.isfinite(keys))
    valid = valid[np.argsort(index[valid])]
    return index[valid].astype(np.int64), rows[valid]


def inverse_sqrt(K):
    """``(K^{+1/2}, rank)``: the pseudo-inverse square root of a symmetric PSD ``K``, eigenvalues
    at or below ``max(s) * n * eps`` (numpy's ``matrix_rank`` tolerance) dropped."""
    s, U = np.linalg.eigh(np.asarray(K, dtype=np.float64))
    keep = s > s.max() * K.shape[0] * np.finfo(np.float64).eps
    scaled = U[:, keep] / np.sqrt(s[keep])
    return scaled @ U[:, keep].T, int(keep.sum())


# ------------------------------------------------------------------ the map
class NystroemFeatures(KernelFeatureMap):
    r"""Nystroem features: the kernel against ``m`` sampled rows, whitened by ``K_mm^{-1/2}``.

    ``z(x) = k(x, L) K_mm^{+1/2}`` for landmarks ``L``, ``m = n_components`` rows of the
    training data, and ``K_mm = k(L, L)``; then ``z(x)' z(y) = k(x, L) K_mm^+ k(L, y)``,
    the Nystroem approximation of ``k(x, y)`` (Williams & Seeger 2001; Drineas &
    Mahoney 2005; the feature form of Yang et al. 2012).  It is exact on the
    landmarks: ``z(x)' z(l) = k(x, l)`` for every landmark ``l`` (when ``K_mm`` has
    full rank).

    The landmarks are the ``m`` rows with the smallest per-row keys (module
    docstring): the same rows whatever the chunking.  ``landmarks="uniform"``: a
    uniform sample without replacement, one pass.  ``landmarks="leverage"``: a
    sample weighted by approximate ridge leverage scores (Alaoui & Mahoney 2015;
    Musco & Musco 2017) from random Fourier features of ``max(2m, 256)`` columns
    (:mod:`rfstream.datadriven.leverage`), two passes: the pilot's Gram, then the
    keyed sample, whose tasks score their own rows.  ``K_mm^{+1/2}`` is computed
    once on the client (:func:`inverse_sqrt`).  With fewer than ``n_components``
    rows every row is a landmark, with a warning, as scikit-learn's ``Nystroem``
    does.

    Parameters
    ----------
    n_components : int, default=100
        Number of landmarks ``m`` = output features.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        The kernel, as :func:`rfstream.kernels.kernel_matrix` defines it (see
        :class:`~rfstream.RandomFourierFeatures`).
    gamma : float > 0 or "auto", default=1.0
        Inverse bandwidth; "auto" is :func:`rfstream.kernels.auto_gamma`.
    landmarks : {"uniform", "leverage"}, default="uniform"
        How the landmarks are sampled (above; docs/nystroem.md compares them).
    random_state : int, numpy Generator, RandomState or None, default=None
        Seed of the landmark keys (and of the pilot map's frequencies).
    dtype : {"float32", "float64"}, default="float32"
        Dtype of the output.  The block is computed in float64 and rounded once:
        ``K_mm^{+1/2}`` has entries up to ``s_min^{-1/2}``, which would amplify
        float32 rounding of ``k(x, L)``.

    Attributes
    ----------
    gamma_ : float
        Resolved ``gamma``.
    components_ : ndarray of shape (m, n_features_in_)
        The landmarks (float64), in increasing row order; ``m = min(n_components, n_samples)``.
    component_indices_ : ndarray of int64, shape (m,)
        Their global row indices in ``X``.
    normalization_ : ndarray of shape (m, m)
        ``K_mm^{+1/2}`` (float64, symmetric).
    rank_ : int
        Rank of ``K_mm`` kept in ``normalization_``.
    leverage_lambda_ : float
        With ``landmarks="leverage"`` only: the ridge ``lambda`` of the scores.
    effective_dimension_ : float
        With ``landmarks="leverage"`` only: ``sum_j s_j / (s_j + lambda)`` over the
        eigenvalues ``s`` of the pilot's ``Z'Z``, the sum of the rows' scores.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` in ``fit`` has string column names.

    References
    ----------
    C. K. I. Williams and M. Seeger, "Using the Nystroem Method to Speed Up Kernel
    Machines", NIPS 2001.  P. Drineas and M. W. Mahoney, "On the Nystroem Method
    for Approximating a Gram Matrix for Improved Kernel-Based Learning", JMLR 6,
    2005.  T. Yang, Y.-F. Li, M. Mahdavi, R. Jin and Z.-H. Zhou, "Nystroem Method
    vs Random Fourier Features: A Theoretical and Empirical Comparison", NIPS 2012.
    A. El Alaoui and M. W. Mahoney, "Fast Randomized Kernel Ridge Regression with
    Statistical Guarantees", NIPS 2015.  C. Musco and C. Musco, "Recursive Sampling
    for the Nystroem Method", NIPS 2017.  P. S. Efraimidis and P. G. Spirakis,
    "Weighted random sampling with a reservoir", IPL 97(5), 2006.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream.datadriven import NystroemFeatures
    >>> X = np.random.default_rng(0).normal(size=(300, 4))
    >>> nys = NystroemFeatures(n_components=20, gamma=0.2, random_state=0).fit(X)
    >>> nys.transform(X).shape, nys.components_.shape
    ((300, 20), (20, 4))
    >>> lev = NystroemFeatures(20, gamma=0.2, landmarks="leverage", random_state=0).fit(X)
    >>> lev.components_.shape, bool(0 < lev.effective_dimension_ < 300)
    ((20, 4), True)
    """

    _parameter_constraints: dict = {**KernelFeatureMap._parameter_constraints,
                                    "landmarks": [StrOptions(set(LANDMARKS))]}

    makes_data_pass = True
    #: no prefixes (:mod:`rfstream.features.prefix`): ``K_mm^{+1/2}`` mixes every landmark
    _prefix_refusal = ("K_mm^{-1/2} whitens over all its landmarks, so its first columns are not "
                       "the map of fewer landmarks; fit one map per n_components")

    def __init__(self, n_components=100, *, kernel="gaussian", gamma=1.0, landmarks="uniform",
                 random_state=None, dtype="float32"):
        super().__init__(n_components, kernel=kernel, gamma=gamma, random_state=random_state, dtype=dtype)
        self.landmarks = landmarks

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`):
        ``m`` landmarks of the ``d`` inputs, the symmetric ``m x m`` ``K_mm^{+1/2}`` of rank at
        most ``m``."""
        d = view.int("n_features_in_")
        landmarks = view.array("components_")
        if len(landmarks) != 2 or landmarks[1] != d:
            view.fail(f"components_ has shape {landmarks}, not (n_landmarks, {d})")
        view.array("normalization_", (landmarks[0], landmarks[0]))
        if "rank_" in view.fitted:
            view.at_most("rank_", view.int("rank_", low=0), landmarks[0], "the number of landmarks")
        view.check("normalization_ must be symmetric", lambda a: np.allclose(a, a.T), "normalization_")

    def _draw(self, rng, n_features):
        """The pilot map of ``landmarks="leverage"`` (its frequencies); nothing for "uniform"."""
        self._pilot = None
        if self.landmarks == "leverage":
            self._pilot = pilot_map(n_features, int(self.n_components), self.kernel, self.gamma_, rng)

    def _fit_data(self, X, y, seed):
        if isinstance(X, da.Array):  # global row indices need known row chunks
            X = check_dask_array(X, known_rows=True)
        n, k = int(X.shape[0]), int(self.n_components)
        if k > n:
            warnings.warn(
                f"n_components={k} > n_samples={n}: every row is a landmark (n_components set to "
                f"n_samples, as scikit-learn's Nystroem does), which costs as much as the full kernel.",
                UserWarning, stacklevel=4)
        pilot, self._pilot = self._pilot, None  # used by this fit only, never saved
        for name in ("leverage_lambda_", "effective_dimension_"):
            self.__dict__.pop(name, None)
        weights = None
        if pilot is not None:
            weights, self.leverage_lambda_, self.effective_dimension_ = leverage_scores(X, pilot, min(k, n))
        self.component_indices_, self.components_ = sample_landmarks(X, min(k, n), seed, weights=weights)
        K = kernel_matrix(self.components_, None, self.kernel, self.gamma_)
        self.normalization_, self.rank_ = inverse_sqrt(K)

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    def _block(self, x):
        return self._block_into(x)

    def _block_into(self, x, out=None):
        """``k(x, L) K_mm^{+1/2}`` in float64, rounded into ``out``, a sub-block of at most
        ``FUSED_SUB_BLOCK`` rows at a time so that the float64 temporaries stay that size."""
        if out is None:
            out = np.empty((x.shape[0], self._n_features_out), dtype=self._output_dtype())
        for start, stop in even_sub_blocks(x.shape[0], FUSED_SUB_BLOCK):
            part = x[start:stop]
            part = part.toarray() if sp.issparse(part) else part
            out[start:stop] = kernel_matrix(part, self.components_, self.kernel, self.gamma_) \
                @ self.normalization_
        return out
