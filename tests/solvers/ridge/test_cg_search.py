"""A list of alphas searched by CG (:mod:`rfstream.solvers.ridge.cg_search`): every (fold, alpha) system
in the same passes gives the Gram route's cross-validation, its choice and its model."""
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.model_selection import PredefinedSplit

from rfstream import RandomFourierFeatures, StreamingRidge, StreamingRidgeClassifier
from rfstream.solvers.ridge import cg_search

pytestmark = pytest.mark.long_file(45)  # seconds in the suite: started first (tests/conftest.py)

ALPHAS = [0.03, 0.3, 3.0]


def _data(n=2400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n)
    return X, y


def _fit(estimator, Z, y, **fit):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the chosen alpha")  # a choice on the grid's edge
        return estimator.fit(Z, y, **fit)


def test_fold_columns_are_fold_by_fold_then_every_row():
    held_out, alpha_index, target = cg_search.fold_columns(2, 3, 2)
    assert held_out.tolist() == [0] * 6 + [1] * 6 + [-1] * 6
    assert alpha_index.tolist() == [0, 0, 1, 1, 2, 2] * 3
    assert target.tolist() == [0, 1] * 9


@pytest.mark.parametrize("solver, cv", [("cg", 4), ("pcg", "predefined")])
def test_the_search_is_the_gram_routes(solver, cv):
    """Dask features made in the tasks, row weights, an int cv and splits with rows that only
    train: the held-out errors, the choice and the model of the Gram route, to the CG tolerance."""
    X, y = _data()
    if cv == "predefined":
        cv = PredefinedSplit(np.r_[np.tile([0, 1, 2, -1], 600)])
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=y.size)
    fmap = RandomFourierFeatures(200, gamma=0.5, random_state=0).fit(X)
    Z = fmap.transform(da.from_array(X, chunks=600))
    common = dict(alpha=ALPHAS, cv=cv, random_state=3)
    gram = _fit(StreamingRidge(**common, solver="gram"), Z, y, sample_weight=w)
    it = _fit(StreamingRidge(**common, solver=solver, tol=1e-9, max_iter=1000, pcg_rank=100), Z, y,
              sample_weight=w)
    np.testing.assert_allclose(it.cv_mse_, gram.cv_mse_, rtol=1e-5)
    np.testing.assert_allclose(it.cv_results_["fold_scores"], gram.cv_results_["fold_scores"], rtol=1e-5)
    assert it.alpha_ == gram.alpha_ and it.best_score_ == pytest.approx(gram.best_score_, rel=1e-5)
    np.testing.assert_allclose(it.coef_, gram.coef_, atol=1e-4 * np.abs(gram.coef_).max())
    assert it.intercept_ == pytest.approx(gram.intercept_, abs=1e-4)
    # the statistics pass, the shared iterations and the scoring pass
    assert 3 <= it.n_iter_ <= 1002


def test_pcg_passes_are_shared_by_the_alphas():
    """Three alphas and five folds cost about the passes of the slowest system, not 18 solves.

    A fold's system uses the preconditioner of the whole sample: here it needed up to 1.3x
    the whole system's iterations (docs/wide.md)."""
    X, y = _data(seed=2)
    Z = RandomFourierFeatures(200, gamma=0.5, random_state=0).fit(X).transform(X)
    one = [StreamingRidge(alpha=a, solver="pcg", pcg_rank=100).fit(Z, y).n_iter_ for a in ALPHAS]
    search = _fit(StreamingRidge(alpha=ALPHAS, solver="pcg", pcg_rank=100), Z, y)
    assert max(one) < search.n_iter_ <= 1.5 * max(one) < sum(one)


@pytest.mark.parametrize("scoring", ["error_rate", "squared_error"])
def test_a_classifier_scores_by_its_metric(scoring):
    X, y = _data(seed=4)
    labels = np.digitize(y, [-0.5, 0.5])  # three classes: one-vs-rest targets
    Z = RandomFourierFeatures(200, gamma=0.5, random_state=0).fit(X).transform(X)
    common = dict(alpha=ALPHAS, scoring=scoring)
    gram = _fit(StreamingRidgeClassifier(**common, solver="gram"), Z, labels)
    it = _fit(StreamingRidgeClassifier(**common, solver="cg", tol=1e-9, max_iter=1000), Z, labels)
    np.testing.assert_allclose(it.cv_results_["mean_score"], gram.cv_results_["mean_score"], rtol=1e-4)
    assert it.alpha_ == gram.alpha_
    assert hasattr(it, "cv_mse_") == (scoring == "squared_error")
    assert np.mean(it.predict(Z) == gram.predict(Z)) > 0.999


def test_what_the_iterations_cannot_search_is_refused():
    X, y = _data(n=200)
    Z = RandomFourierFeatures(50, gamma=0.5, random_state=0).fit(X).transform(X)
    with pytest.raises(ValueError, match=r"solver='pcg' searches a list of alphas by k-fold.*cv='loo' needs the Gram"):
        StreamingRidge(alpha=ALPHAS, solver="pcg", cv="loo").fit(Z, y)
    grid = RandomFourierFeatures(50, gamma=[0.1, 1.0], random_state=0).fit(X)
    with pytest.raises(ValueError, match="solver='cg' takes a single gamma"):
        StreamingRidge(alpha=1.0, solver="cg").fit(grid.transform(X), y)
