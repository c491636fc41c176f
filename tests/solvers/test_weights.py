"""sample_weight and class_weight in every solver, and their routing through a Pipeline.

The oracles: scikit-learn's Ridge / RidgeClassifier with the same weights on the same
feature matrix (the same weighted least squares, rfstream.solvers.ridge.estimators); the data
with rows dropped (weight 0) or repeated (integer weights), which every exact solver
(the ridge Gram pass, CG, Newton) must reproduce; sklearn's LogisticRegression with
C = 1 / (alpha sum(w)) for the weighted logistic objective (docs/sgd.md, "Weights").
"""
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.linear_model import LogisticRegression, Ridge, RidgeClassifier
from sklearn.model_selection import KFold, LeaveOneGroupOut
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import check_class_weight_classifiers

import rfstream.cluster
from rfstream import (
    RandomFourierFeatures,
    Standardizer,
    StreamingRidge,
    StreamingRidgeClassifier,
    StreamingSGDClassifier,
    StreamingSGDRegressor,
)
from rfstream.pipeline import make_model


def _data(n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n)
    labels = np.digitize(y, [-0.5, 0.5])  # three classes
    w = rng.uniform(0.0, 3.0, size=n)
    w[rng.random(n) < 0.1] = 0.0
    return X, y, labels, w


def _features(X, D=40, dtype="float64"):
    return RandomFourierFeatures(D, gamma=0.5, random_state=0, dtype=dtype).fit(X)


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


# ---------------------------------------------------------------- ridge vs sklearn
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("T", [None, 2])
@pytest.mark.parametrize("kind", ["numpy", "dask", "fused", "sparse", "cg", "cg-fused"])
def test_weighted_ridge_equals_sklearn(fit_intercept, T, kind):
    # Ridge(alpha).fit(Z, y, sample_weight=w) minimizes sum_i w_i (y_i - z_i W - b)^2 +
    # alpha ||W||^2 with Z, y centred on their weighted means: rfstream's objective
    # and scale, so the same normal equations in float64 (cond ~ 1e2 here): 1e-8
    # relative (the brief's bar is 1e-5), 1e-7 for CG stopped at tol 1e-12.
    X, y, _, w = _data()
    if T:
        y = np.column_stack([y, X[:, 0] - y])
    fmap = _features(X)
    Z = fmap.transform(X)
    if kind == "sparse":  # a CSR matrix of the same features, a third of them zero
        Z = sp.csr_matrix(np.where(np.abs(Z) > 0.1, Z, 0.0))
    # (sklearn's sparse solvers are iterative at tol 1e-4: its exact dense solve is the reference)
    ref = Ridge(alpha=0.3, fit_intercept=fit_intercept).fit(Z.toarray() if sp.issparse(Z) else Z, y,
                                                            sample_weight=w)
    params = {"alpha": 0.3, "fit_intercept": fit_intercept, "tol": 1e-12, "max_iter": 500}
    fit_args = (Z, y, w)
    if kind in ("dask", "fused", "cg-fused"):
        Xd = da.from_array(X, chunks=(150, -1))
        Zd = fmap.transform(Xd) if "fused" in kind else da.from_array(Z, chunks=(137, -1))
        fit_args = (Zd, da.from_array(y, chunks=(100,) + y.shape[1:]), da.from_array(w, chunks=250))
    est = StreamingRidge(solver="cg" if "cg" in kind else "gram", **params).fit(*fit_args[:2],
                                                                               sample_weight=fit_args[2])
    tol = 1e-7 if "cg" in kind else 1e-8
    assert _rel(est.coef_, ref.coef_) < tol
    if fit_intercept:
        assert _rel(est.intercept_, ref.intercept_) < tol
    assert est.n_samples_seen_ == X.shape[0]  # rows, not the weight sum


@pytest.mark.parametrize("class_weight", [None, "balanced", {0: 3.0, 2: 0.25}])
@pytest.mark.parametrize("solver", ["gram", "cg"])
def test_ridge_classifier_weights_equal_sklearn(class_weight, solver):
    # RidgeClassifier multiplies sample_weight by the class weights of the rows'
    # labels ("balanced" from the unweighted counts), as rfstream does in its pass.
    X, _, labels, w = _data()
    Z = _features(X).transform(X)
    ref = RidgeClassifier(alpha=1.0, class_weight=class_weight).fit(Z, labels, sample_weight=w)
    est = StreamingRidgeClassifier(alpha=1.0, class_weight=class_weight, solver=solver, tol=1e-12,
                                   max_iter=500).fit(da.from_array(Z, chunks=(200, -1)), labels,
                                                     sample_weight=w)
    assert _rel(est.coef_, ref.coef_) < 1e-7 and _rel(est.intercept_, ref.intercept_) < 1e-7
    np.testing.assert_array_equal(est.predict(Z), ref.predict(Z))
    expected = np.ones(3) if class_weight is None else (
        len(labels) / (3 * np.bincount(labels)) if class_weight == "balanced" else [3.0, 1.0, 0.25])
    np.testing.assert_allclose(est.class_weight_, expected)


def test_weighted_cv_equals_brute_force_on_explicit_splits():
    # An alpha list with explicit splits (LeaveOneGroupOut) and weights: the held-out
    # error of each fold is the weighted one, from the fold's weighted partials;
    # refitting sklearn's weighted Ridge on every training set gives the same numbers.
    X, y, _, w = _data(n=450)
    groups = np.arange(450) % 3
    alphas = [0.01, 1.0, 100.0]
    est = StreamingRidge(alpha=alphas, cv=LeaveOneGroupOut().split(X, y, groups)).fit(X, y, sample_weight=w)
    brute = []
    for a in alphas:
        sse = 0.0
        for g in range(3):
            test = groups == g
            model = Ridge(alpha=a).fit(X[~test], y[~test], sample_weight=w[~test])
            sse += w[test] @ (y[test] - model.predict(X[test])) ** 2
        brute.append(sse / w.sum())
    np.testing.assert_allclose(est.cv_mse_, brute, rtol=1e-8)
    # a splitter object, and folds from (seed, row): dask input, same single pass
    kf = StreamingRidge(alpha=alphas, cv=KFold(4)).fit(da.from_array(X, chunks=100), y, sample_weight=w)
    assert kf.cv_mse_.shape == (3,) and kf.alpha_ in alphas
    with pytest.raises(ValueError, match="disjoint test sets"):
        StreamingRidge(alpha=alphas, cv=[(np.arange(10, 450), np.arange(10))] * 2).fit(X, y)


# ------------------------------------------------- zero weights drop rows, integers repeat them
EXACT_SOLVERS = [
    ("ridge", lambda: StreamingRidge(alpha=0.5), "regression"),
    ("ridge-cg", lambda: StreamingRidge(alpha=0.5, solver="cg", tol=1e-13, max_iter=500), "regression"),
    ("ridge-classifier", lambda: StreamingRidgeClassifier(alpha=0.5, class_weight={1: 2.0}), "classification"),
    ("newton-log", lambda: StreamingSGDClassifier("log_loss", alpha=1e-3, solver="newton", tol=1e-12,
                                                  max_iter=50), "classification"),
    ("newton-squared-hinge", lambda: StreamingSGDClassifier("squared_hinge", alpha=1e-3, solver="newton",
                                                            tol=1e-12, max_iter=50), "classification"),
    ("newton-regressor", lambda: StreamingSGDRegressor(alpha=1e-3, solver="newton", tol=1e-12,
                                                       max_iter=10), "regression"),
]


@pytest.mark.parametrize("make, task", [s[1:] for s in EXACT_SOLVERS], ids=[s[0] for s in EXACT_SOLVERS])
@pytest.mark.parametrize("dask_input", [False, True])
def test_integer_weights_repeat_rows_and_zero_weights_drop_them(make, task, dask_input):
    # Every pass of these solvers is a sum over rows, so a row of weight k counts as
    # k copies of it (and weight 0 as none): the same sums in another order, 1e-9
    # (Newton stops at a relative gap of 1e-12: its optimum is as exact).
    X, y, labels, _ = _data(n=300)
    target = y if task == "regression" else labels
    w = np.random.default_rng(3).integers(0, 4, size=300)
    repeated = make().fit(np.repeat(X, w, axis=0), np.repeat(target, w))
    if dask_input:
        est = make().fit(da.from_array(X, chunks=70), da.from_array(target, chunks=70),
                         sample_weight=da.from_array(w, chunks=100))
    else:
        est = make().fit(X, target, sample_weight=w)
    np.testing.assert_allclose(est.coef_, repeated.coef_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(est.intercept_, repeated.intercept_, rtol=1e-9, atol=1e-11)
    kept = w > 0
    dropped = make().fit(X[kept], target[kept], sample_weight=w[kept])
    np.testing.assert_allclose(est.coef_, dropped.coef_, rtol=1e-9, atol=1e-11)


def test_unit_weights_change_nothing():
    # weights of 1 (or any constant, for SGD whose weights are taken over their mean)
    # run the same arithmetic as no weights
    X, y, labels, _ = _data()
    for make, target in [(lambda: StreamingRidge(alpha=1.0), y),
                         (lambda: StreamingSGDClassifier(alpha=1e-3, solver="sgd", max_iter=3), labels),
                         (lambda: StreamingSGDRegressor(alpha=1e-3, solver="sgd", max_iter=3), y)]:
        ref = make().fit(X, target)
        for w in (np.ones(len(y)), 1.0):
            est = make().fit(X, target, sample_weight=w)
            np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-13, atol=1e-15)
    sgd = StreamingSGDClassifier(alpha=1e-3, solver="sgd", max_iter=3)
    ref = sgd.fit(X, labels).coef_
    np.testing.assert_array_equal(sgd.fit(X, labels, sample_weight=np.full(len(y), 7.0)).coef_, ref)


# ---------------------------------------------------------------- SGD and Newton
def test_weighted_logistic_newton_equals_liblinear():
    # f = alpha/2 ||w~||^2 + 1/S sum_i w_i L_i (S = sum w) times 1/alpha is
    # 1/2 ||w~||^2 + C sum_i w_i L_i with C = 1/(alpha S): liblinear's weighted problem.
    X, _, labels, w = _data()
    Z, yb = _features(X).transform(X), labels == 2
    alpha = 1e-3
    est = StreamingSGDClassifier("log_loss", alpha=alpha, solver="newton", tol=1e-12, max_iter=50).fit(
        Z, yb, sample_weight=w)
    ref = LogisticRegression(C=1 / (alpha * w.sum()), solver="liblinear", tol=1e-12, max_iter=10000).fit(
        Z, yb, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-5, atol=1e-6)
    assert est.objective(Z, yb, sample_weight=w) == pytest.approx(est.objective_, rel=1e-12)


def test_sgd_steps_follow_the_weights():
    # the SGD steps weight each row's gradient by w / mean(w): upweighting class 1
    # raises its recall as a class weight does, and in the same measure
    X, _, labels, _ = _data(n=3000)
    yb = (labels == 2).astype(int)
    w = np.where(yb == 1, 5.0, 1.0)
    kw = {"alpha": 1e-3, "solver": "sgd", "max_iter": 5}
    plain = StreamingSGDClassifier(**kw).fit(X, yb)
    weighted = StreamingSGDClassifier(**kw).fit(X, yb, sample_weight=w)
    by_class = StreamingSGDClassifier(class_weight={0: 1.0, 1: 5.0}, **kw).fit(X, yb)
    recall = [np.mean(m.predict(X)[yb == 1] == 1) for m in (plain, weighted, by_class)]
    assert recall[1] > recall[0] + 0.1 and recall[2] > recall[0] + 0.1
    # the two weightings differ only by the mean of w (a scale of alpha): both models
    # predict nearly alike
    assert np.mean(weighted.predict(X) == by_class.predict(X)) > 0.9
    # a held-out error weighted by the sample weights, and partial_fit with weights
    es = StreamingSGDClassifier(alpha=1e-3, solver="sgd", early_stopping=True, max_iter=4).fit(
        X, yb, sample_weight=w)
    assert 0 <= es.validation_score_ < 0.5
    pf = StreamingSGDClassifier(alpha=1e-3).partial_fit(da.from_array(X, chunks=1000), yb, classes=[0, 1],
                                                        sample_weight=da.from_array(w, chunks=500))
    assert pf.solver_ == "sgd" and np.mean(pf.predict(X)[yb == 1] == 1) > recall[0]


def test_class_weight_times_sample_weight():
    # scikit-learn multiplies the two; so does every classifier here: class weights
    # {k: c_k} with sample weights s equal sample weights c_y s without class weights.
    # SGD/Newton divide the loss sum by sum(s) (docs/sgd.md): with the sample weights
    # c_y s the divisor is sum(c_y s), the same problem with alpha times sum(s) / sum(c_y s).
    X, _, labels, w = _data()
    cw = {0: 0.5, 1: 2.0, 2: 1.5}
    both = np.array([cw[k] for k in labels]) * w
    a = StreamingRidgeClassifier(alpha=1.0, class_weight=cw).fit(X, labels, sample_weight=w)
    b = StreamingRidgeClassifier(alpha=1.0).fit(X, labels, sample_weight=both)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10, atol=1e-12)
    kw = {"solver": "newton", "tol": 1e-12, "max_iter": 50}
    a = StreamingSGDClassifier("log_loss", alpha=1e-3, class_weight=cw, **kw).fit(X, labels, sample_weight=w)
    b = StreamingSGDClassifier("log_loss", alpha=1e-3 * w.sum() / both.sum(), **kw).fit(
        X, labels, sample_weight=both)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 20 hinge passes on 50 rows
def test_sgd_classifier_passes_sklearns_class_weight_check():
    # with its defaults (solver="auto": Newton passes on these 2 columns)
    check_class_weight_classifiers("StreamingSGDClassifier", StreamingSGDClassifier())
    X, _, labels, _ = _data(n=50)
    assert StreamingSGDClassifier().fit(X, labels).solver_ == "newton"


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("make", [StreamingRidge, StreamingSGDRegressor, StreamingSGDClassifier,
                                  StreamingRidgeClassifier])
def test_bad_sample_weight(make):
    X, y, labels, w = _data(n=60)
    target = labels if "Classifier" in make.__name__ else y
    cases = [
        (w[:50], r"sample_weight has 50 weights but X has 60 rows; pass one weight per row"),
        (np.ones((60, 2)), r"sample_weight must be 1-D with one weight per row of X; got shape \(60, 2\)"),
        (np.where(np.arange(60) == 7, -1.0, w), r"sample_weight must be finite and >= 0; row 7 has weight -1.0"),
        (np.where(np.arange(60) == 3, np.nan, w), r"row 3 has weight nan"),
        (np.zeros(60), r"every weight is zero"),
    ]
    for bad, match in cases:
        with pytest.raises(ValueError, match=match):
            make().fit(X, target, sample_weight=bad)
    Xd, td = da.from_array(X, chunks=20), da.from_array(target, chunks=20)
    with pytest.raises(ValueError, match="sample_weight has 50 weights but X has 60 rows"):
        make().fit(Xd, td, sample_weight=da.from_array(w[:50], chunks=20))
    # dask weights are checked in the pass, block by block, naming the global row
    with pytest.raises(ValueError, match="row 47 has weight -2.0"):
        make().fit(Xd, td, sample_weight=da.from_array(np.where(np.arange(60) == 47, -2.0, w), chunks=20))


def test_dask_weights_stay_on_the_workers(monkeypatch):
    # the weights are an array aligned with X's row chunks inside the passes: nothing
    # with a row dimension is computed to the client (the ridge fit is one reduction)
    X, y, labels, w = _data(n=400)
    Xd, wd = da.from_array(X, chunks=100), da.from_array(w, chunks=100)
    calls = []  # (reads the weights, largest result size) per compute
    original = rfstream.cluster.compute

    def spy(*collections):
        out = original(*collections)
        reads = any(wd.name in c.__dask_graph__().layers for c in collections if hasattr(c, "dask"))
        calls.append((reads, max(np.size(v) for v in (out if len(collections) > 1 else (out,)))))
        return out

    for module in ("ridge.estimators", "sgd.epochs", "targets", "weights", "sgd.estimators"):
        monkeypatch.setattr(f"rfstream.solvers.{module}.compute", spy)
    StreamingRidge(alpha=1.0).fit(Xd, y, sample_weight=wd)
    assert len(calls) == 1 and calls[0][0]  # one pass, and it reads the weights
    calls.clear()
    StreamingSGDClassifier(alpha=1e-3, solver="sgd", max_iter=2).fit(Xd, labels, sample_weight=wd)
    # the class-finding pass (with the weights' sum and maximum), 2 epochs, 1 evaluation
    assert len(calls) == 4 and all(reads for reads, _ in calls)
    assert max(size for _, size in calls) < 400


# ---------------------------------------------------------------- Pipeline routing
def _pipeline(solver):
    return Pipeline([("standardize", Standardizer()), ("features", _features(np.zeros((1, 5)))),
                     ("solver", solver)])


@pytest.mark.parametrize("solver", [StreamingRidge(alpha=0.5), StreamingSGDRegressor(alpha=1e-3)])
def test_pipeline_routes_sample_weight(solver):
    # (a) metadata routing: the solver requests the weights, the standardizer and the
    # feature map request none; (b) the classic step__param form
    X, y, _, w = _data()
    by_hand = sklearn.clone(solver).fit(_pipeline(None)[:-1].fit_transform(X), y, sample_weight=w)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = _pipeline(sklearn.clone(solver).set_fit_request(sample_weight=True)).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(routed[-1].coef_, by_hand.coef_, rtol=1e-12)
        with pytest.raises(ValueError, match="sample_weight"):  # requested by no step
            _pipeline(sklearn.clone(solver)).fit(X, y, sample_weight=w)
    classic = _pipeline(sklearn.clone(solver)).fit(X, y, solver__sample_weight=w)
    np.testing.assert_allclose(classic[-1].coef_, by_hand.coef_, rtol=1e-12)
    assert not np.allclose(_pipeline(sklearn.clone(solver)).fit(X, y)[-1].coef_, by_hand.coef_)


def test_make_model_pipeline_on_dask_with_weights():
    # the application's Pipeline on dask input: the solver's pass makes the features
    # in its tasks and reads the weights aligned with them
    X, _, labels, w = _data()
    Xd = da.from_array(X, chunks=150)
    model = make_model("classification", feature_params={"n_components": 30, "random_state": 0},
                       solver_params={"alpha": 1.0, "class_weight": "balanced"})
    model.fit(Xd, labels, solver__sample_weight=da.from_array(w, chunks=200))
    ref = make_model("classification", feature_params={"n_components": 30, "random_state": 0},
                     solver_params={"alpha": 1.0, "class_weight": "balanced"}).fit(X, labels,
                                                                                  solver__sample_weight=w)
    # not the same float32 computation, so equal to float32 rounding, on the coefficients' scale:
    # the numpy fit's solver reads the stored float32 features of all 600 rows (a SYRK for Z'Z,
    # a GEMM for Z'[Y 1]), the dask fit's tasks make the features of their 150 rows and take one
    # SYRK of [Z Y 1] (solvers.gram: _stored_fold vs _fused_fold).  Both sum float32 products,
    # in other groupings, so G and Z'CY differ by a few float32 eps of their scale and the
    # solution by that times cond(G + alpha I) ~ 5: measured 3 to 5 eps32 of max|coef| for
    # chunkings of 37 to 600 rows and OpenBLAS's Haswell, SkylakeX and Sandybridge kernels (with
    # float64 features the two agree to 2e-15).  An elementwise rtol is no bound for a small
    # coefficient: 0.006 moved by 3e-7 is 1.2 eps32 of max|coef| ~ 2.1.  Bound: 20 eps32.
    coef = ref[-1].coef_
    np.testing.assert_allclose(model[-1].coef_, coef, rtol=0,
                               atol=20 * np.finfo(np.float32).eps * np.abs(coef).max())
