"""The small datasets of the ridge tests (tests/solvers/ridge/: test_ridge.py, test_ridge_pass.py)."""
import numpy as np


def rel(a, b):
    """Max-norm relative difference ||a - b||_inf / ||b||_inf."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def regression_data(n=600, d=12, T=None, seed=0, offset=0.0, noise=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + offset
    W = rng.normal(size=(d,) if T is None else (d, T))
    y = X @ W + 2.0 + noise * rng.normal(size=(n,) if T is None else (n, T))
    return X, y


def classification_data(n_classes, labels=None, n=500, d=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.argmax(X[:, :n_classes] + 0.8 * rng.normal(size=(n, n_classes)), axis=1)
    if labels is not None:
        y = np.asarray(labels)[y]
    return X, y
