"""The small dataset of the contract suite, shared by the tests that compare with it."""
import numpy as np


def contract_data(n=240, d=5):
    """``(X, y_class, y_reg)``: n rows, d columns; three imbalanced classes that depend on
    products of the inputs, and a regression target."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    t = X[:, 0] * X[:, 1] + 0.5 * X[:, 2]
    y_class = np.where(t > 1.0, 2, np.where(t > -0.3, 1, 0))
    y_reg = X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y_class, y_reg
