"""TensorSketch features of the polynomial kernel (Pham & Pagh 2013)."""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from .base import FeatureMap
from .on_device import SketchOnDevice

__all__ = ["PolynomialCountSketch", "count_sketch", "polynomial_kernel"]


def polynomial_kernel(X, Y=None, *, gamma=1.0, degree=2, coef0=0.0) -> np.ndarray:
    """Exact ``(gamma <x, y> + coef0) ** degree``, dense float64: the oracle of the sketch."""
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    return (gamma * (X @ Y.T) + coef0) ** degree


def count_sketch(x, index, sign, width):
    """The count sketch of every row of ``x``: ``C[r, index[j]] += sign[j] * x[r, j]``.

    A sparse ``x`` is multiplied by the ``(n_features, width)`` matrix with one
    ``sign[j]`` in row ``j``, column ``index[j]``: O(nnz(x)).  A dense one is added
    column by column into a C-ordered block (the row FFTs that follow are twice as
    fast on it; a sparse product gives the transposed layout, and transposing a block
    of the sketch costs more than these adds).  Returns a dense float64
    ``(rows, width)`` array.
    """
    if sp.issparse(x):
        d = index.shape[0]
        S = sp.csr_matrix((sign.astype(np.float64), (np.arange(d), index)), shape=(d, width))
        return (sp.csr_matrix(x, dtype=np.float64) @ S).toarray()
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros((x.shape[0], width))
    for j, (k, s) in enumerate(zip(index.tolist(), sign.tolist())):
        out[:, k] += s * x[:, j]
    return out


class PolynomialCountSketch(FeatureMap):
    r"""TensorSketch features of the polynomial kernel ``(gamma <x, y> + coef0) ** degree``.

    TensorSketch (Pham & Pagh 2013): with ``x~ = [sqrt(gamma) x,
    sqrt(coef0)]`` (the last column only when ``coef0 != 0``), the kernel is
    ``<x~, y~> ** p`` with ``p = degree``, the inner product of the ``p``-fold tensor
    powers of ``x~``.  Their count sketch of width ``D = n_components`` is the
    circular convolution of ``p`` independent count sketches of ``x~``,

    ``z(x) = IFFT( FFT(C_1 x~) * ... * FFT(C_p x~) )``,

    with ``C_i x~`` the count sketch of hash ``h_i`` and signs ``s_i``
    (``(C_i x~)_k = sum_{j: h_i(j) = k} s_i(j) x~_j``).  ``z(x)' z(y)`` is an
    unbiased estimate of ``<x~, y~> ** p`` whose variance shrinks as ``1 / D``.  Departures: the hashes and signs are fully random tables drawn in
    ``fit`` (the paper needs only 2-wise independent ones; scikit-learn draws the same
    kind of tables), and the FFTs are real (``rfft``/``irfft``: the same circular
    convolution, half the work).  A sparse block's count sketch is a sparse product,
    O(nnz); the output is dense.  Features are computed in float64 and cast to ``dtype``.

    Parameters
    ----------
    gamma : float >= 0 or "auto", default=1.0
        Scale of the inner product.  "auto": ``1 / n_features_in_``, the default of
        :func:`sklearn.metrics.pairwise.polynomial_kernel` (for standardized columns,
        ``gamma <x, x>`` is about 1).
    degree : int >= 1, default=2
        Degree ``p`` of the kernel.
    coef0 : float >= 0, default=0
        Constant term (a negative one has no real feature map).
    n_components : int, default=100
        Width ``D`` of the sketch (the number of output features).
    random_state : int, numpy Generator, RandomState or None, default=None
        Seed of the hashes and signs, drawn once in ``fit``.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of the output.

    Attributes
    ----------
    gamma_ : float
        Resolved ``gamma``.
    index_hash_ : ndarray of shape (degree, n_features_in_ + (coef0 != 0)), int64
        ``h_i(j)``, in ``[0, n_components)``.
    bit_hash_ : ndarray of shape (degree, n_features_in_ + (coef0 != 0)), float64
        ``s_i(j)``, each +1 or -1.
    n_features_in_ : int

    Notes
    -----
    scikit-learn's :class:`sklearn.kernel_approximation.PolynomialCountSketch`
    computes the same estimator (its ``indexHash_``, ``bitHash_``); the draws differ,
    so the features are equal in distribution, not bit for bit.  The count sketches
    do not nest (a prefix of the output is not a smaller sketch): ``prefix_valid`` is
    False.

    References
    ----------
    N. Pham and R. Pagh, "Fast and scalable polynomial kernels via explicit feature
    maps", KDD 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import PolynomialCountSketch
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> ps = PolynomialCountSketch(degree=3, coef0=1.0, n_components=16, random_state=0).fit(X)
    >>> Z = ps.transform(X)
    >>> Z.shape, Z.dtype, ps.index_hash_.shape
    ((5, 16), dtype('float32'), (3, 4))
    """

    _parameter_constraints: ClassVar[dict] = {
        **FeatureMap._parameter_constraints,
        "gamma": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "coef0": [Interval(Real, 0, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left"), "array-like", str],  # a list: refused
    }
    _prefix_refusal = ("its count sketches do not nest (a prefix of the sketch is not a smaller "
                       "sketch); fit one map per n_components")

    def __init__(self, *, gamma=1.0, degree=2, coef0=0, n_components=100, random_state=None,
                 dtype="float32"):
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_components = n_components
        self.random_state = random_state
        self.dtype = dtype

    def _fit_gamma(self, X, rng):
        """``gamma_``: the float, or ``1 / n_features`` for "auto" (nothing drawn)."""
        return 1.0 / X.shape[1] if isinstance(self.gamma, str) else float(self.gamma)

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`): one
        hash of each input column (and of ``sqrt(coef0)``) per degree, buckets in
        ``[0, n_components)``, signs -1 or 1."""
        width = view.int("n_features_in_") + (view.params.get("coef0", 0) != 0)
        degree = view.int("degree", param=True)
        view.array("index_hash_", (degree, width), kinds="iu", finite=False)
        view.array("bit_hash_", (degree, width))
        view.within("index_hash_", 0, view.int("n_components", param=True))
        view.one_of("bit_hash_", (-1.0, 1.0))

    def _draw(self, rng, n_features):
        d = n_features + (self.coef0 != 0)
        self.index_hash_ = rng.integers(0, self.n_components, size=(self.degree, d), dtype=np.int64)
        self.bit_hash_ = 2.0 * rng.integers(0, 2, size=(self.degree, d)) - 1.0

    @property
    def _n_features_out(self):
        if not hasattr(self, "index_hash_"):
            raise AttributeError(f"{type(self).__name__} is not fitted (no index_hash_).")
        return self.n_components

    def _augmented(self, x):
        """``[sqrt(gamma) x, sqrt(coef0)]`` in float64 (sparse stays sparse, CSR)."""
        scale = math.sqrt(self.gamma_)
        n = x.shape[0]
        if sp.issparse(x):
            xs = sp.csr_matrix(x, dtype=np.float64) * scale
            if self.coef0 != 0:
                xs = sp.hstack([xs, np.full((n, 1), math.sqrt(self.coef0))], format="csr")
            return xs
        xs = np.asarray(x, dtype=np.float64) * scale
        if self.coef0 != 0:
            xs = np.hstack([xs, np.full((n, 1), math.sqrt(self.coef0))])
        return xs

    def _device_features(self):
        """The sketch in the rows' array namespace (:class:`~rfstream.features.on_device.SketchOnDevice`)."""
        return SketchOnDevice(self.index_hash_, self.bit_hash_, self.gamma_, self.coef0, self.n_components,
                              self._output_dtype())

    def _block(self, x):
        return self._block_into(x)

    def _block_into(self, x, out=None):
        D = self.n_components
        if self.index_hash_.size and not 0 <= self.index_hash_.min() <= self.index_hash_.max() < D:
            raise ValueError(f"index_hash_ holds columns outside [0, n_components={D}); refit the map.")
        xs = self._augmented(x)
        product = None
        for index, sign in zip(self.index_hash_, self.bit_hash_):
            spectrum = np.fft.rfft(count_sketch(xs, index, sign, D), axis=1)
            product = spectrum if product is None else np.multiply(product, spectrum, out=product)
        z = np.fft.irfft(product, n=D, axis=1)  # float64, cast once
        if out is None:
            return z.astype(self._output_dtype())
        out[...] = z
        return out
