"""n_components as a list: every size searched from one Gram pass of the largest map."""
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from rfstream import (
    NystroemFeatures,
    RandomFourierFeatures,
    StreamingRidge,
    StreamingRidgeClassifier,
)

SIZES, ALPHAS = [8, 24, 64], [0.01, 1.0]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 3))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 + 0.1 * rng.normal(size=600)


def fit(fmap, solver, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # choices on a grid's edge
        return make_pipeline(fmap, solver).fit(X, y)


def separate(X, y, solver, key, gammas=(0.5,), variant="cos"):
    """The table column ``key`` of one fit per (gamma, size): the map of each size made
    from the largest map's first draws (``with_components``)."""
    out = []
    for g in gammas:
        largest = RandomFourierFeatures(max(SIZES), gamma=g, variant=variant, random_state=0,
                                        dtype=np.float64).fit(X)
        for n in SIZES:  # the fitted prefix map's features (a Pipeline would redraw the map)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.extend(clone(solver).fit(largest.with_components(n).transform(X), y).cv_results_[key])
    return np.array(out)


@pytest.mark.parametrize("select", ["evidence", "cv"])
def test_every_size_equals_its_own_fit(data, select):
    X, y = data
    solver = StreamingRidge(alpha=ALPHAS, select=select, calibrate=False)
    gammas = [0.25, 1.0]
    model = fit(RandomFourierFeatures(SIZES, gamma=gammas, random_state=0, dtype=np.float64), solver, X, y)
    table = model[-1].cv_results_
    np.testing.assert_allclose(table["mean_score"], separate(X, y, solver, "mean_score", gammas), rtol=1e-7)
    assert list(table["n_components"]) == [n for _ in gammas for n in SIZES for _ in ALPHAS]
    best = int(np.argmax(table["mean_score"]) if select == "evidence" else np.argmin(table["mean_score"]))
    ridge, fmap = model[-1], model[0]
    assert (ridge.n_components_, ridge.gamma_, ridge.alpha_) == (
        table["n_components"][best], table["gamma"][best], table["alpha"][best])
    assert fmap.n_components == ridge.n_components_ == ridge.n_features_in_ and fmap.gamma_ == ridge.gamma_
    prefix = RandomFourierFeatures(max(SIZES), gamma=ridge.gamma_, random_state=0,
                                   dtype=np.float64).fit(X).with_components(ridge.n_components_)
    direct = StreamingRidge(alpha=ridge.alpha_).fit(prefix.transform(X), y)
    np.testing.assert_allclose(model.predict(X[:50]), direct.predict(prefix.transform(X[:50])), rtol=1e-6, atol=1e-8)


def test_classifier_scoring_pass_and_cossin_pairs(data):
    X, y = data
    labels = np.digitize(y, [0.0, 1.0])
    solver = StreamingRidgeClassifier(alpha=ALPHAS, calibrate=False)
    model = fit(RandomFourierFeatures(SIZES, gamma=0.5, variant="cossin", random_state=0, dtype=np.float64),
                solver, X, labels)
    np.testing.assert_allclose(model[-1].cv_results_["mean_score"],
                               separate(X, labels, solver, "mean_score", variant="cossin"), rtol=0, atol=1e-12)


def test_one_gram_pass_for_every_size(data):
    X, y = data
    reads = []

    def read(block):
        reads.append(block.shape[0])
        return block

    rows = da.from_array(X, chunks=150).map_blocks(read, dtype=X.dtype)
    fit(RandomFourierFeatures(SIZES, gamma=0.5, random_state=0), StreamingRidge(alpha=ALPHAS, calibrate=False),
        rows, y)
    assert sum(reads) == X.shape[0]


def test_maps_and_solvers_without_prefixes_refuse_a_list(data):
    X, y = data
    with pytest.raises(ValueError, match=r"n_components=\[8, 16\] needs a map whose features hold"):
        NystroemFeatures([16, 8], random_state=0).fit(X)
    with pytest.raises(ValueError, match="a list of n_components is searched from the Gram"):
        fit(RandomFourierFeatures(SIZES, gamma=0.5), StreamingRidge(alpha=1.0, solver="cg"), X, y)
    with pytest.raises(ValueError, match="n_components item 2"):
        RandomFourierFeatures([8, -1]).fit(X)
