"""Metrics as reductions (rfstream.metrics): error rate, relative RMSE, kernel approximation."""
import dask.array as da
import numpy as np
import pytest
import test_tefm
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import Pipeline

from rfstream import TEFM, Standardizer
from rfstream.kernels import kernel_matrix
from rfstream.metrics import (
    error_counts,
    error_rate,
    kernel_approximation_error,
    relative_rmse,
    squared_error_sums,
)
from rfstream.random import check_seed, sample_rows

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
