"""Kernel PCA over random features: linear PCA of the feature matrix ``Z``, never stored.

Kernel PCA (Schölkopf, Smola & Müller 1998) becomes PCA of the D x D covariance
``C = (Z'Z - n mu mu') / n`` (Lopez-Paz et al. 2014, RCA), each product with ``Z`` one pass:
``"gram"`` sums ``Z'Z`` and calls ``eigh``; ``"randomized"`` is the range finder with power
iterations (Halko, Martinsson & Tropp 2011, Algorithm 4.4) and Rayleigh-Ritz (Algorithm 5.3).
Deviation: the Gaussian start ``Omega`` is drawn on the D side, ``C Omega``, so no pass needs
per-row randomness.  docs/kpca.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import dask.array as da
import numpy as np
import scipy.linalg
import scipy.sparse as sp
from dask.base import normalize_token, tokenize
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
    clone,
)
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._validation import check_X
from ..cluster import compute
from ..devices import array_namespace, blocks_like, is_numpy, numpy_dtype, on_device_once, xp_dtype
from ..features.fused import feature_sub_blocks, fused_buffer
from ..features.on_device import device_block
from ..features.source import fused_rows
from ..random import check_seed
from ..reductions import Layout, shared, whole_sum
from .memory import check_gram_memory, gram_fits
from .passes import RowSpec, device_column_sums, device_products, row_sum, sub_blocks

__all__ = ["GRAM_MAX_FEATURES", "KernelPCA", "check_kpca_memory", "covariance_chunk", "product_chunk",
           "project_block", "uses_gram"]

#: method="auto" takes the Gram pass up to this many features (a D x D float64 partial
#: per task: 512 MiB at 8192) when the partials fit the workers, the randomized one beyond
GRAM_MAX_FEATURES = 8192


def uses_gram(method, n_features):
    """Whether ``method`` ("auto", "gram", "randomized") fits ``n_features`` features by the
    Gram pass: "gram", or "auto" up to :data:`GRAM_MAX_FEATURES` when the partials fit."""
    return method == "gram" or (method == "auto" and n_features <= GRAM_MAX_FEATURES
                                and gram_fits(1, 1, n_features, 0))


def check_kpca_memory(kpca, n_features):
    """Refuse, before any pass, a Gram that ``kpca`` (a :class:`KernelPCA`) would make on
    ``n_features`` features and that cannot fit (:func:`rfstream.solvers.memory.check_gram_memory`);
    "auto" switches to the randomized method instead."""
    if uses_gram(kpca.method, int(n_features)):
        check_gram_memory(1, 1, int(n_features), 0)


# --------------------------------------------------------------- chunk functions
def _dense(z, spec):
    """A stored block of another dtype as float64 (features made in the task are of ``spec.dtype``)."""
    if spec.features is None and not sp.issparse(z) and z.dtype not in (np.float32, np.float64):
        return z.astype(np.float64)
    return z


def _summed_sub_blocks(x, spec, parts):
    """The block's features a sub-block at a time, its rows ``n`` and ``s = Z'1`` summed on the way."""
    parts["n"][...] = x.shape[0]
    for _, _, z in sub_blocks(x, spec, parts["s"].shape[0]):
        if not is_numpy(z) and not sp.issparse(z):  # features on a device
            parts["s"] += device_column_sums(z)
            yield z
            continue
        z = _dense(z, spec)
        parts["s"] += np.asarray(z.sum(axis=0, dtype=np.float64)).ravel()
        yield z


def covariance_chunk(x, *rows, offset, spec):
    """Partials ``n``, ``s = Z'1`` and ``G = Z'Z`` (float64) of one row block, a sub-block at a time."""
    out = spec.layout.empty()
    parts = spec.layout.unpack(out)
    for z in _summed_sub_blocks(x, spec, parts):
        if not is_numpy(z) and not sp.issparse(z):
            parts["G"] += device_products(z, z)
        elif sp.issparse(z):
            parts["G"] += (z.T @ z).toarray()
        else:
            parts["G"] += z.T @ z  # SYRK in the features' dtype, summed in float64
    return out


@dataclass(frozen=True, eq=False, kw_only=True)
class ProductSpec(RowSpec):
    """:class:`RowSpec` of :func:`product_chunk`: the orthonormal basis ``Q`` (D x l, in the features' dtype)."""

    basis: np.ndarray


def product_chunk(x, *rows, offset, spec):
    """Partials ``n``, ``s = Z'1``, ``q`` (column sums of squares) and ``P = Z'(Z Q)`` of one row block."""
    out = spec.layout.empty()
    parts = spec.layout.unpack(out)
    for z in _summed_sub_blocks(x, spec, parts):
        if not is_numpy(z) and not sp.issparse(z):
            xp = array_namespace(z)
            parts["P"] += device_products(z, xp.matmul(z, on_device_once(spec.basis, xp, numpy_dtype(z))))
            parts["q"] += device_column_sums(z * z)
            continue
        basis = spec.basis.astype(z.dtype, copy=False)
        parts["P"] += np.asarray(z.T @ (z @ basis))
        squares = z.multiply(z) if sp.issparse(z) else np.square(z)
        parts["q"] += np.asarray(squares.sum(axis=0, dtype=np.float64)).ravel()
    return out


def project_block(x, mean, components, features=None, dtype=None):
    """Scores ``(z - mean) components'`` of one block: ``x`` holds the features, or, with
    ``features`` (a map's block function), the input rows whose features are made here a
    sub-block at a time (:func:`rfstream.features.fused.feature_sub_blocks`); rows on a device:
    made there, the scores kept there."""
    if not is_numpy(x) and not sp.issparse(x):
        z = x if features is None else device_block(features)(x)
        xp = array_namespace(z)
        dtype = np.dtype(dtype or numpy_dtype(z))
        z = xp.astype(z, xp_dtype(xp, dtype)) - on_device_once(mean, xp, dtype)
        return xp.matmul(z, xp.matrix_transpose(on_device_once(components, xp, dtype)))
    if features is None:
        dtype = x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float64)
        W = components.T.astype(dtype)
        if sp.issparse(x):  # keep it sparse: z W - mean W
            return np.asarray(x @ W, dtype=dtype) - (mean @ components.T).astype(dtype)
        return (x.astype(dtype, copy=False) - mean.astype(dtype)) @ W
    dtype = np.dtype(dtype or np.float64)
    W, centre = components.T.astype(dtype), mean.astype(dtype)
    out = np.empty((x.shape[0], components.shape[0]), dtype=dtype)
    buf = fused_buffer(x.shape[0], components.shape[1], dtype)
    for start, stop, z in feature_sub_blocks(x, features, buf):
        z -= centre  # the buffer's own rows, made again for the next sub-block
        out[start:stop] = z @ W
    return out


# ------------------------------------------------------------------ the client
def orthonormal(Y):
    """Q of a thin QR of ``Y`` (float64), signs fixed so that ``diag(R) >= 0``."""
    Q, R = scipy.linalg.qr(Y, mode="economic")
    signs = np.sign(np.diag(R))
    signs[signs == 0] = 1.0
    return Q * signs


def _fix_signs(components):
    """Each row (a component) with its entry of largest magnitude positive: reproducible scores."""
    rows = np.arange(components.shape[0])
    signs = np.sign(components[rows, np.argmax(np.abs(components), axis=1)])
    signs[signs == 0] = 1.0
    return components * signs[:, None]


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel PCA over any rfstream feature map: linear PCA of the features, never stored.

    ``KernelPCA(n_components, features=<map>)`` fits the map on ``X`` and the PCA on
    its features; ``features=None`` takes ``X`` as the features (e.g. after a map in
    a Pipeline, whose dask output has its features made inside each pass's tasks).
    The methods, equations and passes: docs/kpca.md.

    Parameters
    ----------
    n_components : int, default=10
        Components kept (at most D); with ``variance``, the most kept.
    features : feature map or None, default=None
        A map (unfitted: it is cloned and fitted on ``X``, with ``y`` if given).
    variance : float in (0, 1] or None, default=None
        Keep the fewest leading components whose variance reaches this fraction of
        the total variance ``trace(C)`` (at most ``n_components``).
    method : {"auto", "gram", "randomized"}, default="auto"
        "gram": one pass for ``Z'Z`` (D x D partials), exact.  "randomized": the
        range finder, ``2 + n_power_iter`` passes, D x l partials.  "auto": "gram"
        for D <= ``GRAM_MAX_FEATURES`` (8192) when its partials fit the workers.
    random_state : int, Generator or None, default=0
        Seed of the randomized method's start ``Omega`` (D x l, drawn on the client).
    n_oversamples : int, default=10
        Extra columns of the randomized method's basis, ``l = n_components + n_oversamples``.
    n_power_iter : int, default=2
        Power iterations of the randomized method (one pass each).

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, D)
        Orthonormal rows, the eigenvectors of ``C`` by decreasing eigenvalue, each
        with its entry of largest magnitude positive.
    mean_ : ndarray of shape (D,)
    explained_variance_ : ndarray of shape (n_components_,)
        Eigenvalues of ``C = A'A/n`` (divided by n, not n - 1): sklearn's
        ``KernelPCA.eigenvalues_ / n`` up to the random-feature error.
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        ``explained_variance_ / total_variance_``.
    total_variance_ : float
        ``trace(C)``.
    n_components_, n_samples_ : int
    method_ : str
        "gram" or "randomized".
    features_ : fitted feature map (``features`` given)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import KernelPCA, RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(300, 4))
    >>> kpca = KernelPCA(3, features=RandomFourierFeatures(200, gamma=0.5, random_state=0)).fit(X)
    >>> kpca.transform(X).shape, kpca.components_.shape
    ((300, 3), (3, 200))
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "features": [HasMethods(["fit", "transform"]), None],
        "variance": [Interval(Real, 0, 1, closed="right"), None],
        "method": [StrOptions({"auto", "gram", "randomized"})],
        "random_state": ["random_state", np.random.Generator],
        "n_oversamples": [Interval(Integral, 0, None, closed="left")],
        "n_power_iter": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, n_components=10, *, features=None, variance=None, method="auto", random_state=0,
                 n_oversamples=10, n_power_iter=2):
        self.n_components = n_components
        self.features = features
        self.variance = variance
        self.method = method
        self.random_state = random_state
        self.n_oversamples = n_oversamples
        self.n_power_iter = n_power_iter

    def check_parameters(self, n_features=None):
        """Raise what ``fit`` would raise for the parameters alone (the map's too, on
        ``n_features`` input columns); returns None."""
        clone(self)._validate_params()
        if self.features is not None and hasattr(self.features, "check_parameters") and n_features:
            self.features.check_parameters(int(n_features))

    # ------------------------------------------------------------------ fit
    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`):
        ``n_components_`` orthonormal rows of ``D`` features by decreasing variance, the
        features' mean, and the ratios of the total variance that ``fit`` computes."""
        k = view.int("n_components_")
        view.at_most("n_components_", k, view.int("n_components", param=True), "n_components")
        mean = view.array("mean_", None if "features_" in view.fitted else (view.int("n_features_in_"),))
        if len(mean) != 1:
            view.fail(f"mean_ has shape {mean}, not (D,)")
        view.at_most("n_components_", k, mean[0], "the number of features")
        view.array("components_", (k, mean[0]))
        view.array("explained_variance_", (k,), nonnegative=True)
        view.array("explained_variance_ratio_", (k,), nonnegative=True)
        view.number("total_variance_", nonnegative=True)
        view.int("n_samples_")
        view.text("method_", ("gram", "randomized"))
        view.check("components_ must be orthonormal rows",
                   lambda c: np.allclose(c @ c.T, np.eye(c.shape[0]), atol=1e-5), "components_")
        view.check("explained_variance_ must be in decreasing order",
                   lambda v: bool(np.all(np.diff(v) <= 0)), "explained_variance_")
        view.check("explained_variance_ratio_ must be explained_variance_ / total_variance_",
                   lambda r, v, t: np.allclose(r, v / t if t > 0 else 0.0, rtol=1e-6, atol=1e-12),
                   "explained_variance_ratio_", "explained_variance_", "total_variance_")

    @_fit_context(prefer_skip_nested_validation=False)  # the map validates its own parameters
    def fit(self, X, y=None):
        """Fit the map (``features``) and the principal components of its features.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame, dask array, dask DataFrame} of shape (n_samples, n_features)
            The input rows (``features`` given) or the features.  A dask array is
            never loaded: each pass is a reduction over its row blocks.
        y : ignored, or the labels of a map that needs them

        Returns
        -------
        self : object
        """
        for name in ("features_", "feature_names_in_"):
            self.__dict__.pop(name, None)
        if self.features is not None:
            self.features_ = clone(self.features).fit(X, y)
            Z = self.features_.transform(X)  # checked by the map; lazy for dask, with its source
            self.n_features_in_ = self.features_.n_features_in_
            if hasattr(self.features_, "feature_names_in_"):
                self.feature_names_in_ = self.features_.feature_names_in_
        else:
            Z = check_X(self, X, reset=True, accept_sparse="csr")
        features, rows = fused_rows(Z)
        dtype = np.dtype(Z.dtype) if Z.dtype in (np.float32, np.float64) else np.dtype(np.float64)
        D = int(Z.shape[1])
        self.method_ = self._choose_method(D)
        spec = dict(features=features, dtype=dtype, columns=())
        values, vectors, total, mean, n = (self._gram if self.method_ == "gram" else self._randomized)(
            rows, D, spec)
        keep = self._kept(values, total)
        self.n_samples_ = int(n)
        self.mean_ = mean
        self.components_ = _fix_signs(vectors[:, :keep].T.copy())
        self.explained_variance_ = np.maximum(values[:keep], 0.0)
        self.total_variance_ = float(max(total, 0.0))
        ratio = self.explained_variance_ / self.total_variance_ if self.total_variance_ > 0 else 0.0
        self.explained_variance_ratio_ = np.zeros(keep) + ratio
        self.n_components_ = int(keep)
        return self

    def _choose_method(self, D):
        check_kpca_memory(self, D)
        return "gram" if uses_gram(self.method, D) else "randomized"

    def _gram(self, rows, D, spec):
        """Top eigenpairs of ``C`` from one pass of ``n``, ``Z'1``, ``Z'Z``."""
        layout = Layout(n=(), s=(D,), G=(D, D))
        spans = layout.square_spans("G")  # Z'Z travels as its triangle
        parts = layout.unpack(whole_sum(compute(row_sum(covariance_chunk, layout.size, rows,
                                                        RowSpec(layout=layout, **spec), symmetric=spans)),
                                        layout.size, spans))
        n = max(float(parts["n"]), 1.0)
        mean = parts["s"] / n
        C = parts["G"] / n - np.outer(mean, mean)
        C = (C + C.T) / 2
        k = min(self.n_components, D)
        values, vectors = scipy.linalg.eigh(C, subset_by_index=[D - k, D - 1])
        return values[::-1], vectors[:, ::-1], float(np.trace(C)), mean, parts["n"]

    def _randomized(self, rows, D, spec):
        """Top eigenpairs of ``C`` by the range finder: ``2 + n_power_iter`` passes."""
        k = min(self.n_components, D)
        l = min(k + self.n_oversamples, D)
        layout = Layout(n=(), s=(D,), q=(D,), P=(D, l))
        rng = np.random.default_rng(check_seed(self.random_state))
        Q = orthonormal(rng.standard_normal((D, l)))
        passes = self.n_power_iter + 2  # C Omega, the power iterations, the Rayleigh-Ritz product
        for step in range(passes):
            spec_q = ProductSpec(layout=layout, basis=Q.astype(spec["dtype"]), **spec)
            parts = layout.unpack(np.asarray(compute(row_sum(product_chunk, layout.size, rows, spec_q))))
            n = max(float(parts["n"]), 1.0)
            mean = parts["s"] / n
            CQ = parts["P"] / n - np.outer(mean, mean @ Q)  # C Q, centred with this pass's mean
            if step < passes - 1:
                Q = orthonormal(CQ)
        B = Q.T @ CQ
        values, V = scipy.linalg.eigh((B + B.T) / 2)
        values, V = values[::-1][:k], V[:, ::-1][:, :k]
        total = float(parts["q"].sum() / n - mean @ mean)
        return values, Q @ V, total, mean, parts["n"]

    def _kept(self, values, total):
        """The number of components kept: all found, or the fewest reaching ``variance``."""
        if self.variance is None or total <= 0:
            return values.shape[0]
        reached = np.cumsum(np.maximum(values, 0.0)) >= self.variance * total * (1 - 1e-12)
        return int(np.argmax(reached)) + 1 if reached.any() else values.shape[0]

    # ------------------------------------------------------------ transform
    def transform(self, X):
        """The scores ``(z(x) - mean_) components_'`` of the rows of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame, dask array, dask DataFrame} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray or dask array of shape (n_samples, n_components_)
            In the features' dtype: numpy in, numpy out; dask in, a lazy dask array
            with the rows' chunks (the features made in each task, never stored).
        """
        check_is_fitted(self)
        if hasattr(self, "features_"):
            Z = self.features_.transform(X)
        else:
            Z = check_X(self, X, reset=False, accept_sparse="csr")
        if not isinstance(Z, da.Array):
            return project_block(Z, self.mean_, self.components_)
        features, rows = fused_rows(Z, even=False)
        dtype = np.dtype(Z.dtype) if Z.dtype in (np.float32, np.float64) else np.dtype(np.float64)
        k = self.n_components_
        name = f"kernelpca-{tokenize(self, Z)}"
        kwargs = dict(dtype=dtype, chunks=(rows.chunks[0], (k,)), meta=blocks_like(rows, 2, dtype), name=name)
        if features is None:
            return Z.map_blocks(project_block, self.mean_, self.components_, **kwargs)
        return rows.map_blocks(project_block, self.mean_, shared(self.components_), shared(features),
                               dtype.name, **kwargs)

    @property
    def _n_features_out(self):
        return self.n_components_

    def __dask_tokenize__(self):
        state = {k: v for k, v in vars(self).items() if k.endswith("_")}
        return normalize_token((type(self).__module__, type(self).__qualname__, self.get_params(deep=False),
                                state))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self.features is None:
            tags.input_tags.sparse = True
            tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        else:
            inner = self.features.__sklearn_tags__()
            tags.input_tags.sparse = inner.input_tags.sparse
            tags.transformer_tags.preserves_dtype = list(inner.transformer_tags.preserves_dtype)
            tags.target_tags.required = inner.target_tags.required
        return tags
