"""What the SGD tests share (tests/solvers/sgd/: test_sgd.py, test_sgd_newton.py): the estimators
as these tests make them, and their small datasets."""
from functools import partial

import numpy as np

import rfstream

#: These tests are about the SGD steps, so they ask for solver="sgd" (the default
#: "auto" runs Newton passes on inputs as narrow as these); Newton's tests name
#: solver="newton", and "auto"'s choice is tested in tests/solvers/test_weights.py.
StreamingSGDClassifier = partial(rfstream.StreamingSGDClassifier, solver="sgd")
StreamingSGDRegressor = partial(rfstream.StreamingSGDRegressor, solver="sgd")


def blobs(n=2000, d=8, n_classes=2, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    scores = X[:, :n_classes] + noise * rng.normal(size=(n, n_classes))
    y = np.argmax(scores, axis=1) if n_classes > 2 else (X[:, 0] - 0.5 * X[:, 1] + noise * rng.normal(size=n) > 0.3)
    return X, y.astype(np.int64)


def objective_of(est, X, y, coef, intercept):
    """The estimator's exact objective evaluated at someone else's weights."""
    saved = est.coef_, est.intercept_
    est.coef_, est.intercept_ = np.asarray(coef, dtype=np.float64).reshape(np.shape(saved[0])), intercept
    try:
        return est.objective(X, y)
    finally:
        est.coef_, est.intercept_ = saved
