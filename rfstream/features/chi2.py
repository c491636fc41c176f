"""Features of the chi-squared kernels of histograms: the additive one (Vedaldi & Zisserman
2012, deterministic) and the skewed multiplicative one (Li, Ionescu & Sminchisescu 2010,
random Fourier features in ``log(x + c)``)."""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.base import tokenize
from sklearn.utils._param_validation import Interval

from .base import FeatureMap

__all__ = ["AdditiveChi2Sampler", "SkewedChi2Sampler", "skewed_chi2_kernel"]

#: scikit-learn's ``sample_interval`` for 1, 2 and 3 ``sample_steps`` (its source cites
#: Vedaldi & Zisserman's Figure 2 c for them)
DEFAULT_INTERVALS = {1: 0.8, 2: 0.5, 3: 0.4}


def skewed_chi2_kernel(X, Y=None, *, skewedness=1.0) -> np.ndarray:
    """Exact ``prod_i 2 sqrt(x_i + c) sqrt(y_i + c) / (x_i + y_i + 2 c)``, ``c = skewedness``
    (Li, Ionescu & Sminchisescu 2010), dense float64: the oracle of
    :class:`SkewedChi2Sampler`."""
    X = np.asarray(X, dtype=np.float64) + skewedness
    Y = X if Y is None else np.asarray(Y, dtype=np.float64) + skewedness
    ratio = 2.0 * np.sqrt(X[:, None, :] * Y[None, :, :]) / (X[:, None, :] + Y[None, :, :])
    return np.exp(np.log(ratio).sum(axis=2))


def _refuse_below(x, bound, strict, need, fix):
    """One line naming the first column of block ``x`` with a value below ``bound`` (at
    ``bound`` too when ``strict``): ``need``, the column and its value, ``fix``."""
    values = x.data if sp.issparse(x) else np.asarray(x)
    bad = values <= bound if strict else values < bound
    if not bad.any():
        return
    if sp.issparse(x):
        coo = x.tocoo()
        first = np.flatnonzero(bad)[0]
        column, value = coo.col[first], coo.data[first]
    else:
        row, column = np.argwhere(bad)[0]
        value = values[row, column]
    raise ValueError(f"{need}; column {int(column)} has {float(value):g}. {fix}")


class AdditiveChi2Sampler(FeatureMap):
    r"""The sampled Fourier features of the additive chi-squared kernel (deterministic).

    The additive chi2 kernel ``k(x, y) = sum_i 2 x_i y_i / (x_i + y_i)`` of
    non-negative ``x`` (histograms) is, per column, ``sqrt(x y) sech(lambda / 2)`` with
    ``lambda = log(y / x)``, and the spectrum of ``sech(lambda / 2)`` is ``sech(pi w)``
    (Vedaldi & Zisserman 2012).  Sampling the spectrum at ``w = j L``, ``j = 0..n-1``
    (``L = sample_interval``, ``n = sample_steps``), their closed-form feature map gives,
    per input column,

    ``sqrt(x L)``, then for ``j = 1..n-1``: ``sqrt(2 x L sech(pi j L)) cos(j L log x)``
    and ``... sin(j L log x)``,

    ``2 n - 1`` features, zero where ``x = 0``.  The columns are scikit-learn's
    :class:`sklearn.kernel_approximation.AdditiveChi2Sampler`'s, in its order: the
    ``sqrt`` block of every input column, then per ``j`` the cosine block and the
    sine block.  Nothing is random and nothing is fitted but ``n_features_in_``.
    Sparse input gives sparse (CSR) output, as in scikit-learn: a dask array of
    CSR blocks gives CSR blocks; dense input gives dense output.

    Parameters
    ----------
    sample_steps : int >= 1, default=2
        ``n``: the number of sampled frequencies.
    sample_interval : float > 0 or None, default=None
        ``L``: the sampling step.  None: scikit-learn's 0.8, 0.5 and 0.4 for 1, 2
        and 3 steps; required for more steps.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of the output (computed in float64).

    Attributes
    ----------
    n_features_in_ : int

    Notes
    -----
    The input must be non-negative: a negative entry is refused in one line naming
    its column, at ``fit`` and ``transform`` for numpy input and inside the blocks,
    when they are computed, for a dask array.  Standardized data have negative
    entries: do not put a :class:`~rfstream.Standardizer` in front of this map.

    References
    ----------
    A. Vedaldi and A. Zisserman, "Efficient additive kernels via explicit feature
    maps", IEEE TPAMI 34(3), 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import AdditiveChi2Sampler
    >>> X = np.random.default_rng(0).random((5, 3))
    >>> Z = AdditiveChi2Sampler(sample_steps=2).fit_transform(X)
    >>> Z.shape, Z.dtype
    ((5, 9), dtype('float32'))
    """

    _parameter_constraints: ClassVar[dict] = {
        "dtype": FeatureMap._parameter_constraints["dtype"],
        "sample_steps": [Interval(Integral, 1, None, closed="left")],
        "sample_interval": [Interval(Real, 0, None, closed="neither"), None],
    }
    _prefix_refusal = ("it has no n_components (its width is n_features_in_ x (2 sample_steps - 1)); "
                       "fit one map per sample_steps")
    #: nothing is drawn: the base class's generator is made from None and never used
    random_state = None
    #: the lowest input value valid for every parameter (a histogram): what a check probes with
    input_floor = 0.0

    def __init__(self, *, sample_steps=2, sample_interval=None, dtype="float32"):
        self.sample_steps = sample_steps
        self.sample_interval = sample_interval
        self.dtype = dtype

    def _check_params(self, n_features):
        if self.sample_interval is None and self.sample_steps not in DEFAULT_INTERVALS:
            raise ValueError(f"sample_interval is required with sample_steps={self.sample_steps} "
                             "(scikit-learn's defaults cover 1, 2 and 3 steps); e.g. sample_interval=0.3.")

    def _fit_checked(self, X, y):
        super()._fit_checked(X, y)
        if not isinstance(X, da.Array):  # scikit-learn refuses negative input in fit too
            self._check_block(self._check_input(X, reset=False))
        return self

    def _draw(self, rng, n_features):
        """Nothing to draw."""

    @property
    def _n_features_out(self):
        return self.n_features_in_ * (2 * self.sample_steps - 1)

    @property
    def _interval(self):
        return DEFAULT_INTERVALS[self.sample_steps] if self.sample_interval is None \
            else float(self.sample_interval)

    def _check_block(self, x):
        _refuse_below(x, 0.0, False, f"Negative values in data passed to {type(self).__name__}: it needs "
                      "non-negative input (a histogram)",
                      "Do not standardize histograms (standardize=False); rescale to [0, inf) if needed.")

    def _columns(self, values):
        """The ``2 n - 1`` feature values of the non-zero input ``values`` (float64), in order."""
        L = self._interval
        log_step, step = L * np.log(values), 2.0 * L * values
        out = [np.sqrt(L * values)]
        for j in range(1, self.sample_steps):
            factor = np.sqrt(step / np.cosh(np.pi * j * L))
            out += [factor * np.cos(j * log_step), factor * np.sin(j * log_step)]
        return out

    def _block(self, x):
        self._check_block(x)
        dtype = self._output_dtype()
        if sp.issparse(x):
            x = sp.csr_matrix(x, copy=True)  # the caller's matrix is left as it is
            x.sum_duplicates()
            x.eliminate_zeros()
            blocks = [sp.csr_matrix((v.astype(dtype), x.indices, x.indptr), shape=x.shape)
                      for v in self._columns(x.data.astype(np.float64))]
            return sp.hstack(blocks, format="csr", dtype=dtype)
        x = np.asarray(x, dtype=np.float64)
        nonzero = x != 0
        out = np.zeros((x.shape[0], self._n_features_out), dtype=dtype)
        d = x.shape[1]
        for k, values in enumerate(self._columns(x[nonzero])):
            out[:, k * d:(k + 1) * d][nonzero] = values
        return out

    def _transform_checked(self, X):
        """A dask array of CSR blocks gives CSR blocks (CSR meta); dense ones the base's path."""
        if not (isinstance(X, da.Array) and sp.issparse(X._meta)):
            return super()._transform_checked(X)
        dtype, n_out = self._output_dtype(), self._n_features_out
        return X.map_blocks(self._block, dtype=dtype, chunks=(X.chunks[0], (n_out,)),
                            meta=sp.csr_matrix((0, n_out), dtype=dtype),
                            name=f"{type(self).__name__.lower()}-{tokenize(self, X)}")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        return tags


class SkewedChi2Sampler(FeatureMap):
    r"""Random Fourier features of the skewed multiplicative chi-squared kernel.

    The skewed chi2 kernel ``k(x, y) = prod_i 2 sqrt(x_i + c) sqrt(y_i + c) /
    (x_i + y_i + 2 c)`` (``c = skewedness``; Li, Ionescu & Sminchisescu 2010)
    is shift-invariant in ``u = log(x + c)``: ``prod_i sech((u_i - v_i) / 2)``,
    whose Fourier transform is the product of hyperbolic-secant densities
    ``p(w) = sech(pi w)``.  Random Fourier features in ``u``
    (Rahimi & Recht 2007) then give

    ``z(x) = sqrt(2 / D) cos(W' log(x + c) + b)``,

    ``D = n_components``, each ``W_ij = (1/pi) log(tan(pi/2 U))`` with ``U ~ U(0, 1)``
    (the inverse CDF of that density) and ``b ~ U[0, 2 pi]``: the same draw as
    :class:`sklearn.kernel_approximation.SkewedChi2Sampler` (from another generator,
    so equal in distribution, not bit for bit).  Unbiased; the first ``n`` columns,
    times ``sqrt(D / n)``, are the map of the first ``n`` frequencies (prefix maps,
    :mod:`rfstream.features.prefix`).

    Parameters
    ----------
    skewedness : float, default=1.0
        ``c``; every input must be greater than ``-c``.
    n_components : int, default=100
        Number of features ``D``.
    random_state : int, numpy Generator, RandomState or None, default=None
        Seed of ``W`` and ``b``, drawn once in ``fit``.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of ``W``, ``b`` and the output (``log(x + c)`` is taken in float64).

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features_in_, n_components)
        ``W``, in ``dtype``.
    random_offset_ : ndarray of shape (n_components,)
        ``b``, in ``dtype``.
    n_features_in_ : int

    Notes
    -----
    An entry ``<= -skewedness`` is refused in one line naming its column: at
    ``transform`` for numpy input, inside the blocks for a dask array.  Sparse
    input is made dense (``log(0 + c)`` is not zero).

    References
    ----------
    F. Li, C. Ionescu and C. Sminchisescu, "Random Fourier approximations for skewed
    multiplicative histogram kernels", DAGM 2010.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import SkewedChi2Sampler
    >>> X = np.random.default_rng(0).random((5, 3))
    >>> Z = SkewedChi2Sampler(skewedness=0.5, n_components=8, random_state=0).fit_transform(X)
    >>> Z.shape, Z.dtype
    ((5, 8), dtype('float32'))
    """

    _parameter_constraints: ClassVar[dict] = {
        **FeatureMap._parameter_constraints,
        "skewedness": [Interval(Real, None, None, closed="neither")],
        "n_components": [Interval(Integral, 1, None, closed="left"), "array-like", str],  # a list
    }
    prefix_valid = True

    @property
    def input_floor(self):
        """A valid lowest input value (above -skewedness, at least 0): what a check probes with."""
        return max(0.0, 0.5 - float(self.skewedness))

    def __init__(self, *, skewedness=1.0, n_components=100, random_state=None, dtype="float32"):
        self.skewedness = skewedness
        self.n_components = n_components
        self.random_state = random_state
        self.dtype = dtype

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`): a
        weight per input column and component, an offset per component."""
        d = view.int("n_features_in_")
        shape = view.array("random_weights_")
        if len(shape) != 2 or shape[0] != d:
            view.fail(f"random_weights_ has shape {shape}, not ({d}, n_components)")
        view.array("random_offset_", shape[1:])

    def _draw(self, rng, n_features):
        dtype = self._output_dtype()
        uniform = rng.uniform(size=(n_features, self.n_components))
        self.random_weights_ = (np.log(np.tan(0.5 * np.pi * uniform)) / np.pi).astype(dtype)
        self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, size=self.n_components).astype(dtype)

    @property
    def _n_features_out(self):
        return self.random_weights_.shape[1]

    def _keep_prefix(self, n):
        self.random_weights_ = self.random_weights_[:, :n].copy()
        self.random_offset_ = self.random_offset_[:n].copy()

    def _block(self, x):
        c = float(self.skewedness)
        x = x.toarray() if sp.issparse(x) else x  # its zeros count too: log(0 + c)
        _refuse_below(x, -c, True, f"{type(self).__name__} needs input > -skewedness = {-c:g} "
                      "(it takes log(x + skewedness))", "Shift the data or raise skewedness.")
        W = self.random_weights_
        proj = np.log(np.asarray(x, dtype=np.float64) + c).astype(W.dtype, copy=False) @ W
        proj += self.random_offset_
        np.cos(proj, out=proj)
        proj *= math.sqrt(2.0 / W.shape[1])  # a Python float keeps the float32 loop
        return proj
