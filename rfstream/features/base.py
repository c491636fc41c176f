"""Base class of the feature maps: validation, dtype and dask in ``fit``/``transform``.

Template method, as in ``scipy.stats.qmc``: the public ``fit`` and ``transform`` do the
bookkeeping (parameter and input checks, ``gamma="auto"``, the random generator, numpy or
dask) and call the hooks a map implements: ``_draw``, ``_block`` and ``_n_features_out``;
optionally ``_check_params``, ``_fit_data``, ``_block_into``, ``_fused_block`` and
``_keep_prefix``.  Each hook's contract and the order ``fit`` calls them in:
docs/rff.md, "rfstream/features/base.py".
"""
from __future__ import annotations

import warnings
from abc import abstractmethod
from numbers import Integral, Real

import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.base import is_dask_collection, normalize_token, tokenize
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
    clone,
)
from sklearn.exceptions import DataConversionWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._validation import check_X
from ..devices import CPU_FIX, ON_DEVICE, DeviceError, blocks_like, device_of_meta, is_numpy
from ..kernels import KERNELS
from ..random import check_seed
from .on_device import DeviceTwin
from .source import FeatureSource, attach_source
from .grid import check_gamma_param, resolve_gamma
from .components import ComponentListMixin
from .prefix import PrefixMixin

_DTYPES = ("float32", "float64")

#: ``_parameter_constraints`` of the parameters every map of a shift-invariant
#: kernel has (a map adds its own, or narrows ``kernel``)
KERNEL_PARAMETERS = {
    "n_components": [Interval(Integral, 1, None, closed="left"), "array-like", str],  # a list: .components
    "kernel": [StrOptions(set(KERNELS))],
    "gamma": [Interval(Real, 0, None, closed="neither"), str, "array-like"],
}
#: what the ``gamma`` of a map that takes one may be (checked by ``_validate_params``)
GAMMA_CONSTRAINT = KERNEL_PARAMETERS["gamma"]


class FeatureMap(ComponentListMixin, PrefixMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                 BaseEstimator):
    """Base class of random feature maps (numpy and dask inputs).

    Subclasses define ``__init__`` (store the parameters, nothing else),
    ``_parameter_constraints``, and the hooks ``_draw``, ``_block`` and
    ``_n_features_out`` (docs/rff.md); optionally ``_check_params``
    and, for a map fitted to the data, ``_fit_data``.  A subclass with ``gamma``
    and ``kernel`` parameters gets ``gamma="auto"`` resolved into ``gamma_``
    before ``_draw`` (see :func:`rfstream.kernels.auto_gamma`).  A map that
    needs labels sets ``target_tags.required`` in ``__sklearn_tags__`` and says
    what it does with them in ``_y_purpose``.

    ``transform`` returns a numpy array for numpy (or sparse, or pandas) input
    and a lazy dask array, one output block per input row block, for dask input
    (a dask array or a dask DataFrame).
    """

    _parameter_constraints: dict = {
        "random_state": ["random_state", np.random.Generator],
        "dtype": [StrOptions(set(_DTYPES)), type, np.dtype],
    }
    #: True for a map whose ``_block`` returns a ``scipy.sparse`` CSR matrix
    #: (the dask output then has CSR blocks and a CSR ``meta``).
    _sparse_output = False
    #: what a map that needs labels does with them: ends the error for ``fit(X)``
    _y_purpose = "it is fitted to the labels"
    #: words a map takes for ``gamma`` besides a number, "auto", "auto*F" or a grid of these
    #: (resolved by its own ``_resolve_gamma``, e.g. CNM's "paper")
    gamma_words = ()
    #: True for a map that scales one draw to every gamma of a grid (``at_gamma``,
    #: :class:`rfstream.features.grid.GammaGridMixin`); other maps take one gamma
    shares_draw_across_gamma = False
    #: output columns per component of ``n_components`` (SES: a cosine and a sine)
    columns_per_component = 1
    #: True for a map whose ``fit`` reads the rows through passes (``_fit_data``)
    makes_data_pass = False

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _draw(self, rng, n_features):
        """Draw the random parameters from ``rng`` and store them as ``attr_``."""

    @abstractmethod
    def _block(self, x):
        """Features of one block of rows: pure numpy, picklable, no dask; the same row gives
        the same features whatever the chunking."""

    @property
    @abstractmethod
    def _n_features_out(self):
        """Number of output features (raises AttributeError before fit)."""

    def _check_params(self, n_features):
        """Cross-parameter checks; raise ValueError.  Default: nothing."""

    def _fit_data(self, X, y, seed):
        """Passes over the checked ``X`` (and ``y``) after ``_draw``.  Default: nothing."""

    # ------------------------------------------------------------ public API
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Validate the parameters, draw the random feature map, and fit it to the data.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame, dask array, dask DataFrame} of shape (n_samples, n_features)
            A data-independent map uses only its number of columns, plus a
            sample of rows when ``gamma="auto"``; a data-driven map makes the
            passes its class describes.  A dask array is not loaded: passes are
            reductions over its row blocks, and sampled rows are gathered from
            the chunks that hold them.  A dask DataFrame is converted to one
            lazily (only its partition lengths are computed); a pandas or dask
            DataFrame with string column names sets ``feature_names_in_``.
        y : array-like, pandas Series, dask array or dask Series of shape (n_samples,), or None
            Labels, for a map that needs them (its ``fit`` raises without);
            ignored otherwise.

        Returns
        -------
        self : object
        """
        self._output_dtype()  # validate dtype before touching the data
        sizes, requested = self._fit_sizes(), getattr(self, "n_components", None)
        self.__dict__.pop("component_sizes_", None)
        if sizes is not None:  # a list: draw the largest (features.components)
            self.n_components = sizes[-1]
            try:
                self._fit_checked(X, y)
            finally:
                self.n_components = requested
            for n in sizes[:-1]:
                self.prefix_columns(n)  # a size the drawn map cannot give: one line, now
            self.component_sizes_ = sizes
            return self
        return self._fit_checked(X, y)

    def _fit_checked(self, X, y):
        y = self._labels_for_fit(y)
        X = self._check_input(X, reset=True)
        n_features = int(X.shape[1])
        self._check_params(n_features)
        seed = check_seed(self.random_state)
        rng = np.random.default_rng(seed)
        if "gamma" in self._parameter_constraints:
            self.gamma_ = self._fit_gamma(X, rng)
        self._draw(rng, n_features)
        self._fit_data(X, y, seed)
        self._fit_done()
        return self

    def _fit_gamma(self, X, rng):
        """``gamma_`` for ``fit`` (a grid's first gamma: :class:`GammaGridMixin`)."""
        return self._resolve_gamma(X, rng)

    def _fit_done(self):
        """After ``_fit_data`` (a grid's maps: :class:`GammaGridMixin`).  Default: nothing."""

    def check_parameters(self, n_features):
        """Raise what ``fit`` would raise for the parameters alone, on ``n_features`` input
        columns: scikit-learn's parameter checks and the cross-parameter checks
        (``_check_params``), on a clone (``self`` is left as it is); returns None."""
        twin = clone(self)
        twin._validate_params()
        twin._check_params(int(n_features))

    def _validate_params(self):
        """scikit-learn's parameter checks, then ``gamma``'s items
        (:func:`rfstream.features.grid.gamma_items`): a grid only on a map that can
        scale its draw (``shares_draw_across_gamma``)."""
        super()._validate_params()
        if self._parameter_constraints.get("gamma") is GAMMA_CONSTRAINT:
            check_gamma_param(self)
        self._check_component_list()

    def _labels_for_fit(self, y):
        """``y`` as ``_fit_data`` gets it: None for a map without labels (``y`` ignored).

        A map with ``target_tags.required`` refuses ``y=None`` (scikit-learn's
        requires-y message, ended by ``_y_purpose``) and takes a column vector
        ``(n, 1)`` as its one column with a ``DataConversionWarning``, as
        scikit-learn's ``column_or_1d``.  A dask y (array, Series or a one-column
        DataFrame) stays lazy.  Everything else about the labels (rows, classes)
        is the map's own check, in ``_fit_data``.
        """
        if not self.__sklearn_tags__().target_tags.required:
            return None
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: "
                f"{self._y_purpose}; call fit(X, y) (in a Pipeline, fit it with y)."
            )
        if not is_dask_collection(y):
            y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn("A column-vector y was passed when a 1d array was expected. Please change "
                          "the shape of y to (n_samples, ), for example using ravel().",
                          DataConversionWarning, stacklevel=4)
            y = y[:, 0] if isinstance(y, (np.ndarray, da.Array)) else y.iloc[:, 0]
        return y

    @classmethod
    def for_columns(cls, n_features, **params):
        """A fitted map for ``n_features`` input columns, drawn without data: what
        ``cls(**params).fit(X)`` draws for any ``X`` with that many columns (a float ``gamma``)."""
        if isinstance(params.get("gamma"), str):
            raise ValueError(
                f"for_columns needs a float gamma (it sees no data); got gamma={params['gamma']!r}. "
                "Resolve it first, e.g. with rfstream.kernels.auto_gamma."
            )
        return cls(**params).fit(np.zeros((1, n_features)))

    def transform(self, X):
        """Apply the feature map.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame, dask array, dask DataFrame} of shape (n_samples, n_features)
            A DataFrame's column names are checked against ``feature_names_in_``
            as scikit-learn does (a warning or an error).

        Returns
        -------
        Z : ndarray or dask array of shape (n_samples, n_features_out)
            In ``dtype``.  For a dask array, a lazy dask array with the same row
            chunks and one column chunk; nothing is computed.  For a dask
            DataFrame, the same with one row block per partition; only its
            partition lengths are computed.
        """
        check_is_fitted(self)
        X = self._check_input(X, reset=False)
        return self._with_sizes(self._transform_checked(X), X)

    def _transform_checked(self, X):
        """``transform`` of the checked ``X`` (a grid's stacked features: :class:`GammaGridMixin`)."""
        if not isinstance(X, da.Array):
            return self._block(X) if is_numpy(X) else self._on_device()(X)  # rows on a device: kept there
        dtype = self._output_dtype()
        n_out = self._n_features_out
        name = f"{type(self).__name__.lower()}-{tokenize(self, X)}"
        if device_of_meta(X._meta) != "cpu":  # rows on a device: the features stay there
            return attach_source(X.map_blocks(self._on_device(), dtype=dtype, chunks=(X.chunks[0], (n_out,)),
                                              meta=blocks_like(X, 2, dtype), name=name),
                                 FeatureSource(self._fused_block(), X))
        Z = X.map_blocks(
            self._block,
            dtype=dtype,
            chunks=(X.chunks[0], (n_out,)),
            meta=(sp.csr_matrix((0, n_out), dtype=dtype) if self._sparse_output
                  else np.empty((0, n_out), dtype=dtype)),
            name=name,
        )
        if not self._sparse_output:  # passes over Z make the features in their tasks
            attach_source(Z, FeatureSource(self._fused_block(), X))
        return Z

    def block(self, x):
        """The features of one block of rows, as a pass makes them inside its tasks: ``x``
        a dense ndarray or sparse matrix with ``n_features_in_`` columns, taken as it is
        (``transform`` checks its input); pure numpy, in ``dtype`` (``_block``)."""
        return self._block(x)

    def _block_into(self, x, out=None):
        """``_block(x)``, written into the buffer ``out`` (rows x n_out) where the map can, so
        that a task's sub-blocks share one buffer (:mod:`rfstream.features.fused`); the
        default ignores ``out``."""
        return self._block(x)

    def _device_features(self):
        """The features of rows in their array namespace (:mod:`rfstream.features.on_device`),
        or None for a map that does not run on a device.  Default: None."""
        return None

    def _on_device(self):
        """:meth:`_device_features`, or the one-line refusal of a map without them."""
        features = self._device_features()
        if features is None:
            raise DeviceError(f"{type(self).__name__} does not run on a device (what does: "
                              f"{', '.join(ON_DEVICE)}); " f"{CPU_FIX}.", device="cuda")
        return features

    def _fused_block(self):
        """The block function of passes that make the features inside their tasks
        (:class:`~rfstream.features.source.FeatureSource`): ``_block_into`` by default, with
        its device twin (:meth:`_device_features`) where the map has one."""
        device = self._device_features()
        return self._block_into if device is None else DeviceTwin(self._block_into, device)

    # --------------------------------------------------------------- helpers
    def _output_dtype(self) -> np.dtype:
        try:
            dtype = np.dtype(self.dtype)
        except TypeError:
            dtype = None
        if dtype is None or dtype.name not in _DTYPES:
            raise ValueError(
                f"dtype must be 'float32' or 'float64'; got {self.dtype!r}."
            )
        return dtype

    def _resolve_gamma(self, X, rng, gamma=None) -> float:
        """One gamma, ``self.gamma`` or the given one: a float, ``"auto"`` or ``"auto*F"``
        (a grid: :class:`rfstream.features.grid.GammaGridMixin`)."""
        return resolve_gamma(X, getattr(self, "kernel", "gaussian"), rng,
                             self.gamma if gamma is None else gamma)

    def _check_input(self, X, *, reset):
        """numpy/sparse/pandas -> ``validate_data``; dask array or DataFrame -> a dask array
        (:func:`rfstream._validation.check_X`: metadata checks, a DataFrame's partition lengths)."""
        return check_X(self, X, reset=reset, known_rows=False, accept_sparse=("csr", "csc"))

    def __dask_tokenize__(self):
        # Deterministic graph names: class, parameters and fitted state.
        state = {k: v for k, v in vars(self).items() if k.endswith("_")}
        return normalize_token(
            (type(self).__module__, type(self).__qualname__, self.get_params(deep=False), state)
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        try:
            tags.transformer_tags.preserves_dtype = [self._output_dtype().name]
        except ValueError:
            tags.transformer_tags.preserves_dtype = []
        return tags


class KernelFeatureMap(FeatureMap):
    """A map whose parameters are exactly ``n_components`` features of one kernel:
    the constructor and constraints shared by Fastfood, circulant and Nyström maps
    (a subclass narrows ``kernel`` in its own ``_parameter_constraints``)."""

    _parameter_constraints: dict = {**FeatureMap._parameter_constraints, **KERNEL_PARAMETERS}

    def __init__(self, n_components=100, *, kernel="gaussian", gamma=1.0, random_state=None,
                 dtype="float32"):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.random_state = random_state
        self.dtype = dtype
