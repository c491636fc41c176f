"""Metrics as reductions (rfstream.metrics): error rate, relative RMSE, kernel approximation."""
import dask.array as da
import numpy as np
import pytest
from helpers import import_test_module
from sklearn import metrics as skm
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import Pipeline

from rfstream import TEFM, Standardizer
from rfstream.kernels import kernel_matrix
from rfstream.metrics import (
    AUC_BINS,
    classification_metrics,
    error_counts,
    error_rate,
    kernel_approximation_error,
    regression_metrics,
    relative_rmse,
    squared_error_sums,
)
from rfstream.random import check_seed, sample_rows

test_tefm = import_test_module("datadriven/test_tefm.py")
X = test_tefm.X  # correlated columns (a fixture), as the TEFM tests use


def test_error_rate_numpy_and_dask():
    y = np.array([0, 1, 1, 2, -1, 0, 2, 1])  # -1: a label unseen in training
    pred = np.array([0, 1, 0, 2, 0, 0, 1, 1])  # 3 wrong, the unseen one included
    assert error_rate(y, pred) == 3 / 8
    assert error_rate(da.from_array(y, chunks=3), da.from_array(pred, chunks=3)) == 3 / 8
    wrong, n = error_counts(da.from_array(y, chunks=3), da.from_array(pred, chunks=3))
    assert isinstance(wrong, da.Array) and n == 8 and wrong.compute() == 3
    assert error_rate(np.zeros(0), np.zeros(0)) == 0.0


def test_relative_rmse_numpy_and_dask():
    rng = np.random.default_rng(0)
    y = rng.normal(size=500).astype(np.float32) + 3
    pred = y + 0.1 * rng.normal(size=500)
    expected = np.linalg.norm(y.astype(np.float64) - pred) / np.linalg.norm(y.astype(np.float64))
    assert relative_rmse(y, pred) == pytest.approx(expected, rel=1e-12)
    assert relative_rmse(da.from_array(y, chunks=64), da.from_array(pred, chunks=64)) == pytest.approx(
        expected, rel=1e-12)
    sse, norm = squared_error_sums(y, pred)
    assert sse.dtype == np.float64 and norm == pytest.approx(np.sum(y.astype(np.float64) ** 2))
    assert np.isnan(relative_rmse(np.zeros(4), np.ones(4)))  # ||y|| = 0: undefined


class _Zeros(TransformerMixin, BaseEstimator):
    """A feature map whose Z Z' is 0: its error is ||K|| / ||K|| = 1 exactly."""

    kernel, gamma_ = "laplacian", 0.7

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return np.zeros((X.shape[0], 3))


def test_kernel_approximation_error_is_the_relative_frobenius_norm(X):
    assert kernel_approximation_error(X, _Zeros(), n_samples=50) == pytest.approx(1.0, rel=1e-15)
    tefm = TEFM(20, gamma=0.3, random_state=0).fit(X)
    rows = sample_rows(X, 300, check_seed(4))  # the rows the metric samples
    K = kernel_matrix(rows, rows, "gaussian", 0.3)
    Z = tefm.transform(rows).astype(np.float64)
    expected = np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K)
    assert kernel_approximation_error(X, tefm, n_samples=300, random_state=4) == pytest.approx(expected, rel=1e-12)


def test_kernel_approximation_error_numpy_and_dask(X):
    tefm = TEFM(20, method="srht", gamma=0.3, random_state=0).fit(X)
    e_np = kernel_approximation_error(X, tefm, n_samples=300, random_state=1)
    e_da = kernel_approximation_error(da.from_array(X, chunks=400), tefm, n_samples=300,
                                      random_state=1)
    assert e_np == pytest.approx(e_da, rel=1e-6) and 0 < e_np < 1
    # any transformer: a Pipeline has no kernel/gamma_, so pass them; the error is that
    # of its features on the sampled rows (was: > 0, which only a perfect map fails)
    pipe = Pipeline([("std", Standardizer()), ("tefm", TEFM(20, gamma=0.3, random_state=0))]).fit(X)
    rows = sample_rows(X, 300, check_seed(0))
    K = kernel_matrix(rows, rows, "gaussian", 0.3)
    Z = pipe.transform(rows).astype(np.float64)
    assert kernel_approximation_error(X, pipe, kernel="gaussian", gamma=0.3, n_samples=300) == pytest.approx(
        np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K), rel=1e-12)
    with pytest.raises(ValueError, match="needs kernel= and gamma="):
        kernel_approximation_error(X, pipe)


# ------------------------------------------------------------------ evaluation in one pass


def _binary(n=3000, seed=0):
    """Labels in {3, 7}, noisy decision values (positive: 7) and the logistic probabilities."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.3, 7, 3)
    scores = (y == 7) * 1.2 - 0.6 + rng.normal(scale=0.8, size=n)
    pred = np.where(scores > 0, 7, 3)
    p1 = 1 / (1 + np.exp(-2 * scores))
    return y, pred, scores, np.column_stack([1 - p1, p1])


def _chunked(*arrays, chunks=700):
    return [da.from_array(a, chunks=(chunks,) + a.shape[1:]) for a in arrays]


@pytest.mark.parametrize("lazy", [False, True])
def test_binary_metrics_equal_scikit_learns(lazy):
    y, pred, scores, proba = _binary()
    args = _chunked(y, pred, scores, proba) if lazy else (y, pred, scores, proba)
    m = classification_metrics(args[0], args[1], np.array([3, 7]), scores=args[2], proba=args[3])
    assert m["rows"] == 3000 and m["n_other_labels"] == 0
    # counts: exact
    assert m["error_rate"] == pytest.approx(1 - skm.accuracy_score(y, pred), abs=1e-15)
    assert m["balanced_error"] == pytest.approx(1 - skm.balanced_accuracy_score(y, pred), abs=1e-15)
    assert m["confusion_matrix"] == skm.confusion_matrix(y, pred, labels=[3, 7]).tolist()
    # sums of 3000 float64 logs in another order: equal to rounding
    assert m["log_loss"] == pytest.approx(skm.log_loss(y, proba, labels=[3, 7]), rel=1e-12)
    # the AUC is exact up to the bound the pass reports (pairs sharing a bin count 1/2)
    exact = skm.roc_auc_score(y, scores)
    assert abs(m["auc"] - exact) <= m["auc_error_bound"] + 1e-15
    # 3000 scores of spread ~1 over 65,536 bins about 5e-5 wide near 0: few pairs share one
    assert m["auc_error_bound"] < 1e-4


def test_auc_is_exact_when_every_shared_bin_holds_ties():
    # scores on a grid coarser than the bins (and ties across classes at 0): every pair in one
    # bin is a tie, whose share is exactly 1/2
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 5000)
    scores = np.round(y * 0.5 + rng.normal(size=5000), 1)  # ties everywhere
    m = classification_metrics(y, (scores > 0).astype(int), np.array([0, 1]), scores=scores)
    assert m["auc"] == pytest.approx(skm.roc_auc_score(y, scores), abs=1e-13)
    # per-bin ties are exact; the bound counts them anyway, conservatively
    assert abs(m["auc"] - skm.roc_auc_score(y, scores)) <= m["auc_error_bound"]


def test_auc_histogram_orders_every_float():
    from rfstream.metrics import _AUC_EDGES as edges

    assert edges.size == AUC_BINS - 1 and np.all(np.diff(edges) > 0)  # bins ordered as their scores
    assert np.isfinite(edges).all() and edges[-1] == 2.0**1023
    # extreme scores, infinities included (scikit-learn refuses them): the AUC of every
    # positive-negative pair, counted one by one
    y = np.array([0, 1, 0, 1, 1, 0])
    scores = np.array([-np.inf, 1e300, -1e-300, 1e-300, np.inf, 5e7])
    pos, neg = scores[y == 1], scores[y == 0]
    pairs = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    m = classification_metrics(y, y, np.array([0, 1]), scores=scores)
    assert m["auc"] == pairs.mean() == 8 / 9
    assert m["auc_error_bound"] == 0.0  # no bin holds a positive and a negative


def test_multiclass_metrics_and_labels_unseen_in_training():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, 2000)
    proba = rng.dirichlet(np.ones(4), size=2000)
    proba[np.arange(2000), y] += 1.5  # informative
    proba /= proba.sum(axis=1, keepdims=True)
    pred = proba.argmax(axis=1)
    m = classification_metrics(*_chunked(y, pred), np.arange(4), proba=_chunked(proba)[0])
    assert m["auc"] is None and m["auc_error_bound"] is None  # AUC: two classes only
    assert m["confusion_matrix"] == skm.confusion_matrix(y, pred).tolist()
    assert m["balanced_error"] == pytest.approx(1 - skm.balanced_accuracy_score(y, pred), abs=1e-15)
    assert m["log_loss"] == pytest.approx(skm.log_loss(y, proba), rel=1e-12)
    # -1: a label the model never saw (convert --like); an error, and in the balanced error
    # a class of its own with recall 0, as scikit-learn counts it
    y_unseen = np.where(np.arange(2000) % 10 == 0, -1, y)
    m = classification_metrics(y_unseen, pred, np.arange(4), proba=proba)
    assert m["n_other_labels"] == 200
    assert m["error_rate"] == pytest.approx(1 - skm.accuracy_score(y_unseen, pred), abs=1e-15)
    assert m["balanced_error"] == pytest.approx(1 - skm.balanced_accuracy_score(y_unseen, pred), abs=1e-15)
    assert m["confusion_matrix"] == skm.confusion_matrix(y_unseen, pred, labels=np.arange(4)).tolist()
    known = y_unseen >= 0  # log-loss over the rows whose label has a probability
    assert m["log_loss"] == pytest.approx(skm.log_loss(y[known], proba[known]), rel=1e-12)


def test_string_classes():
    y = np.array(["b", "a", "c", "b", "zzz"])
    pred = np.array(["b", "b", "c", "a", "a"])
    m = classification_metrics(y, pred, np.array(["a", "b", "c"]))
    assert m["confusion_matrix"] == skm.confusion_matrix(y, pred, labels=["a", "b", "c"]).tolist()
    assert m["error_rate"] == pytest.approx(3 / 5) and m["n_other_labels"] == 1


def test_one_pass_reads_every_block_once():
    # labels, decision values and probabilities from the same lazy decision values: the
    # evaluation computes each block of them once (one pass), whatever it derives
    y, _, scores, _ = _binary(n=2800)
    seen = []

    def decision(block, block_info=None):
        seen.append(block_info[0]["chunk-location"][0])
        return block

    s = da.from_array(scores, chunks=700).map_blocks(decision, dtype=float)
    pred = da.where(s > 0, 7, 3)
    p1 = 1 / (1 + da.exp(-2 * s))
    proba = da.stack([1 - p1, p1], axis=1)
    classification_metrics(da.from_array(y, chunks=700), pred, np.array([3, 7]), scores=s, proba=proba)
    assert sorted(seen) == [0, 1, 2, 3]


@pytest.mark.parametrize("lazy", [False, True])
def test_regression_metrics_equal_scikit_learns(lazy):
    rng = np.random.default_rng(3)
    y = (rng.normal(size=4000) * 2 + 1e4).astype(np.float32)  # a large mean: R^2 needs centred sums
    pred = y + rng.normal(scale=0.7, size=4000)
    args = _chunked(y, pred, chunks=900) if lazy else (y, pred)
    m = regression_metrics(*args)
    y64 = y.astype(np.float64)
    assert m["rows"] == 4000
    assert m["rmse"] == pytest.approx(skm.root_mean_squared_error(y64, pred), rel=1e-12)
    assert m["mae"] == pytest.approx(skm.mean_absolute_error(y64, pred), rel=1e-12)
    assert m["r2"] == pytest.approx(skm.r2_score(y64, pred), rel=1e-10)
    assert m["relative_rmse"] == pytest.approx(relative_rmse(y, pred), rel=1e-12)


def test_r2_of_a_constant_target_as_scikit_learn():
    y = np.full(10, 3.0)
    assert regression_metrics(y, y)["r2"] == skm.r2_score(y, y) == 1.0
    assert regression_metrics(y, y + 1)["r2"] == skm.r2_score(y, y + 1) == 0.0
