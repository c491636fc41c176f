"""StreamingRidge / StreamingRidgeClassifier: the mathematics of the one-pass solver.

The oracle is scikit-learn's Ridge (same objective, same alpha scale): the single
Gram reduction must reproduce it.  Cross-validation over an alpha list is checked
against a brute-force K-fold on the same folds, and the pass itself against its
graph: one reduction with the feature map fused into it.  The contract every solver
keeps (numpy/dask, chunkings, determinism, processes, save/load, check_estimator,
bad input) is tested in test_contract_solvers.py.
"""
import collections

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.linear_model import Ridge, RidgeClassifier

import rfstream.solvers.ridge as ridge_module
import rfstream.solvers.targets as targets_module
from rfstream import (
    RandomFourierFeatures,
    Standardizer,
    StreamingRidge,
    StreamingRidgeClassifier,
)
from rfstream.features import ArcCosineFeatures, feature_source
from rfstream.random import STREAM_FOLDS, row_integers


def _rel(a, b):
    """Max-norm relative difference ||a - b||_inf / ||b||_inf."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def _regression(n=600, d=12, T=None, seed=0, offset=0.0, noise=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + offset
    W = rng.normal(size=(d,) if T is None else (d, T))
    y = X @ W + 2.0 + noise * rng.normal(size=(n,) if T is None else (n, T))
    return X, y


# ------------------------------------------------------------------ vs sklearn Ridge
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("T", [None, 3])
@pytest.mark.parametrize("alpha", [0.1, 10.0])
def test_ridge_equals_sklearn_float64(fit_intercept, T, alpha):
    # Both solve the same normal equations (G + alpha I) W = C in float64 with
    # Cholesky on a well-conditioned problem (cond(G) ~ 10), so they agree to a
    # few ulps times the condition number: 1e-8 leaves a margin of ~1e5.  The
    # offset of 1 makes the intercept/centring path matter.
    X, y = _regression(T=T, offset=1.0)
    ref = Ridge(alpha=alpha, fit_intercept=fit_intercept).fit(X, y)
    est = StreamingRidge(alpha=alpha, fit_intercept=fit_intercept).fit(X, y)
    assert est.coef_.shape == ref.coef_.shape
    assert _rel(est.coef_, ref.coef_) < 1e-8
    if fit_intercept:
        assert np.shape(est.intercept_) == np.shape(ref.intercept_)
        assert _rel(est.intercept_, ref.intercept_) < 1e-8
    else:
        # (sklearn stores a scalar 0.0 here even for 2-D y; rfstream one 0 per target)
        assert np.all(np.asarray(est.intercept_) == 0.0)
    assert _rel(est.predict(X), ref.predict(X)) < 1e-8
    assert est.alpha_ == alpha
    assert est.n_samples_seen_ == X.shape[0]


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("T", [None, 2])
def test_ridge_float32_close_to_float64_solution(fit_intercept, T):
    # float32 X: the Gram is a float32 SYRK over sub-blocks of <= 8192 rows added
    # in float64, so each Gram entry carries a relative rounding of about
    # sqrt(8192) * 6e-8 ~ 5e-6 (random walk of float32 roundings); on a problem
    # with cond ~ 10 that gives coefficients within ~1e-5 of the exact float64
    # solution on the same (float32-rounded) data.  Data are RFF-like (|mean| <
    # 1); a large column mean would be cancelled in float64 after the float32
    # accumulation and cost precision in the intercept.
    X, y = _regression(n=5000, d=10, T=T, offset=0.3)
    X32 = X.astype(np.float32)
    ref = Ridge(alpha=1.0, fit_intercept=fit_intercept).fit(X32.astype(np.float64), y)
    est = StreamingRidge(alpha=1.0, fit_intercept=fit_intercept).fit(X32, y)
    assert _rel(est.coef_, ref.coef_) < 1e-5
    assert _rel(est.predict(X32), ref.predict(X32.astype(np.float64))) < 1e-5
    assert est.predict(X32).dtype == np.float64  # scores are reported in float64


# ------------------------------------------------------------ vs sklearn RidgeClassifier
def _classification(n_classes, labels=None, n=500, d=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.argmax(X[:, :n_classes] + 0.8 * rng.normal(size=(n, n_classes)), axis=1)
    if labels is not None:
        y = np.asarray(labels)[y]
    return X, y


@pytest.mark.parametrize(
    "n_classes,labels",
    [(2, None), (2, ["no", "yes"]), (3, None), (4, ["cat", "dog", "emu", "yak"])],
)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_classifier_equals_sklearn(n_classes, labels, fit_intercept):
    # Same +-1 one-vs-rest targets (one column for two classes) and the same
    # ridge solve in float64: 1e-8 relative as for the regressor; the predicted
    # labels must then be identical (no row sits within 1e-8 of a tie).
    X, y = _classification(n_classes, labels)
    ref = RidgeClassifier(alpha=2.0, fit_intercept=fit_intercept).fit(X, y)
    est = StreamingRidgeClassifier(alpha=2.0, fit_intercept=fit_intercept).fit(X, y)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    # linear-classifier convention (LogisticRegression, RidgeClassifier's docs):
    # coef_ is (1, d) for two classes (sklearn 1.9's RidgeClassifier ravels it)
    assert est.coef_.shape == (1 if n_classes == 2 else n_classes, X.shape[1])
    assert _rel(est.coef_, np.atleast_2d(ref.coef_)) < 1e-8
    if fit_intercept:
        assert _rel(est.intercept_, ref.intercept_) < 1e-8
    assert _rel(est.decision_function(X), ref.decision_function(X)) < 1e-8
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    assert est.predict(X).dtype == ref.classes_.dtype
    # a ridge classifier on this separable-ish problem must beat chance clearly
    assert np.mean(est.predict(X) == y) > 1.0 / n_classes + 0.2


# ------------------------------------------------------------------- numpy vs dask
N_DASK = 1000
CHUNKINGS = [
    ((100,) * 10,),  # regular
    ((333, 333, 333, 1),),  # uneven, a one-row tail
    ((1, 250, 49, 400, 300),),  # uneven
    ((0, 600, 0, 400),),  # empty blocks
    ((N_DASK,),),  # one chunk
]


@pytest.mark.parametrize("chunks", CHUNKINGS, ids=lambda c: f"{len(c[0])}chunks")
def test_regressor_dask_equals_numpy(chunks):
    # The same float64 sums in a different order: the partials differ by
    # ~n * eps ~ 1e-13 relative; 1e-10 leaves room for the condition number.
    X, y = _regression(n=N_DASK, T=2, offset=0.5)
    ref = StreamingRidge(alpha=0.5).fit(X, y)
    Xd = da.from_array(X, chunks=chunks + ((X.shape[1],),))
    yd = da.from_array(y, chunks=(chunks[0], (2,)))
    est = StreamingRidge(alpha=0.5).fit(Xd, yd)
    assert _rel(est.coef_, ref.coef_) < 1e-10
    assert _rel(est.intercept_, ref.intercept_) < 1e-10
    assert est.n_features_in_ == X.shape[1] and est.n_samples_seen_ == N_DASK

    pred = est.predict(Xd)
    assert isinstance(pred, da.Array)  # lazy
    assert pred.chunks == (chunks[0], (2,))  # one output block per row block
    assert pred.dtype == np.float64
    computed = pred.compute()
    assert computed.shape == pred.shape
    assert _rel(computed, ref.predict(X)) < 1e-10


@pytest.mark.parametrize("chunks", CHUNKINGS, ids=lambda c: f"{len(c[0])}chunks")
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_dask_equals_numpy(chunks, n_classes):
    # numpy y with a dask X (converted to X's row chunks) and a dask y chunked
    # differently from X (re-aligned inside the reduction) must both match the
    # numpy fit to float64 summation-order tolerance.
    X, y = _classification(n_classes, ["a", "b", "c"][:n_classes], n=N_DASK)
    ref = StreamingRidgeClassifier(alpha=1.0).fit(X, y)
    Xd = da.from_array(X, chunks=chunks + ((X.shape[1],),))
    for y_in in (y, da.from_array(y, chunks=250)):
        est = StreamingRidgeClassifier(alpha=1.0).fit(Xd, y_in)
        np.testing.assert_array_equal(est.classes_, ref.classes_)
        assert _rel(est.coef_, ref.coef_) < 1e-10
        assert _rel(est.intercept_, ref.intercept_) < 1e-10

    scores = est.decision_function(Xd)
    labels = est.predict(Xd)
    assert isinstance(scores, da.Array) and isinstance(labels, da.Array)
    expected_chunks = (chunks[0],) if n_classes == 2 else (chunks[0], (n_classes,))
    assert scores.chunks == expected_chunks
    assert labels.chunks == (chunks[0],)
    assert labels.dtype == ref.classes_.dtype
    assert _rel(scores.compute(), ref.decision_function(X)) < 1e-10
    np.testing.assert_array_equal(labels.compute(), ref.predict(X))


# ---------------------------------------------------------------- alpha path and CV
ALPHAS = [0.0, 0.01, 0.3, 3.0, 30.0, 300.0]


def _brute_force_cv_mse(X, y, alphas, seed, K, fit_intercept):
    """K-fold held-out MSE by refitting sklearn Ridge on each fold's complement.

    Folds come from the same per-row stream as the solver, so the two compute
    the same quantity: sum over folds and targets of held-out squared errors,
    divided by the number of rows.
    """
    folds = row_integers(seed, STREAM_FOLDS, 0, X.shape[0], K)
    out = []
    for a in alphas:
        sse = 0.0
        for k in range(K):
            test = folds == k
            model = Ridge(alpha=a, fit_intercept=fit_intercept, solver="cholesky")
            model.fit(X[~test], y[~test])
            sse += np.sum((y[test] - model.predict(X[test])) ** 2)
        out.append(sse / X.shape[0])
    return np.array(out)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("T", [None, 2])
def test_cv_mse_equals_brute_force_kfold(fit_intercept, T):
    # The path solves each fold from Gram partials (eigh of the centred
    # training Gram) and scores it by expanding ||y - Zw||^2 from the fold's own
    # partials; a cancellation of relative size ~1/(1 - R^2) ~ 10 over
    # float64 sums keeps it within ~1e-12 of refitting; 1e-6 is the brief's bar
    # and catches any wrong fold, centring or normalisation (all O(1) errors).
    X, y = _regression(n=900, d=10, T=T, offset=0.5, noise=1.0)
    seed, K = 7, 4
    est = StreamingRidge(alpha=ALPHAS, cv=K, fit_intercept=fit_intercept, random_state=seed).fit(X, y)
    brute = _brute_force_cv_mse(X, y, ALPHAS, seed, K, fit_intercept)
    np.testing.assert_allclose(est.cv_mse_, brute, rtol=1e-6)
    np.testing.assert_array_equal(est.alphas_, ALPHAS)
    assert est.alpha_ == ALPHAS[int(np.argmin(brute))]
    # the final model is refitted on all rows with the chosen alpha
    ref = Ridge(alpha=est.alpha_, fit_intercept=fit_intercept).fit(X, y)
    assert _rel(est.coef_, ref.coef_) < 1e-8


def test_cv_path_independent_of_chunking():
    # Folds depend only on (seed, global row), and 5000 rows span two virtual
    # blocks of 4096: chunks of 333 and 1000 straddle that boundary at
    # different places.  Same sums in another order -> 1e-10 relative.
    X, y = _regression(n=5000, d=8, offset=0.2, noise=2.0, seed=4)
    ref = StreamingRidge(alpha=ALPHAS, random_state=11).fit(X, y)
    for rows in (333, 1000):
        est = StreamingRidge(alpha=ALPHAS, random_state=11).fit(
            da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        )
        assert est.alpha_ == ref.alpha_
        np.testing.assert_allclose(est.cv_mse_, ref.cv_mse_, rtol=1e-10)
        assert _rel(est.coef_, ref.coef_) < 1e-10
    brute = _brute_force_cv_mse(X, y, ALPHAS, 11, 5, True)
    np.testing.assert_allclose(ref.cv_mse_, brute, rtol=1e-6)


def test_cv_depends_on_seed():
    # Another seed gives other folds and so (slightly) other held-out errors.
    X, y = _regression(n=400, noise=2.0)
    a = StreamingRidge(alpha=ALPHAS, random_state=0).fit(X, y)
    b = StreamingRidge(alpha=ALPHAS, random_state=1).fit(X, y)
    assert not np.allclose(a.cv_mse_, b.cv_mse_, rtol=1e-6)


def test_classifier_cv_independent_of_chunking():
    X, y = _classification(3, ["x", "y", "z"], n=3000)
    ref = StreamingRidgeClassifier(alpha=ALPHAS[1:], random_state=5).fit(X, y)
    est = StreamingRidgeClassifier(alpha=ALPHAS[1:], random_state=5).fit(
        da.from_array(X, chunks=(333, -1)), da.from_array(y, chunks=1000)
    )
    assert est.alpha_ == ref.alpha_
    np.testing.assert_allclose(est.cv_mse_, ref.cv_mse_, rtol=1e-10)


PATH = [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3, 1e4]


def test_path_prefers_heavy_regularization_on_noise():
    # 40 rows, 30 features, y pure noise: any fitted direction is overfit, so
    # the held-out error falls monotonically with alpha -> the largest alphas.
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(40, 30)), rng.normal(size=40)
    est = StreamingRidge(alpha=PATH, random_state=0).fit(X, y)
    assert est.alpha_ >= 1e3
    assert est.cv_mse_[-1] < est.cv_mse_[0]  # the tiny alpha is far worse
    # the fit shrinks to (almost) the mean: ||w|| tiny relative to the least-squares fit
    assert np.linalg.norm(est.coef_) < 0.1 * np.linalg.norm(StreamingRidge(alpha=1e-3).fit(X, y).coef_)


def test_path_prefers_small_alpha_on_clean_signal():
    # 2000 rows, 5 features, noise std 0.01: bias from shrinkage dominates, so
    # the smallest alphas win and the held-out MSE is near the noise variance.
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 5))
    y = X @ np.array([3.0, -2.0, 1.0, 0.5, 4.0]) + 0.01 * rng.normal(size=2000)
    est = StreamingRidge(alpha=PATH, random_state=0).fit(X, y)
    assert est.alpha_ <= 0.1
    assert est.cv_mse_.min() < 2 * 0.01**2  # ~ noise variance (1e-4)
    assert est.cv_mse_[-1] > 100 * est.cv_mse_.min()  # alpha=1e4 shrinks a lot


# --------------------------------------------------------------- the graph: one fused pass
def _capture_reduction(monkeypatch):
    captured = []
    original = ridge_module.compute

    def spy(*collections):
        captured.extend(collections)
        return original(*collections)

    monkeypatch.setattr(ridge_module, "compute", spy)
    monkeypatch.setattr(targets_module, "compute", spy)  # the classes' da.unique
    return captured


def _key_names(collection):
    (opt,) = dask.optimize(collection)
    return [k[0] if isinstance(k, tuple) else k for k in dict(opt.__dask_graph__())]


@pytest.mark.parametrize("n_chunks", [8, 16])
def test_gram_pass_is_one_reduction_with_fused_features(monkeypatch, n_chunks):
    rng = np.random.default_rng(0)
    n = 100 * n_chunks
    X = da.from_array(rng.normal(size=(n, 5)), chunks=(100, 5))
    y = da.from_array(rng.normal(size=n), chunks=100)
    scaler = Standardizer().fit(X)
    rff = RandomFourierFeatures(64, gamma=0.5, random_state=0).fit(scaler.transform(X))
    Xs = scaler.transform(X)
    Z = rff.transform(Xs)
    captured = _capture_reduction(monkeypatch)
    est = StreamingRidge(alpha=[0.1, 1.0]).fit(Z, y)

    assert len(captured) == 1  # the whole fit (with CV over two alphas) is one pass
    (reduction,) = captured
    assert reduction.shape == (ridge_module.gram_layout(64, 1, 5).size,)  # nothing with n in it
    names = _key_names(reduction)
    counts = collections.Counter(names)
    # fused: no layer of the pass makes the stored feature block Z; the standardized
    # rows are blockwise-fused into the chunk tasks (no task of their own)
    assert Z.name not in reduction.__dask_graph__().layers
    assert not [k for k in counts if Xs.name in k], counts
    # O(n_chunks): a few tasks per row block (read X, read y, fused chunk) plus
    # the tree of sums; 5 per chunk + a constant is a loose upper bound
    assert len(names) <= 5 * n_chunks + 8, counts
    # ...and no less than one fused task per row block
    assert max(counts.values()) >= n_chunks
    # and the result is that of numpy on the materialized features; Z is
    # float32, whose SYRK partials round differently over 100-row chunks than
    # over one 8192-row sub-block (~1e-7 relative per Gram entry, times the
    # condition number of this 64-feature Gram ~ 100): 1e-4
    ref = StreamingRidge(alpha=[0.1, 1.0]).fit(Z.compute(), y.compute())
    assert ref.alpha_ == est.alpha_
    assert _rel(est.coef_, ref.coef_) < 1e-4


@pytest.mark.parametrize("Est", [StreamingRidge, StreamingRidgeClassifier])
def test_features_computed_in_the_pass_equal_reducing_over_z(Est):
    # Z = rff.transform(X) is reduced over X with the features made in
    # FUSED_SUB_BLOCK-row sub-blocks inside the task; Z + 0 (no source) is
    # reduced as it is, in SUB_BLOCK-row sub-blocks: same model up to float32
    # rounding of the sub-block sums.  Chunks wide enough for several
    # sub-blocks in each of the 5 CV folds (whose sizes differ).
    from rfstream.features.fused import FUSED_SUB_BLOCK
    from rfstream.solvers.gram import SUB_BLOCK

    rng = np.random.default_rng(3)
    n = 12 * max(SUB_BLOCK, FUSED_SUB_BLOCK) + 123
    X = da.from_array(rng.normal(size=(n, 6)), chunks=(n // 2, 6))
    y = X[:, 0] - X[:, 1] ** 2 + 0.1 * da.from_array(rng.normal(size=n), chunks=n // 2)
    if Est is StreamingRidgeClassifier:
        y = (y > 0).astype(int) + (y > 1).astype(int)
    rff = RandomFourierFeatures(96, gamma=0.3, random_state=0).fit(X)
    Z = rff.transform(X)
    fn, rows = feature_source(Z)
    assert rows.name == X.name and fn.__self__ is rff
    assert feature_source(Z + 0) is None and feature_source(Z.astype(np.float64)) is None
    fused = Est(alpha=[0.01, 1.0]).fit(Z, y)
    plain = Est(alpha=[0.01, 1.0]).fit(Z + 0, y)
    assert fused.alpha_ == plain.alpha_
    assert _rel(fused.coef_, plain.coef_) < 1e-4
    np.testing.assert_allclose(fused.cv_mse_, plain.cv_mse_, rtol=1e-4)


@pytest.mark.parametrize("make_map, dtype", [
    (RandomFourierFeatures, "float64"),  # writes into the buffer; float64 buffer
    (ArcCosineFeatures, "float32"),  # returns a fresh block, copied into the buffer
])
def test_features_in_the_pass_for_other_maps_and_dtypes(make_map, dtype):
    # 4 classes: the [Z, Y, 1] buffer of the pass holds 4 target columns; the
    # reference is the same map in float64 on numpy (float32 ReLU features of
    # this 80-feature Gram: 3e-5 relative error in the pass, 1.3e-4 for numpy's)
    from rfstream.features.fused import FUSED_SUB_BLOCK

    rng = np.random.default_rng(5)
    n = 3 * FUSED_SUB_BLOCK + 17
    Xn, yn = rng.normal(size=(n, 6)), rng.integers(0, 4, n)
    X = da.from_array(Xn, chunks=(n // 2 + 1, 6))
    fmap = make_map(80, random_state=1, dtype=dtype).fit(X)
    Z = fmap.transform(X)
    assert feature_source(Z) is not None
    fused = StreamingRidgeClassifier(alpha=[0.1, 1.0]).fit(Z, da.from_array(yn, chunks=n // 2 + 1))
    exact = make_map(80, random_state=1, dtype="float64").fit(X).transform(Xn)
    ref = StreamingRidgeClassifier(alpha=[0.1, 1.0]).fit(exact, yn)
    assert fused.alpha_ == ref.alpha_
    tol = 1e-9 if dtype == "float64" else 1e-4
    assert _rel(fused.coef_, ref.coef_) < tol
    np.testing.assert_allclose(fused.cv_mse_, ref.cv_mse_, rtol=tol)


@pytest.mark.parametrize("n_classes", [0, 2, 3])  # 0: regression
def test_prediction_makes_the_features_in_the_task(n_classes):
    # decision values on Z = rff.transform(X) are computed over X, the features made
    # FUSED_SUB_BLOCK rows at a time; Z itself is never a task's output
    from rfstream.features.fused import FUSED_SUB_BLOCK

    rng = np.random.default_rng(7)
    n = 2 * FUSED_SUB_BLOCK + 301
    Xn = rng.normal(size=(n, 5))
    yn = rng.integers(0, n_classes, n) if n_classes else Xn[:, 0] - Xn[:, 1] ** 2
    X = da.from_array(Xn, chunks=(n // 2 + 1, 5))
    rff = RandomFourierFeatures(70, gamma=0.4, random_state=2).fit(X)
    Z = rff.transform(X)
    Est = StreamingRidgeClassifier if n_classes else StreamingRidge
    est = Est(alpha=0.5).fit(rff.transform(Xn), yn)
    scores = est.decision_function(Z) if n_classes else est.predict(Z)
    layers = scores.__dask_graph__().layers
    assert Z.name not in layers and rff.transform(X).name not in layers
    assert Z.name in (est.predict(Z + 0)).__dask_graph__().layers  # (the check can fail)
    plain = est.decision_function(Z + 0) if n_classes else est.predict(Z + 0)
    ref = est.decision_function(rff.transform(Xn)) if n_classes else est.predict(rff.transform(Xn))
    assert scores.shape == plain.shape == ref.shape and scores.chunks == plain.chunks
    np.testing.assert_allclose(scores.compute(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plain.compute(), ref, rtol=1e-5, atol=1e-6)
    if n_classes:
        assert (est.predict(Z).compute() == est.predict(rff.transform(Xn))).mean() > 0.999


@pytest.mark.parametrize("Est", [StreamingRidge, StreamingRidgeClassifier])
def test_cg_makes_the_features_in_its_tasks(Est, monkeypatch):
    # solver="cg" on Z = rff.transform(X): the statistics pass and every product pass
    # reduce over X, the features made a sub-block at a time in the task and turned into
    # float64 there; Z + 0 is reduced over its stored blocks.  The same products of the
    # same float32 features, summed in another order (the float32 phase's rounding may
    # differ by a pass; the float64 finish meets tol on the true residual): equal to 1e-8,
    # and the CG solution equals the Gram pass's.
    import rfstream.solvers.cg as cg_module
    import rfstream.solvers.cg_stats as cg_stats_module
    from rfstream.features.fused import FUSED_SUB_BLOCK

    rng = np.random.default_rng(11)
    n = 2 * FUSED_SUB_BLOCK + 501
    Xn = rng.normal(size=(n, 5))
    yn = Xn[:, 0] - Xn[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    if Est is StreamingRidgeClassifier:
        yn = (yn > 0).astype(int) + (yn > 1).astype(int)
    X = da.from_array(Xn, chunks=(n // 2 + 1, 5))
    rff = RandomFourierFeatures(60, gamma=0.3, random_state=3).fit(X)
    Z = rff.transform(X)
    passes = []
    original = cg_module.compute
    for module in (cg_module, cg_stats_module):  # the iterations' passes, the statistics pass
        monkeypatch.setattr(module, "compute", lambda *c: passes.extend(c) or original(*c))
    kw = {"alpha": 1.0, "solver": "cg", "tol": 1e-10, "max_iter": 300}
    fused = Est(**kw).fit(Z, yn)
    assert len(passes) == fused.n_iter_  # the statistics pass and one per CG iteration
    assert all(Z.name not in p.__dask_graph__().layers for p in passes)
    plain = Est(**kw).fit(Z + 0, yn)
    assert len(passes) == fused.n_iter_ + plain.n_iter_ and abs(fused.n_iter_ - plain.n_iter_) <= 2
    assert Z.name in passes[-1].__dask_graph__().layers  # (the check can fail)
    assert _rel(fused.coef_, plain.coef_) < 1e-8
    np.testing.assert_allclose(fused.intercept_, plain.intercept_, rtol=1e-8, atol=1e-10)
    gram = Est(alpha=1.0, solver="gram").fit(Z, yn)
    assert _rel(fused.coef_, gram.coef_) < 1e-5  # float32 Gram sub-block sums vs float64 products


def test_sparse_maps_have_no_feature_source():
    # random binning's CSR blocks hold rows x P non-zeros: passes (CG, the sparse Gram)
    # reduce over the stored blocks, and the result is the same as on numpy
    from rfstream import RandomBinningFeatures

    rng = np.random.default_rng(2)
    Xn = rng.uniform(size=(3000, 4))
    yn = np.sin(4 * Xn[:, 0]) + Xn[:, 1]
    X = da.from_array(Xn, chunks=(1000, 4))
    rbf = RandomBinningFeatures(20, gamma=2.0, random_state=0).fit(X)
    Z = rbf.transform(X)
    assert feature_source(Z) is None
    est = StreamingRidge(alpha=1.0, solver="cg", tol=1e-10, max_iter=300).fit(Z, yn)
    ref = StreamingRidge(alpha=1.0, solver="cg", tol=1e-10, max_iter=300).fit(rbf.transform(Xn), yn)
    assert _rel(est.coef_, ref.coef_) < 1e-8


def test_features_in_the_pass_from_sparse_rows_with_a_short_last_block():
    # CSR row blocks of 300, 300, 300, 100: the pass cuts them into 4 x 250 and
    # computes the dense RFF of each sub-block in the task; same model as numpy
    import scipy.sparse as sp

    Xn = sp.random(1000, 20, density=0.2, format="csr", random_state=0)
    y = np.random.default_rng(0).normal(size=1000)
    X = da.from_array(Xn, chunks=(300, 20), asarray=False)
    rff = RandomFourierFeatures(64, gamma=0.5, random_state=0).fit(X)
    fused = StreamingRidge(alpha=1.0).fit(rff.transform(X), da.from_array(y, chunks=300))
    ref = StreamingRidge(alpha=1.0).fit(rff.transform(Xn), y)
    assert _rel(fused.coef_, ref.coef_) < 1e-4
    # prediction makes the features of the sparse rows in the task as well
    np.testing.assert_allclose(ref.predict(rff.transform(X)).compute(), ref.predict(rff.transform(Xn)),
                               rtol=1e-6, atol=1e-6)


def test_classifier_fit_dask_is_two_small_computes(monkeypatch):
    # classes (one da.unique reduction) and the Gram pass: two computes.
    X, y = _classification(3, n=400)
    captured = _capture_reduction(monkeypatch)
    StreamingRidgeClassifier().fit(da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100))
    assert len(captured) == 2
    # the unique labels (unknown length until computed) and the packed partials
    assert all(c.ndim == 1 for c in captured)
    assert captured[1].shape == (ridge_module.gram_layout(X.shape[1], 3, 1).size,)


# ------------------------------------------------------------------------- errors
@pytest.mark.parametrize("alpha", [-1.0, [], "abc", [1.0, -0.5], float("nan"), [1.0, float("inf")]])
@pytest.mark.parametrize("Est", [StreamingRidge, StreamingRidgeClassifier])
def test_bad_alpha(Est, alpha):
    X, y = _classification(2)
    with pytest.raises(ValueError, match="alpha"):
        Est(alpha=alpha).fit(X, y)


@pytest.mark.parametrize("cv", [1, 0, 2.5])
def test_bad_cv(cv):
    X, y = _regression()
    with pytest.raises(ValueError, match="cv"):
        StreamingRidge(alpha=[1.0, 2.0], cv=cv).fit(X, y)


@pytest.mark.parametrize("y_kind", ["numpy", "dask"])
def test_dask_x_with_y_of_other_length(y_kind):
    X = da.zeros((100, 3), chunks=50)
    y = np.zeros(90) if y_kind == "numpy" else da.zeros(90, chunks=45)
    # the message must name the mismatch (rows of X vs rows of y)
    with pytest.raises(ValueError, match=r"X has 100 rows but y has 90"):
        StreamingRidge().fit(X, y)


def test_classifier_continuous_targets():
    X, y = _regression()
    with pytest.raises(ValueError, match="Unknown label type"):
        StreamingRidgeClassifier().fit(X, y)


def test_many_classes_from_dask_labels_fit_without_a_regression_hint(recwarn):
    """30 classes read from a dask y: the distinct labels are checked, not taken for a
    30-sample regression target (scikit-learn's "more unique classes than half" hint)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = np.arange(600) % 30
    StreamingRidgeClassifier(alpha=1.0).fit(da.from_array(X, chunks=200), da.from_array(y, chunks=200))
    assert not [w for w in recwarn if "unique classes" in str(w.message)]
