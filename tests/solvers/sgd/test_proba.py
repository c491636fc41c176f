"""predict_proba / predict_log_proba of log-loss models (rfstream.solvers.sgd.losses).

The oracle is scikit-learn's LogisticRegression on the same features with the same
regularization.  StreamingSGDClassifier(loss="log_loss") minimizes
f = alpha/2 (||w||^2 + (b/s)^2) + 1/S sum_i s_i log(1 + exp(-y_i (w z_i + b)))
(S = sum of the sample weights, n without); f / alpha is liblinear's objective
1/2 ||[w, b/s]||^2 + C sum_i s_i L_i with C = 1 / (alpha S) and the same
intercept_scaling s (docs/sgd.md).  solver="newton" reaches that optimum to a
relative gap of 1e-12, so the probabilities agree to ~1e-7 (atol 1e-6 below).
"""
import dask.array as da
import numpy as np
import pytest
from scipy.special import expit, softmax
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.multiclass import OneVsRestClassifier

from rfstream import (
    RandomFourierFeatures,
    StreamingRidgeClassifier,
    StreamingSGDClassifier,
)
from rfstream.pipeline import make_model

ALPHA = 1e-3
NEWTON = {"solver": "newton", "tol": 1e-12, "max_iter": 60}


def _data(n=800, d=4, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    score = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    Z = RandomFourierFeatures(60, gamma=0.5, random_state=1, dtype="float64").fit(X).transform(X)
    return X, Z, y


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("intercept_scaling", [1.0, 3.0])
def test_binary_probabilities_equal_logistic_regression(weighted, intercept_scaling):
    _, Z, y = _data()
    w = np.random.default_rng(5).uniform(0, 2, size=len(y)) if weighted else None
    S = len(y) if w is None else w.sum()
    est = StreamingSGDClassifier("log_loss", alpha=ALPHA, intercept_scaling=intercept_scaling,
                                 **NEWTON).fit(Z, y, sample_weight=w)
    ref = LogisticRegression(C=1 / (ALPHA * S), solver="liblinear", intercept_scaling=intercept_scaling,
                             tol=1e-12, max_iter=10000).fit(Z, y, sample_weight=w)
    proba = est.predict_proba(Z)
    assert proba.shape == (len(y), 2) and isinstance(proba, np.ndarray)
    np.testing.assert_allclose(proba, ref.predict_proba(Z), atol=1e-6)
    np.testing.assert_allclose(proba[:, 1], expit(est.decision_function(Z)), rtol=1e-14)
    np.testing.assert_allclose(est.predict_log_proba(Z), ref.predict_log_proba(Z), atol=1e-5)
    np.testing.assert_array_equal(est.predict(Z), est.classes_[np.argmax(proba, axis=1)])


def test_one_vs_rest_probabilities_equal_normalized_logistic_regressions():
    # OvR: K binary problems, each liblinear's; the probabilities are the K sigmoids
    # normalized to sum to one, as OneVsRestClassifier (and SGDClassifier) report them
    _, Z, y = _data(n_classes=3)
    labels = np.array(["lo", "mid", "hi"])[y]
    est = StreamingSGDClassifier("log_loss", alpha=ALPHA, **NEWTON).fit(Z, labels)
    ref = OneVsRestClassifier(LogisticRegression(C=1 / (ALPHA * len(y)), solver="liblinear", tol=1e-12,
                                                 max_iter=10000)).fit(Z, labels)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    proba = est.predict_proba(Z)
    np.testing.assert_allclose(proba, ref.predict_proba(Z), atol=1e-6)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-14)


def test_multinomial_probabilities_are_the_softmax_and_near_logistic_regression():
    # softmax of the class scores exactly; the SGD optimum within 1% of the objective
    # (test_sgd.py) gives probabilities within a few hundredths of LogisticRegression's
    # (multinomial, no intercept: the same objective, C = 1 / (alpha n))
    _, Z, y = _data(n=3000, n_classes=3)
    est = StreamingSGDClassifier("log_loss", alpha=ALPHA, multi_class="multinomial", fit_intercept=False,
                                 max_iter=15, tol=None).fit(Z, y)
    assert est.solver_ == "sgd"
    np.testing.assert_allclose(est.predict_proba(Z), softmax(est.decision_function(Z), axis=1), rtol=1e-12)
    ref = LogisticRegression(C=1 / (ALPHA * len(y)), fit_intercept=False, tol=1e-10, max_iter=1000).fit(Z, y)
    assert np.max(np.abs(est.predict_proba(Z) - ref.predict_proba(Z))) < 0.05
    np.testing.assert_allclose(np.exp(est.predict_log_proba(Z)), est.predict_proba(Z), rtol=1e-12)


@pytest.mark.parametrize("n_classes, multi_class", [(2, "ovr"), (3, "ovr"), (3, "multinomial")])
def test_dask_in_lazy_dask_out_with_the_features_made_in_the_tasks(n_classes, multi_class):
    X, _, y = _data(n_classes=n_classes)
    rff = RandomFourierFeatures(60, gamma=0.5, random_state=1).fit(X)
    est = StreamingSGDClassifier("log_loss", alpha=ALPHA, multi_class=multi_class, solver="sgd",
                                 max_iter=3).fit(rff.transform(X), y)
    Xd = da.from_array(X, chunks=(300, -1))
    Zd = rff.transform(Xd)  # the features are made inside the prediction's tasks
    for method in ("predict_proba", "predict_log_proba"):
        lazy = getattr(est, method)(Zd)
        assert isinstance(lazy, da.Array)
        assert lazy.chunks == (Xd.chunks[0], (n_classes,)) and lazy.dtype == np.float64
        assert lazy.name == getattr(est, method)(Zd).name  # deterministic graph name
        assert Zd.name not in lazy.__dask_graph__().layers  # fused: Z's blocks never made
        # float32 features made in another batch shape: ~1 ulp of float32 apart
        np.testing.assert_allclose(lazy.compute(), getattr(est, method)(rff.transform(X)), rtol=1e-5,
                                   atol=1e-6)


def test_log_proba_is_finite_where_the_probability_underflows():
    _, Z, y = _data()
    est = StreamingSGDClassifier("log_loss", alpha=ALPHA, **NEWTON).fit(Z, y)
    est.coef_ = est.coef_ * 1e4  # scores of |p| ~ 1e4: exp(-p) underflows
    log_p = est.predict_log_proba(Z)
    assert np.all(np.isfinite(log_p))
    np.testing.assert_allclose(np.logaddexp(log_p[:, 0], log_p[:, 1]), 0.0, atol=1e-12)


def test_no_proba_without_the_log_loss():
    # as scikit-learn: predict_proba does not exist for the hinge losses or ridge
    _, Z, y = _data()
    for est in (StreamingSGDClassifier("hinge", solver="sgd", max_iter=2).fit(Z, y),
                StreamingSGDClassifier("squared_hinge", solver="sgd", max_iter=2).fit(Z, y),
                StreamingRidgeClassifier().fit(Z, y)):
        assert not hasattr(est, "predict_proba") and not hasattr(est, "predict_log_proba")
        with pytest.raises(AttributeError, match="predict_proba"):
            est.predict_proba(Z)
        assert est.decision_function(Z).shape == (len(y),)
    assert hasattr(StreamingSGDClassifier("log_loss"), "predict_proba")
    pipe = make_model("classification", solver="sgd", solver_params={"loss": "hinge"})
    assert not hasattr(pipe, "predict_proba")


def test_cross_val_score_neg_log_loss_is_finite():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(600, 4))
    y = np.argmax(X[:, :3] + 0.5 * rng.normal(size=(600, 3)), axis=1)
    for solver in ("sgd", "auto"):  # auto: Newton passes on these 50 features
        model = make_model("classification", solver="sgd",
                           feature_params={"n_components": 50, "random_state": 0},
                           solver_params={"loss": "log_loss", "alpha": 1e-3, "max_iter": 5, "solver": solver})
        scores = cross_val_score(model, X, y, cv=3, scoring="neg_log_loss")
        assert np.all(np.isfinite(scores)) and np.all(scores < 0)
        # below the log loss of uniform guesses, log 3 = 1.10 (measured: 0.84-0.89;
        # LogisticRegression on X itself: 0.51, the 50 Gaussian features lose some)
        assert -scores.mean() < 0.95
