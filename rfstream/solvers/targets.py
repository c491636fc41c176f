"""Targets of the solvers: the checks on ``y``, its classes, class codes and +-1 matrices.

One place for what every solver (ridge, SGD, Newton) and every supervised feature map (CNM,
EERF) does with the labels before a pass; the +-1 one-vs-rest targets are Rahimi & Recht
2007's "Fourier+LS" ones (and Pegasos' y in {-1, +1}).  The block functions are pure numpy
and picklable; only :func:`find_classes` computes with dask.  docs/design-notes.md,
"Solvers' shared modules".
"""
from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
from dask.base import is_dask_collection
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import assert_all_finite

from .._validation import dask_labels
from ..cluster import compute


def check_targets(X, y, *, multi_output=False):
    """``y`` checked against ``X`` and returned aligned with it: dask with ``X``'s row chunks, or numpy.

    Parameters
    ----------
    X : dask array or ndarray (or sparse matrix) of shape (n_samples, n_features)
    y : array-like, pandas Series, dask array or dask Series of shape (n_samples,)
        or (n_samples, n_targets) (a DataFrame, pandas or dask)
    multi_output : bool, default=False
        Accept a 2-D ``y`` (one row of targets per row of ``X``).

    Returns
    -------
    y : dask array for a dask ``X``: a numpy ``y`` wrapped with ``X``'s row chunks (not
        copied to the workers until a pass needs it), a dask array ``y`` as it is (a
        pass over both aligns their chunks), a dask Series (or DataFrame) converted
        lazily with ``X``'s row chunks (:func:`rfstream._validation.dask_labels`:
        nothing computed when it has one partition per row block of ``X``); for a
        numpy ``X``, an ndarray (a dask ``y`` is computed).

    Raises
    ------
    ValueError
        When ``y`` has another number of rows than ``X``, or is not 1-D (2-D with
        ``multi_output``).
    """
    if is_dask_collection(y) and not isinstance(X, da.Array):
        y = np.asarray(compute(y))  # numpy X: y is as small as X
    elif is_dask_collection(y):
        y = dask_labels(y, X.chunks[0])
    shape = np.shape(y) if not isinstance(y, da.Array) else y.shape
    if not shape or shape[0] != X.shape[0]:
        rows = shape[0] if shape else "no rows (a scalar)"
        raise ValueError(f"X has {X.shape[0]} rows but y has {rows}; pass one target per row of X.")
    if len(shape) != 1 and not (multi_output and len(shape) == 2):
        raise ValueError(f"y must be 1-D{' or 2-D' if multi_output else ''} (one target per row of "
                         f"X); got shape {shape}. Pass y as a vector.")
    if not isinstance(X, da.Array):
        return np.asarray(y)
    if isinstance(y, da.Array):
        return y
    return da.from_array(np.asarray(y), chunks=(X.chunks[0],) + ((-1,) if len(shape) == 2 else ()))


def _check_labels(y):
    """scikit-learn's check of classification labels, NaN and infinity refused first by name
    (its own check casts them to integers, with a RuntimeWarning, before it refuses them)."""
    if np.asarray(y).dtype.kind in "fc":
        assert_all_finite(y, input_name="y")
    check_classification_targets(y)


def find_classes(y, *, name="the classifier", return_counts=False, also=()):
    """The sorted distinct labels of ``y`` (and how often each occurs), at least two of them.

    Parameters
    ----------
    y : array-like or dask array of shape (n_samples,)
        Class labels.  For a dask array this is one ``da.unique`` reduction:
        only the distinct values (and counts) reach the client.
    name : str
        The estimator, for the error message.
    return_counts : bool, default=False
    also : tuple
        More values to compute in the same pass (e.g. sums of the sample weights):
        dask collections are computed with the classes, others returned as they are.

    Returns
    -------
    classes : ndarray of shape (n_classes,)
    counts : ndarray of shape (n_classes,), only with ``return_counts``
    *also : the computed ``also``, only when given

    Raises
    ------
    ValueError
        "Unknown label type" (scikit-learn's ``check_classification_targets``)
        for continuous labels: checked on ``y`` itself for numpy input and on the
        distinct values for dask input, so both refuse the same labels; and
        when there are fewer than two classes.
    """
    if isinstance(y, da.Array):
        lazy = da.unique(y, return_counts=True) if return_counts else (da.unique(y),)
        found = compute(*lazy, *also)
        found = found if len(lazy) + len(also) > 1 else (found,)
        found, extra = found[: len(lazy)], tuple(found[len(lazy):])
        with warnings.catch_warnings():  # its "more classes than half the samples" hint counts
            warnings.filterwarnings("ignore", message="The number of unique classes")  # the distinct values
            _check_labels(found[0])
    else:
        _check_labels(y)
        found = np.unique(y, return_counts=True) if return_counts else (np.unique(y),)
        extra = compute(*also, None)[:-1] if any(is_dask_collection(a) for a in also) else tuple(also)
    classes = np.asarray(found[0])
    if classes.size < 2:
        raise ValueError(
            f"{name} needs samples of at least 2 classes in y; got {classes.size} class "
            f"({classes.tolist()})."
        )
    out = (classes, np.asarray(found[1])) if return_counts else (classes,)
    return out + extra if (return_counts or extra) else classes


def encode_classes(y, classes, *, fix="fit on data that holds every class"):
    """Class codes ``0 .. K-1`` (indices into the sorted ``classes``) of a block of labels
    ``y``; a ValueError names the first five labels not in ``classes``, then ``fix``."""
    y = np.asarray(y)
    codes = np.minimum(np.searchsorted(classes, y), classes.size - 1)
    unknown = classes[codes] != y
    if np.any(unknown):
        raise ValueError(
            f"y has labels {np.unique(y[unknown])[:5].tolist()} not in classes "
            f"{classes.tolist()}; {fix}."
        )
    return codes


def signed(codes, n_classes):
    """The +-1 one-vs-rest targets of class codes, float64.

    Shape (m, 1) for two classes (+1 for code 1, -1 for code 0) and (m, K)
    for K > 2 classes (+1 in the row's class column, -1 elsewhere).
    """
    codes = np.asarray(codes)
    if n_classes == 2:
        return np.where(codes == 1, 1.0, -1.0)[:, None]
    return np.where(codes[:, None] == np.arange(n_classes)[None, :], 1.0, -1.0)


def ovr_targets(y, classes):
    """+1 for the row's class and -1 elsewhere (one column for two classes), float64."""
    return signed(encode_classes(y, classes), classes.size)


def regression_targets(y):
    """Real targets as a float64 (m, T) matrix (T = 1 for a 1-D ``y``)."""
    y = np.asarray(y, dtype=np.float64)
    return y[:, None] if y.ndim == 1 else y


def class_weights(class_weight, classes, counts=None):
    """One float64 weight per class of ``classes`` from scikit-learn's ``class_weight`` (a
    dict, 1 for a label it leaves out; "balanced": ``n / (n_classes * count(class))`` from
    the rows per class ``counts``), or None for equal weights."""
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        if class_weight != "balanced" or counts is None:
            raise ValueError(f"class_weight={class_weight!r} needs the class counts of the whole y "
                             "(class_weight='balanced' with fit); pass a dict of weights instead.")
        return counts.sum() / (classes.size * np.maximum(counts, 1)).astype(np.float64)
    unknown = [k for k in class_weight if k not in set(classes.tolist())]
    if unknown:
        raise ValueError(f"class_weight has labels {unknown} not in classes {classes.tolist()}.")
    return np.array([float(class_weight.get(c, 1.0)) for c in classes.tolist()])


def planned_targets(task, classes=None, y=None):
    """The targets ridge fits, known before any pass over ``y``: for "classification" one
    (two classes) or one per class of the dataset's ``classes`` (its metadata; 1 when it
    names none, a lower bound), for "regression" the columns of ``y``."""
    if task == "classification":
        k = len(classes) if classes is not None else 2
        return 1 if k <= 2 else k
    return 1 if y is None or getattr(y, "ndim", 1) == 1 else int(y.shape[1])
