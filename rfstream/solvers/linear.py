"""Prediction of fitted linear models, shared by the ridge and SGD solvers.

Decision values are ``X coef' + intercept``: numpy (or pandas) in, numpy out; dask
(an array, or a DataFrame converted by :func:`rfstream._validation.check_X`) in, a
lazy dask array (``map_blocks`` with explicit chunks and meta).  A single output (1-D
``coef_``, or one row of ``coef_`` for a classifier) gives a 1-D result.  When the
dask ``X`` is a feature map's ``transform`` output itself
(:mod:`rfstream.features.fused`), each task computes the features of its rows a
sub-block at a time and multiplies them right away, as every other pass does.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
from dask.base import is_dask_collection
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .._validation import check_X
from ..io.model_checks import ARRAY_KINDS
from ..devices import array_namespace, blocks_like, device_of_meta, is_numpy, numpy_dtype, on_device_once, to_host
from ..features.fused import feature_sub_blocks, fused_buffer
from ..features.on_device import device_block
from ..features.source import fused_rows
from ..reductions import shared


def _linear_block(x, coef, intercept, one):
    out = x @ coef.T.astype(x.dtype) + intercept
    out = out.astype(np.float64, copy=False)
    return out[:, 0] if one else out


def _fused_linear_block(x, coef, intercept, one, features, dtype, n_features):
    """``_linear_block`` of the features of input rows ``x``, made a sub-block at a time
    (:func:`rfstream.features.fused.feature_sub_blocks`): the block's whole ``rows x D``
    feature array (512 MB per 65,536-row task at D = 2000) never exists."""
    w = coef.T.astype(dtype)
    out = np.empty((x.shape[0], coef.shape[0]), dtype=np.float64)
    for start, stop, z in feature_sub_blocks(x, features, fused_buffer(x.shape[0], n_features, dtype)):
        out[start:stop] = z @ w
    out += intercept
    return out[:, 0] if one else out


def _device_linear_block(x, coef, intercept, one, features=None):
    """``_linear_block`` of rows on a device (of their features, made there by the map's device
    twin, :mod:`rfstream.features.on_device`): the decisions stay on the device, in float64."""
    z = x if features is None else features(x)
    xp = array_namespace(z)
    out = xp.astype(xp.matmul(z, xp.matrix_transpose(on_device_once(coef, xp, numpy_dtype(z)))), xp.float64)
    out = out + on_device_once(intercept, xp, np.float64)
    return out[:, 0] if one else out


def scores_to_labels(scores, classes):
    """Class labels of decision scores: ``scores > 0`` for one column, else the argmax (on a
    device: there, for numeric classes)."""
    if not is_numpy(scores):
        xp = array_namespace(scores)
        index = xp.astype(scores > 0, xp.int64) if scores.ndim == 1 else xp.argmax(scores, axis=1)
        if classes.dtype.kind in "biuf":
            return xp.take(on_device_once(classes, xp), index)
        return classes[to_host(index)]
    if scores.ndim == 1:
        return classes[(scores > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]


class LinearPredictMixin:
    """``_decision(X)`` from fitted ``coef_`` and ``intercept_``."""

    def _decision(self, X):
        check_is_fitted(self)
        coef = np.atleast_2d(self.coef_)
        intercept = np.atleast_1d(self.intercept_)
        one = np.ndim(self.coef_) == 1 or (isinstance(self, ClassifierMixin) and coef.shape[0] == 1)
        if is_dask_collection(X):
            features, rows = fused_rows(X, even=False)  # the output keeps X's row chunks
            X = check_X(self, X, reset=False)  # a dask DataFrame: converted, not loaded
            chunks = (X.chunks[0],) if one else (X.chunks[0], (coef.shape[0],))
            kwargs = {"dtype": np.float64, "chunks": chunks, "drop_axis": [1] if one else [],
                      "meta": np.empty((0,) * len(chunks), np.float64)}
            if device_of_meta(rows._meta) != "cpu":  # rows on a device: decisions made and kept there
                kwargs["meta"] = blocks_like(rows, len(chunks), np.float64)
                return rows.map_blocks(_device_linear_block, coef, intercept, one,
                                       None if features is None else shared(device_block(features)), **kwargs)
            if features is not None:  # X = map.transform(rows): the features are made in the task
                return rows.map_blocks(_fused_linear_block, coef, intercept, one, shared(features), X.dtype,
                                       X.shape[1], **kwargs)
            return X.map_blocks(_linear_block, coef, intercept, one, **kwargs)
        X = check_X(self, X, reset=False, accept_sparse="csr")
        return (_linear_block if is_numpy(X) else _device_linear_block)(X, coef, intercept, one)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR features, e.g. random binning
        return tags


class LinearClassifierMixin(LinearPredictMixin):
    """``decision_function`` and ``predict`` of a linear classifier with ``classes_``."""

    def decision_function(self, X):
        """Scores (n,) for two classes, (n, n_classes) otherwise; lazy for dask."""
        return self._decision(X)

    def predict(self, X):
        """Class labels: numpy in, numpy out; dask in, lazy dask out."""
        return labels_from_scores(self.decision_function(X), self.classes_)


def labels_from_scores(scores, classes):
    """Class labels from decision values (sign for (n,), argmax for (n, K)); lazy for dask."""
    if isinstance(scores, da.Array):
        on_device = device_of_meta(scores._meta) != "cpu" and classes.dtype.kind in "biuf"
        return scores.map_blocks(
            scores_to_labels, classes, dtype=classes.dtype,
            drop_axis=[1] if scores.ndim == 2 else [], chunks=(scores.chunks[0],),
            meta=blocks_like(scores, 1, classes.dtype) if on_device else np.empty((0,), classes.dtype),
        )
    return scores_to_labels(scores, classes)


def classifier_state(view):
    """The fitted state of a linear classifier (a saved model's, :mod:`rfstream.io.model_checks`):
    ``classes_`` (two or more), ``coef_`` and ``intercept_`` (one row per class, one for two
    classes), and a calibrated ridge classifier's ``platt_``; the classes distinct and sorted
    (as ``np.unique`` gives them: a class's row is found by its rank)."""
    shape = view.array("classes_", kinds=ARRAY_KINDS, finite=False)
    if len(shape) != 1 or shape[0] < 2:
        view.fail("classes_ must be one-dimensional with at least two classes")
    view.distinct_sorted("classes_")
    targets = 1 if shape[0] == 2 else shape[0]
    view.array("coef_", (targets, view.int("n_features_in_")))
    view.array("intercept_", (targets,))
    view.array("platt_", (targets, 2), optional=True)


def regressor_state(view):
    """The fitted state of a linear regressor: ``coef_`` of one target (and a number
    ``intercept_``) or of several (an array); ``(n_features, n_targets)``."""
    d = view.int("n_features_in_")
    shape = view.array("coef_")
    if shape == (d,):
        view.number("intercept_")
    elif len(shape) == 2 and shape[1] == d:
        view.array("intercept_", shape[:1])
    else:
        view.fail(f"coef_ has shape {shape}, not ({d},) or (n_targets, {d})")
    if "target_scale_" in view.fitted:
        view.number("target_scale_", positive=True)
    return d, 1 if len(shape) == 1 else shape[0]
