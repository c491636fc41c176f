"""Streaming preprocessing: standardizer, reproducible split, label encoding.

All three work on numpy arrays and on dask arrays (the standardizer on pandas and dask
DataFrames too); for dask input nothing with n in its shape reaches the client.  The
moments merge is Chan, Golub & LeVeque (1979).
Narrative: docs/design-notes.md, "rfstream/preprocess.py".
"""
from __future__ import annotations

from functools import partial
from numbers import Real

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._validation import check_X
from .cluster import compute
from .random import STREAM_SPLIT, check_seed, chunk_offsets, row_uniform
from .devices import array_namespace, blocks_like, is_numpy, numpy_dtype, on_device_once, xp_dtype
from .reductions import block_partials, moments, reduce_rows, sum_rows, unpack_extrema, unpack_moments


def check_finite_columns(mean, var):
    """Raise a ``ValueError`` if a column's moments are not finite (the column holds NaN or inf):
    how NaN and inf are found without a pass of their own."""
    bad = np.flatnonzero(~(np.isfinite(mean) & np.isfinite(var)))
    if bad.size:
        raise ValueError(
            f"X contains NaN or infinity in {bad.size} column(s) (first: {bad[:5].tolist()}); "
            "remove or impute them (rfstream convert fills missing CSV values with the column mean)."
        )


def _float_dtype(dtype):
    return dtype if dtype in (np.float32, np.float64) else np.float64


#: ``standardize="auto"`` leaves the columns alone when the median of their ranges is at least this
#: fraction of the span of all of them (docs/accuracy.md, "Standardizing: the rule")
COMMON_SCALE_FRACTION = 0.5


def _g(value):
    return f"{value:.4g}"


def common_scale(data_min, data_max, passthrough=None):
    """``(shared, reason)``: whether the columns already share one scale, by the rule of
    ``standardize="auto"`` (docs/accuracy.md): over the columns a Standardizer would scale that
    are not constant, the median of their ranges ``max_j - min_j`` is at least
    :data:`COMMON_SCALE_FRACTION` of the span ``max_j max_j - min_j min_j`` of all of them.
    ``reason`` says why, in a few words (no column to scale: shared)."""
    lo, hi = np.asarray(data_min, np.float64), np.asarray(data_max, np.float64)
    scaled = np.ones(lo.size, dtype=bool)
    if passthrough:
        scaled[np.asarray(passthrough, dtype=np.intp)] = False
    ranges = hi - lo
    scaled &= ranges > 0
    if not scaled.any():
        return True, "no column to scale"
    low, high = lo[scaled].min(), hi[scaled].max()
    typical = float(np.median(ranges[scaled]))
    if typical >= COMMON_SCALE_FRACTION * (high - low):
        return True, f"every column in [{_g(low)}, {_g(high)}], median range {_g(typical)}"
    return False, (f"columns on different scales: ranges {_g(ranges[scaled].min())} to "
                   f"{_g(ranges[scaled].max())}, median {_g(typical)}, all in [{_g(low)}, {_g(high)}]")


#: the attribute of a Standardizer's dask output that names ``(scaler, input)``: a few rows of the
#: output are the scaler's ``_block`` of the same rows of the input (:func:`gather_rows`)
STANDARDIZED = "_rfstream_standardized"


def gather_rows(X, index):
    """The rows ``index`` of the dask array ``X``, lazy; for a Standardizer's output, gathered from
    its input and standardized on the client: the same numbers, from the input's graph (so that a
    prefetch of the input's rows serves them, :func:`rfstream.cluster.prefetch`)."""
    made = getattr(X, STANDARDIZED, None)
    if made is None:
        return X[index], None
    scaler, source = made
    return source[index], scaler._block


def binary_passthrough(X):
    """The columns of a Standardizer's dask output ``X`` that hold its input's values unchanged
    and were within [0, 1] when it was fitted (its ``passthrough`` columns: one-hot columns,
    :func:`rfstream.io.onehot_columns`), as a sorted tuple; ``()`` for any other ``X``.  Random
    Fourier features project such columns as sums of rows (:mod:`rfstream.features.onehot`)."""
    made = getattr(X, STANDARDIZED, None)
    if made is None or not made[0].passthrough:
        return ()
    scaler = made[0]
    d = scaler.mean_.size
    cols = np.unique(np.asarray(scaler.passthrough, dtype=np.intp) % d)
    low, high = getattr(scaler, "data_min_", None), getattr(scaler, "data_max_", None)
    if low is not None and high is not None:
        cols = cols[(low[cols] >= 0) & (high[cols] <= 1)]
    return tuple(int(j) for j in cols)


class Standardizer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Zero mean, unit variance per column, fitted in one streaming pass.

    The moments (count, mean, centred second moment) are computed per row block
    in float64 and merged with the pairwise update of Chan, Golub & LeVeque
    (1979), so the result is exact whatever the chunking and does not lose
    precision when a column's mean is large.  Columns with zero variance are
    centred and left unscaled.

    Parameters
    ----------
    with_mean, with_std : bool, default=True
        Centre, and scale to unit variance.
    passthrough : list of int, optional
        Columns left as they are, e.g. one-hot indicators of categorical variables
        (standardized, a rare category's 0/1 column would dominate every distance:
        docs/design-notes.md); ``rfstream fit`` passes a dataset's one-hot columns.
    auto : bool, default=False
        Leave every column as it is when the columns already share one scale (pixels: the
        median column's range at least half of the span of all of them, :func:`common_scale`),
        decided from the same pass; ``fit_dataset(standardize="auto")``.  The rule and its
        measurement: docs/accuracy.md.

    Attributes
    ----------
    mean_, var_, scale_ : ndarray of shape (n_features,), float64
    data_min_, data_max_ : ndarray of shape (n_features,), float64
        Each column's minimum and maximum (from the same pass).
    applied_ : bool
        Whether ``transform`` standardizes (False: ``auto`` found one common scale, and
        ``transform`` returns the columns as they are, as floats).
    decision_ : str
        What was decided and why, e.g. ``"auto -> off (every column in [0, 16], median range 16)"``.
    n_samples_seen_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of a pandas or dask DataFrame ``X`` (string names only).

    Notes
    -----
    ``X`` may be a numpy array, a pandas DataFrame, a dask array or a dask
    DataFrame (:func:`rfstream._validation.check_X`); a dask DataFrame stays lazy:
    only its partition lengths are computed, then the moments are one reduction.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from rfstream import Standardizer
    >>> X = np.random.default_rng(0).normal(3.0, 10.0, size=(200, 3))
    >>> sc = Standardizer().fit(X)
    >>> Xs = sc.transform(X)
    >>> Xs.shape, bool(np.allclose(Xs.mean(axis=0), 0)), bool(np.allclose(Xs.std(axis=0), 1))
    ((200, 3), True, True)
    >>> Xd = sc.transform(da.from_array(X, chunks=50))  # lazy, block by block
    >>> bool(np.allclose(Xd.compute(), Xs))
    True
    """

    _parameter_constraints = {"with_mean": ["boolean"], "with_std": ["boolean"], "passthrough": [list, None],
                              "auto": ["boolean"]}

    def __init__(self, *, with_mean=True, with_std=True, passthrough=None, auto=False):
        self.with_mean = with_mean
        self.with_std = with_std
        self.passthrough = passthrough
        self.auto = auto

    def check_parameters(self, n_features=None):
        """Raise what ``fit`` would raise for the parameters alone; ``n_features`` is not needed."""
        self._validate_params()

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`)."""
        d = view.int("n_features_in_")
        for name in ("mean_", "scale_", "var_"):
            view.array(name, (d,), nonnegative=name == "var_")
        view.check("scale_ must be positive (each column is divided by it)",
                   lambda s: bool(np.all(s > 0)), "scale_")
        for name in ("data_min_", "data_max_"):  # absent from models saved before they were kept
            view.array(name, (d,), optional=True)
        if type(view.fitted.get("applied_", True)) is not bool:
            view.fail(f"applied_ is {str(view.fitted.get('applied_'))[:40]}, not true or false")

    def fit(self, X, y=None):
        """The column moments of ``X`` in one pass (a reduction over the row blocks for dask input)."""
        self._validate_params()
        X = check_X(self, X, reset=True)
        vec = compute(moments(X, extrema=True))
        n, mean, var = unpack_moments(vec, extrema=True)
        check_finite_columns(mean, var)
        self.data_min_, self.data_max_ = unpack_extrema(vec)
        self.n_samples_seen_ = int(n)
        self.var_ = var
        scale = np.sqrt(var)
        scale[scale < 10 * np.finfo(np.float64).eps * np.maximum(1.0, np.abs(mean))] = 1.0
        if self.passthrough:
            keep = np.asarray(self.passthrough, dtype=np.intp)
            if keep.min() < -mean.size or keep.max() >= mean.size:
                raise ValueError(
                    f"passthrough has column indices outside [0, {mean.size}); got {self.passthrough}."
                )
            mean, scale = mean.copy(), scale.copy()
            mean[keep], scale[keep] = 0.0, 1.0
        self.mean_ = mean
        self.scale_ = scale
        self.applied_ = True
        self.decision_ = "on"
        if self.auto:
            shared, reason = common_scale(self.data_min_, self.data_max_, self.passthrough)
            self.applied_ = not shared
            self.decision_ = f"auto -> {'off' if shared else 'on'} ({reason})"
        return self

    def _steps(self):
        """``(centre, scale)``: what ``transform`` does (neither when ``auto`` left the columns alone)."""
        applied = getattr(self, "applied_", True)
        return self.with_mean and applied, self.with_std and applied

    def _block(self, x):
        if not is_numpy(x):
            return self._device_block(x)
        x = np.asarray(x)
        dtype = _float_dtype(x.dtype)
        x = x.astype(dtype, copy=True)
        centre, scale = self._steps()
        if centre:
            x -= self.mean_.astype(dtype)
        if scale:
            x /= self.scale_.astype(dtype)
        return x

    def _device_block(self, x):
        """:meth:`_block` of rows on a device, in their array namespace (rfstream.devices)."""
        xp = array_namespace(x)
        dtype = _float_dtype(numpy_dtype(x))
        x = xp.astype(x, xp_dtype(xp, dtype))
        centre, scale = self._steps()
        if centre:
            x = x - on_device_once(self.mean_, xp, dtype)
        if scale:
            x = x / on_device_once(self.scale_, xp, dtype)
        return x

    def transform(self, X):
        """Standardize X: numpy or pandas in, numpy out; dask array or DataFrame in, lazy dask
        array out (only a dask DataFrame's partition lengths are computed)."""
        check_is_fitted(self)
        X = check_X(self, X, reset=False)
        if isinstance(X, da.Array):
            dtype = _float_dtype(X.dtype)
            out = X.map_blocks(self._block, dtype=dtype, chunks=X.chunks, meta=blocks_like(X, 2, dtype))
            setattr(out, STANDARDIZED, (self, X))  # rows gathered from out may be gathered from X
            return out
        return self._block(X)

    def inverse_transform(self, X):
        check_is_fitted(self)
        centre, scale = self._steps()
        return X * (self.scale_ if scale else 1.0) + (self.mean_ if centre else 0.0)


# --- split -------------------------------------------------------------------

#: most bins of the per-class histogram of a stratified split (a power of two, so that
#: ``floor(u * bins)`` is exact); fewer for many classes, so a partial stays <= 2**20 values
STRATIFY_BINS = 4096


def _test_mask(start, stop, seed, test_size, codes=None, thresholds=None):
    """Rows ``start:stop`` that go to the test set: ``u < test_size``, or ``u < t[class]``."""
    u = row_uniform(seed, STREAM_SPLIT, start, stop)
    return u < (test_size if thresholds is None else thresholds[codes])


def _select_rows(x, *codes, seed, test_size, test, thresholds=None, block_info=None):
    start, stop = block_info[0]["array-location"][0]
    mask = _test_mask(start, stop, seed, test_size, codes[0].ravel() if codes else None, thresholds)
    return x[mask if test else ~mask]


def _split_array(a, seed, test_size, test, counts, codes=None, thresholds=None):
    chunks = (counts,) + a.chunks[1:]
    extra = () if codes is None else (codes[(slice(None),) + (None,) * (a.ndim - 1)],)
    return da.map_blocks(
        partial(_select_rows, seed=seed, test_size=test_size, test=test, thresholds=thresholds),
        a, *extra,
        chunks=chunks,
        dtype=a.dtype,
        meta=np.empty((0,) * a.ndim, a.dtype),
    )


def _binned(codes, offset, seed, bins):
    u = row_uniform(seed, STREAM_SPLIT, offset, offset + len(codes))
    return u, (u * bins).astype(np.int64)


def _class_histogram(codes, offset=0, *, seed, bins, n_classes):
    """Counts of the rows' uniforms per (class, bin): ``(n_classes * bins,)``."""
    _, b = _binned(codes, offset, seed, bins)
    return np.bincount(codes * bins + b, minlength=n_classes * bins).astype(np.float64)


def _boundary_values(codes, offset=0, *, seed, bins, boundary, width):
    """The uniforms of each class's rows in its boundary bin, smallest first, padded with inf."""
    u, b = _binned(codes, offset, seed, bins)
    out = np.full((boundary.size, width), np.inf)
    hit = b == boundary[codes]
    for c in np.unique(codes[hit]):
        values = np.sort(u[hit & (codes == c)])
        out[c, : values.size] = values
    return out.ravel()


def _keep_smallest(parts, axis=0, keepdims=True, *, n_classes):
    """Merge ``(k, n_classes * width)`` partials of :func:`_boundary_values`: each class's
    ``width`` smallest values (all of them: no class has more than ``width`` in its bin)."""
    parts = np.asarray(parts)
    width = parts.shape[1] // n_classes
    merged = parts.reshape(parts.shape[0], n_classes, width).transpose(1, 0, 2).reshape(n_classes, -1)
    out = np.sort(merged, axis=1)[:, :width].ravel()
    return out[None, :] if keepdims else out


def stratified_thresholds(codes, n_classes, seed, test_size):
    """Per class ``c``, the uniform ``t_c`` below which exactly ``round(test_size * n_c)`` of
    its rows fall: the test set of :func:`train_test_split` with ``stratify``.

    ``t_c`` is the ``(k_c + 1)``-th smallest uniform of class ``c``, ``k_c = floor(test_size
    * n_c + 0.5)``, found by two reductions over the class codes ``0 .. n_classes - 1``
    (docs/design-notes.md, "rfstream/preprocess.py").  Returns a float64 array of
    ``n_classes`` thresholds.
    """
    bins = 1 << (max(64, min(STRATIFY_BINS, 2**20 // max(n_classes, 1))).bit_length() - 1)
    hist = compute(sum_rows(_class_histogram, n_classes * bins, codes, seed=seed, bins=bins,
                            n_classes=n_classes)).reshape(n_classes, bins)
    n = hist.sum(axis=1)
    k = np.floor(test_size * n + 0.5)
    thresholds = np.where(k >= n, np.inf, 0.0)  # every row of the class, or none (k = 0)
    inner = np.flatnonzero((k > 0) & (k < n))
    if inner.size:
        cum = np.cumsum(hist[inner], axis=1)
        boundary = np.full(n_classes, -1, dtype=np.int64)
        boundary[inner] = np.argmax(cum > k[inner, None], axis=1)  # the bin of the (k+1)-th value
        in_bin = hist[inner, boundary[inner]]
        rank = (k[inner] - (cum[np.arange(inner.size), boundary[inner]] - in_bin)).astype(np.int64)
        width = int(in_bin.max())
        values = compute(reduce_rows(_boundary_values, partial(_keep_smallest, n_classes=n_classes),
                                     n_classes * width, codes, seed=seed, bins=bins, boundary=boundary,
                                     width=width)).reshape(n_classes, width)
        thresholds[inner] = values[inner, rank]
    return thresholds


def _count_test(codes, offset=0, *, seed, thresholds):
    return np.array([_test_mask(offset, offset + len(codes), seed, None, codes, thresholds).sum()], float)


def train_test_split(*arrays, test_size=0.25, random_state=0, stratify=None):
    """Reproducible random row split of numpy or dask arrays.

    Row ``i`` goes to the test set when ``u_i < test_size``, with ``u_i`` a uniform drawn
    from ``(random_state, i)`` alone (:func:`rfstream.random.row_uniform`): the split does
    not depend on the chunking or the workers, and each output chunk is the selected rows
    of one input chunk, computed lazily (docs/design-notes.md, "rfstream/preprocess.py").

    Parameters
    ----------
    *arrays : numpy or dask arrays
        The same number of rows each.
    test_size : float in (0, 1), default=0.25
        The test fraction, in expectation (exactly per class with ``stratify``).
    random_state : int, default=0
        The seed.
    stratify : array of shape (n,), optional
        Labels: each class ``c`` has exactly ``round(test_size * n_c)`` test rows, those
        of its rows with the smallest ``u_i`` (:func:`stratified_thresholds`).

    Returns
    -------
    list
        ``train_0, test_0, train_1, test_1, ...`` like scikit-learn.

    Raises
    ------
    ValueError
        For a ``test_size`` outside (0, 1), no array, or arrays of different lengths.
    """
    if isinstance(test_size, bool) or not isinstance(test_size, Real) or not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must be a float in (0, 1); got {test_size!r}.")
    if not arrays:
        raise ValueError("train_test_split needs at least one array.")
    seed = check_seed(random_state)
    n = arrays[0].shape[0]
    for a in (*arrays, *(() if stratify is None else (stratify,))):
        if a.shape[0] != n:
            raise ValueError(
                f"all arrays (and stratify) must have the same number of rows; got "
                f"{[x.shape[0] for x in arrays] + ([] if stratify is None else [stratify.shape[0]])}."
            )
    codes = thresholds = None
    if stratify is not None:
        codes, classes = encode_labels(stratify)
        thresholds = stratified_thresholds(codes, classes.size, seed, float(test_size))
    out = []
    if isinstance(arrays[0], da.Array):
        rows = arrays[0].chunks[0]
        starts = chunk_offsets(rows)
        if codes is None:
            test_counts = tuple(int(_test_mask(s, s + c, seed, test_size).sum()) for s, c in zip(starts, rows))
        else:
            codes = da.asarray(codes).rechunk({0: rows})
            test_counts = tuple(int(t) for t in compute(block_partials(
                _count_test, 1, codes, seed=seed, thresholds=thresholds))[:, 0])
        train_counts = tuple(c - t for c, t in zip(rows, test_counts))
        for a in arrays:
            a = da.asarray(a).rechunk({0: rows})
            out += [
                _split_array(a, seed, test_size, False, train_counts, codes, thresholds),
                _split_array(a, seed, test_size, True, test_counts, codes, thresholds),
            ]
        return out
    test = _test_mask(0, n, seed, test_size, None if codes is None else np.asarray(codes), thresholds)
    for a in arrays:
        a = np.asarray(a)
        out += [a[~test], a[test]]
    return out


# --- labels --------------------------------------------------------------------

def _encode_block(y, classes):
    codes = np.searchsorted(classes, y)
    codes = np.minimum(codes, len(classes) - 1)
    return np.where(classes[codes] == y, codes, -1).astype(np.int32)


def encode_labels(y, classes=None):
    """Map labels to integer codes ``0..C-1`` (``-1`` for labels not in ``classes``).

    Parameters
    ----------
    y : numpy or dask array of shape (n,)
        The labels.
    classes : array, optional
        The sorted classes; default: the distinct values of ``y`` (one ``da.unique``
        reduction for dask input).

    Returns
    -------
    codes : int32 array of shape (n,)
        Lazy for a dask ``y``.
    classes : ndarray
    """
    if classes is None:
        classes = compute(da.unique(y)) if isinstance(y, da.Array) else np.unique(y)
    classes = np.asarray(classes)
    if isinstance(y, da.Array):
        codes = y.map_blocks(
            _encode_block, classes, dtype=np.int32, meta=np.empty((0,), np.int32)
        )
        return codes, classes
    return _encode_block(np.asarray(y), classes), classes
