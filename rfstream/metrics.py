"""Metrics computed as reductions: evaluation of a model in one pass, kernel approximation.

Error rate; relative RMSE ||y - y_hat||_2 / ||y||_2 (Chen et al. 2015, Section 4.2); kernel
approximation error ||K - Z Z'||_F / ||K||_F on sampled rows (Chen et al. 2015, Section 4.1;
Chang et al. 2017, Section 5.1); the others named and defined as scikit-learn's.
:func:`classification_metrics` and :func:`regression_metrics` are one
:func:`rfstream.reductions.sum_rows` each.  Departure: the AUC (Hanley & McNeil 1982) comes
from per-class histograms in the same pass, exact up to the ``auc_error_bound`` it reports.
Narrative: docs/design-notes.md, "rfstream/metrics.py".
"""
from __future__ import annotations

import dask.array as da
import numpy as np

from .cluster import compute
from .kernels import kernel_matrix
from .random import check_seed, sample_rows
from .reductions import Layout, moments, sum_rows, unpack_moments

#: Edges of the per-class histogram of decision values behind the AUC: 2^16 bins of
#: equal angle, tan(pi (k / 2^16 - 1/2)) (width 4.8e-5 at 0, 0.005 at 10; up to
#: +-20,861), then a bin per binade to the largest float.
_AUC_EDGES = np.concatenate([-(2.0 ** np.arange(1023, 14, -1)),
                             np.tan(np.pi * (np.arange(1, 2**16) / 2**16 - 0.5)),
                             2.0 ** np.arange(15, 1024)])
AUC_BINS = _AUC_EDGES.size + 1
#: equal-width bins over [0, 1] of the reliability table
RELIABILITY_BINS = 10


def _sum(a):
    return a.sum(dtype=np.float64) if isinstance(a, da.Array) else np.sum(a, dtype=np.float64)


def error_counts(y_true, y_pred):
    """``(wrong, n)``: the number of wrong predictions (lazy for dask) and of rows."""
    wrong = y_true != y_pred
    return _sum(wrong), y_true.shape[0]


def error_rate(y_true, y_pred) -> float:
    """Fraction of misclassified rows (one reduction).

    Parameters
    ----------
    y_true, y_pred : numpy or dask arrays of shape (n,)

    Returns
    -------
    float
    """
    wrong, n = error_counts(y_true, y_pred)
    return float(compute(wrong)) / max(n, 1)


def squared_error_sums(y_true, y_pred):
    """``(sum (y - y_hat)^2, sum y^2)`` in float64, lazy for dask."""
    y_true = y_true.astype(np.float64)
    return _sum((y_true - y_pred) ** 2), _sum(y_true**2)


def relative_rmse(y_true, y_pred) -> float:
    """||y - y_hat|| / ||y|| (Chen et al. 2015, Sec. 4.2).

    Parameters
    ----------
    y_true, y_pred : numpy or dask arrays of shape (n,)

    Returns
    -------
    float
        NaN when ``y_true`` is all zeros.
    """
    sse, norm = compute(*squared_error_sums(y_true, y_pred))
    return float(np.sqrt(sse / norm)) if norm > 0 else float("nan")


def _class_index(values, classes):
    """Position of each value in the sorted ``classes``; ``len(classes)`` where it is none."""
    k = len(classes)
    idx = np.clip(np.searchsorted(classes, values), 0, k - 1)
    return np.where(classes[idx] == values, idx, k)


def _classification_chunk(y, pred, *rest, offset, classes, layout, binary, proba):
    out = layout.empty()
    k = len(classes)
    t, p = _class_index(y, classes), _class_index(pred, classes)
    layout.view(out, "n")[...] = len(y)
    layout.view(out, "confusion")[...] = np.bincount(t * k + p, minlength=(k + 1) * k).reshape(k + 1, k)
    rest = list(rest)
    if binary:
        scores = np.asarray(rest.pop(0), dtype=np.float64)
        finite = np.isfinite(scores) | np.isinf(scores)  # NaN: no place in the order
        layout.view(out, "nan_scores")[...] = np.sum(~finite & (t < k))
        for label, name in ((1, "pos"), (0, "neg")):
            rows = finite & (t == label)
            bins = np.searchsorted(_AUC_EDGES, scores[rows], side="right")
            layout.view(out, name)[...] = np.bincount(bins, minlength=AUC_BINS)
    if proba:
        probs = np.asarray(rest.pop(0))
        known = t < k
        eps = np.finfo(probs.dtype).eps  # scikit-learn's log_loss clips to [eps, 1 - eps]
        p_true = np.clip(probs[np.flatnonzero(known), t[known]], eps, 1 - eps)
        layout.view(out, "log_loss")[...] = -np.sum(np.log(p_true))
        layout.view(out, "n_known")[...] = p_true.size
        layout.view(out, "reliability")[...] = _reliability_counts(probs, t, p, k)
    return out


def _reliability_counts(probs, t, p, k):
    """Per bin of the predicted label's probability: rows, their summed probability, and
    how many of them are right (a label outside the classes never is)."""
    confidence = np.clip(probs[np.arange(len(p)), np.minimum(p, k - 1)], 0.0, 1.0) if len(p) else np.zeros(0)
    bins = np.minimum((confidence * RELIABILITY_BINS).astype(np.intp), RELIABILITY_BINS - 1)
    right = ((t == p) & (t < k)).astype(np.float64)
    return np.stack([np.bincount(bins, weights=w, minlength=RELIABILITY_BINS)
                     for w in (np.ones_like(confidence), confidence, right)])


def classification_metrics(y_true, y_pred, classes, *, scores=None, proba=None) -> dict:
    """Error rate, balanced error, confusion matrix, AUC and log-loss in one pass.

    Parameters
    ----------
    y_true, y_pred : numpy or dask arrays of shape (n,)
        Labels and predicted labels (values of ``classes``; a label outside
        ``classes``, e.g. -1 for a label unseen in training, is an error).
    classes : array of shape (K,)
        The model's sorted ``classes_``: the rows and columns of the confusion matrix.
    scores : array of shape (n,), optional
        Decision values of a binary model (positive: ``classes[1]``): ``auc`` and
        ``auc_error_bound`` (docs/design-notes.md, "rfstream/metrics.py").
    proba : array of shape (n, K), optional
        Class probabilities: ``log_loss`` over the rows whose label is in ``classes``, and
        the ``reliability`` table (:func:`reliability_table`).

    Returns
    -------
    dict
        ``error_rate`` (1 - ``accuracy_score``), ``balanced_error`` (1 -
        ``balanced_accuracy_score``: the labels outside ``classes`` are one more
        class, never predicted), ``confusion_matrix`` (K x K, rows true labels, as
        ``confusion_matrix(y_true, y_pred, labels=classes)``), ``n_other_labels``,
        ``auc`` and ``auc_error_bound`` (None without ``scores`` or without both
        classes), ``log_loss`` and ``reliability`` (None without ``proba``) and ``rows``.

    Raises
    ------
    ValueError
        For ``scores`` with other than two classes.
    """
    classes = np.asarray(classes)
    k = len(classes)
    binary = scores is not None
    if binary and k != 2:
        raise ValueError(f"scores give an AUC for two classes only; got {k} classes.")
    shapes = {"n": (), "confusion": (k + 1, k)}
    if binary:
        shapes.update(nan_scores=(), pos=(AUC_BINS,), neg=(AUC_BINS,))
    if proba is not None:
        shapes.update(log_loss=(), n_known=(), reliability=(3, RELIABILITY_BINS))
    layout = Layout(**shapes)
    others = [a for a in (y_pred, scores, proba) if a is not None]
    vec = compute(sum_rows(_classification_chunk, layout.size, y_true, *others, classes=classes,
                           layout=layout, binary=binary, proba=proba is not None))
    parts = layout.unpack(vec)
    n, conf = int(parts["n"]), parts["confusion"]
    support = conf.sum(axis=1)
    recall = np.append(np.diag(conf), 0.0)[support > 0] / support[support > 0]
    result = {"rows": n, "error_rate": float(1 - np.trace(conf) / n) if n else float("nan"),
              "balanced_error": float(1 - recall.mean()) if recall.size else float("nan"),
              "confusion_matrix": conf[:k].astype(np.int64).tolist(), "n_other_labels": int(support[k]),
              "auc": None, "auc_error_bound": None, "log_loss": None, "reliability": None}
    if binary:
        result.update(_auc(parts["pos"], parts["neg"], int(parts["nan_scores"])))
    if proba is not None and parts["n_known"] > 0:
        result["log_loss"] = float(parts["log_loss"] / parts["n_known"])
    if proba is not None:
        result["reliability"] = reliability_table(parts["reliability"])
    return result


def reliability_table(sums):
    """The reliability table of a classifier's probabilities.

    Parameters
    ----------
    sums : array of shape (3, B)
        Per bin: rows, summed probability of the predicted label, right predictions.

    Returns
    -------
    dict
        ``bins`` ([b / B, (b + 1) / B), the last closed), per bin ``count``,
        ``mean_predicted`` and ``accuracy`` (None for an empty bin), and
        ``calibration_error``, the expected calibration error sum_b (n_b / n)
        |accuracy_b - mean_predicted_b| (Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017).
    """
    count, total, right = np.asarray(sums, dtype=np.float64)
    edges = np.arange(count.size + 1) / count.size  # 0.3, not linspace's 0.30000000000000004
    filled = count > 0
    mean = np.where(filled, total / np.where(filled, count, 1.0), np.nan)
    accuracy = np.where(filled, right / np.where(filled, count, 1.0), np.nan)
    n = count.sum()
    gap = float(np.sum(count[filled] * np.abs(accuracy[filled] - mean[filled])) / n) if n else None

    def listed(values):
        return [None if np.isnan(v) else float(v) for v in values]

    return {"bins": [[float(a), float(b)] for a, b in zip(edges[:-1], edges[1:])],
            "count": count.astype(np.int64).tolist(), "mean_predicted": listed(mean),
            "accuracy": listed(accuracy), "calibration_error": gap}


def _auc(pos, neg, nan_scores):
    """AUC of per-bin counts and its bound (docs/design-notes.md); {} without both classes."""
    n_pos, n_neg = pos.sum(), neg.sum()
    if nan_scores or n_pos == 0 or n_neg == 0:
        return {}
    below = np.cumsum(neg) - neg  # negatives in lower bins
    pairs = n_pos * n_neg
    return {"auc": float(np.sum(pos * (below + 0.5 * neg)) / pairs),
            "auc_error_bound": float(0.5 * np.sum(pos * neg) / pairs)}


def _regression_chunk(y, pred, *bounds, offset):
    y = np.asarray(y, dtype=np.float64)
    err = y - np.asarray(pred, dtype=np.float64)
    out = [len(y), err @ err, np.abs(err).sum(), y @ y]
    if bounds:  # every (row, target) entry: inside [lower, upper], and the width
        lower, upper = (np.asarray(b, dtype=np.float64) for b in bounds)
        out += [np.sum((y >= lower) & (y <= upper)), np.sum(upper - lower), y.size]
    return np.array(out, dtype=np.float64)


def regression_metrics(y_true, y_pred, *, lower=None, upper=None) -> dict:
    """RMSE, relative RMSE, MAE and R^2 in one pass.

    Parameters
    ----------
    y_true, y_pred : numpy or dask arrays of shape (n,) or (n, T)
    lower, upper : arrays shaped as ``y_pred``, optional
        Prediction intervals.

    Returns
    -------
    dict
        ``rows``; ``rmse`` and ``mae`` as scikit-learn's ``root_mean_squared_error`` and
        ``mean_absolute_error``; ``relative_rmse`` = ||y - y_hat|| / ||y|| (Chen et al.
        2015, Sec. 4.2); ``r2`` as ``r2_score`` (a constant y: 1.0 for a perfect fit, else
        0.0).  With intervals, ``interval_coverage`` (the fraction of values inside, bounds
        included) and ``interval_width`` (the mean of ``upper - lower``; None when infinite).
    """
    bounds = () if lower is None else (lower, upper)
    sums = sum_rows(_regression_chunk, 7 if bounds else 4, y_true, y_pred, *bounds)
    column = y_true[:, None] if y_true.ndim == 1 else y_true
    vec, mom = compute(sums, moments(column))
    n, sse, sae, norm = vec[:4]
    _, _, var = unpack_moments(mom)
    total = float(var[0] * n)
    r2 = 1 - sse / total if total > 0 else (1.0 if sse == 0 else 0.0)
    nan = float("nan")
    result = {"rows": int(n), "rmse": float(np.sqrt(sse / n)) if n else nan,
              "relative_rmse": float(np.sqrt(sse / norm)) if norm > 0 else nan,
              "mae": float(sae / n) if n else nan, "r2": float(r2)}
    if bounds:
        covered, width, entries = vec[4:]
        result["interval_coverage"] = float(covered / entries) if entries else nan
        result["interval_width"] = float(width / entries) if entries and np.isfinite(width) else None
    return result


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
    kernel : str, optional
    gamma : float, optional
    n_samples : int, default=1000
    random_state : int, default=0
        The seed of the row sample.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Without ``kernel`` and ``gamma`` when the map does not define them.
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
