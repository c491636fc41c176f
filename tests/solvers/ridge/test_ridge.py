"""StreamingRidge / StreamingRidgeClassifier: the mathematics of the one-pass solver.

The oracle is scikit-learn's Ridge (same objective, same alpha scale): the single
Gram reduction must reproduce it.  Cross-validation over an alpha list is checked
against a brute-force K-fold on the same folds; the pass as a graph (one reduction
with the feature map fused into it) in test_ridge_pass.py.  The contract every solver
keeps (numpy/dask, chunkings, determinism, processes, save/load, check_estimator,
bad input) is tested in test_contract_solvers.py.
"""
import dask.array as da
import numpy as np
import pytest
from helpers.ridge_data import classification_data, regression_data, rel
from sklearn.linear_model import Ridge, RidgeClassifier

from rfstream import StreamingRidge, StreamingRidgeClassifier
from rfstream.random import STREAM_FOLDS, row_integers


# ------------------------------------------------------------------ vs sklearn Ridge
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("T", [None, 3])
@pytest.mark.parametrize("alpha", [0.1, 10.0])
def test_ridge_equals_sklearn_float64(fit_intercept, T, alpha):
    # Both solve the same normal equations (G + alpha I) W = C in float64 with
    # Cholesky on a well-conditioned problem (cond(G) ~ 10), so they agree to a
    # few ulps times the condition number: 1e-8 leaves a margin of ~1e5.  The
    # offset of 1 makes the intercept/centring path matter.
    X, y = regression_data(T=T, offset=1.0)
    ref = Ridge(alpha=alpha, fit_intercept=fit_intercept).fit(X, y)
    est = StreamingRidge(alpha=alpha, fit_intercept=fit_intercept).fit(X, y)
    assert est.coef_.shape == ref.coef_.shape
    assert rel(est.coef_, ref.coef_) < 1e-8
    if fit_intercept:
        assert np.shape(est.intercept_) == np.shape(ref.intercept_)
        assert rel(est.intercept_, ref.intercept_) < 1e-8
    else:
        # (sklearn stores a scalar 0.0 here even for 2-D y; rfstream one 0 per target)
        assert np.all(np.asarray(est.intercept_) == 0.0)
    assert rel(est.predict(X), ref.predict(X)) < 1e-8
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
    X, y = regression_data(n=5000, d=10, T=T, offset=0.3)
    X32 = X.astype(np.float32)
    ref = Ridge(alpha=1.0, fit_intercept=fit_intercept).fit(X32.astype(np.float64), y)
    est = StreamingRidge(alpha=1.0, fit_intercept=fit_intercept).fit(X32, y)
    assert rel(est.coef_, ref.coef_) < 1e-5
    assert rel(est.predict(X32), ref.predict(X32.astype(np.float64))) < 1e-5
    assert est.predict(X32).dtype == np.float64  # scores are reported in float64


# ------------------------------------------------------------ vs sklearn RidgeClassifier
@pytest.mark.parametrize(
    "n_classes,labels",
    [(2, None), (2, ["no", "yes"]), (3, None), (4, ["cat", "dog", "emu", "yak"])],
)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_classifier_equals_sklearn(n_classes, labels, fit_intercept):
    # Same +-1 one-vs-rest targets (one column for two classes) and the same
    # ridge solve in float64: 1e-8 relative as for the regressor; the predicted
    # labels must then be identical (no row sits within 1e-8 of a tie).
    X, y = classification_data(n_classes, labels)
    ref = RidgeClassifier(alpha=2.0, fit_intercept=fit_intercept).fit(X, y)
    est = StreamingRidgeClassifier(alpha=2.0, fit_intercept=fit_intercept).fit(X, y)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    # linear-classifier convention (LogisticRegression, RidgeClassifier's docs):
    # coef_ is (1, d) for two classes (sklearn 1.9's RidgeClassifier ravels it)
    assert est.coef_.shape == (1 if n_classes == 2 else n_classes, X.shape[1])
    assert rel(est.coef_, np.atleast_2d(ref.coef_)) < 1e-8
    if fit_intercept:
        assert rel(est.intercept_, ref.intercept_) < 1e-8
    assert rel(est.decision_function(X), ref.decision_function(X)) < 1e-8
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
    X, y = regression_data(n=N_DASK, T=2, offset=0.5)
    ref = StreamingRidge(alpha=0.5).fit(X, y)
    Xd = da.from_array(X, chunks=chunks + ((X.shape[1],),))
    yd = da.from_array(y, chunks=(chunks[0], (2,)))
    est = StreamingRidge(alpha=0.5).fit(Xd, yd)
    assert rel(est.coef_, ref.coef_) < 1e-10
    assert rel(est.intercept_, ref.intercept_) < 1e-10
    assert est.n_features_in_ == X.shape[1] and est.n_samples_seen_ == N_DASK

    pred = est.predict(Xd)
    assert isinstance(pred, da.Array)  # lazy
    assert pred.chunks == (chunks[0], (2,))  # one output block per row block
    assert pred.dtype == np.float64
    computed = pred.compute()
    assert computed.shape == pred.shape
    assert rel(computed, ref.predict(X)) < 1e-10


@pytest.mark.parametrize("chunks", CHUNKINGS, ids=lambda c: f"{len(c[0])}chunks")
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_dask_equals_numpy(chunks, n_classes):
    # numpy y with a dask X (converted to X's row chunks) and a dask y chunked
    # differently from X (re-aligned inside the reduction) must both match the
    # numpy fit to float64 summation-order tolerance.
    X, y = classification_data(n_classes, ["a", "b", "c"][:n_classes], n=N_DASK)
    ref = StreamingRidgeClassifier(alpha=1.0).fit(X, y)
    Xd = da.from_array(X, chunks=chunks + ((X.shape[1],),))
    for y_in in (y, da.from_array(y, chunks=250)):
        est = StreamingRidgeClassifier(alpha=1.0).fit(Xd, y_in)
        np.testing.assert_array_equal(est.classes_, ref.classes_)
        assert rel(est.coef_, ref.coef_) < 1e-10
        assert rel(est.intercept_, ref.intercept_) < 1e-10

    scores = est.decision_function(Xd)
    labels = est.predict(Xd)
    assert isinstance(scores, da.Array) and isinstance(labels, da.Array)
    expected_chunks = (chunks[0],) if n_classes == 2 else (chunks[0], (n_classes,))
    assert scores.chunks == expected_chunks
    assert labels.chunks == (chunks[0],)
    assert labels.dtype == ref.classes_.dtype
    assert rel(scores.compute(), ref.decision_function(X)) < 1e-10
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
    X, y = regression_data(n=900, d=10, T=T, offset=0.5, noise=1.0)
    seed, K = 7, 4
    est = StreamingRidge(alpha=ALPHAS, cv=K, fit_intercept=fit_intercept, random_state=seed).fit(X, y)
    brute = _brute_force_cv_mse(X, y, ALPHAS, seed, K, fit_intercept)
    np.testing.assert_allclose(est.cv_mse_, brute, rtol=1e-6)
    np.testing.assert_array_equal(est.alphas_, ALPHAS)
    assert est.alpha_ == ALPHAS[int(np.argmin(brute))]
    # the final model is refitted on all rows with the chosen alpha
    ref = Ridge(alpha=est.alpha_, fit_intercept=fit_intercept).fit(X, y)
    assert rel(est.coef_, ref.coef_) < 1e-8


def test_cv_path_independent_of_chunking():
    # Folds depend only on (seed, global row), and 5000 rows span two virtual
    # blocks of 4096: chunks of 333 and 1000 straddle that boundary at
    # different places.  Same sums in another order -> 1e-10 relative.
    X, y = regression_data(n=5000, d=8, offset=0.2, noise=2.0, seed=4)
    ref = StreamingRidge(alpha=ALPHAS, random_state=11).fit(X, y)
    for rows in (333, 1000):
        est = StreamingRidge(alpha=ALPHAS, random_state=11).fit(
            da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        )
        assert est.alpha_ == ref.alpha_
        np.testing.assert_allclose(est.cv_mse_, ref.cv_mse_, rtol=1e-10)
        assert rel(est.coef_, ref.coef_) < 1e-10
    brute = _brute_force_cv_mse(X, y, ALPHAS, 11, 5, True)
    np.testing.assert_allclose(ref.cv_mse_, brute, rtol=1e-6)


def test_cv_depends_on_seed():
    # Another seed gives other folds and so (slightly) other held-out errors.
    X, y = regression_data(n=400, noise=2.0)
    a = StreamingRidge(alpha=ALPHAS, random_state=0).fit(X, y)
    b = StreamingRidge(alpha=ALPHAS, random_state=1).fit(X, y)
    assert not np.allclose(a.cv_mse_, b.cv_mse_, rtol=1e-6)


def test_classifier_cv_independent_of_chunking():
    X, y = classification_data(3, ["x", "y", "z"], n=3000)
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


# ------------------------------------------------------------------------- errors
@pytest.mark.parametrize("alpha", [-1.0, [], "abc", [1.0, -0.5], float("nan"), [1.0, float("inf")]])
@pytest.mark.parametrize("Est", [StreamingRidge, StreamingRidgeClassifier])
def test_bad_alpha(Est, alpha):
    X, y = classification_data(2)
    with pytest.raises(ValueError, match="alpha"):
        Est(alpha=alpha).fit(X, y)


@pytest.mark.parametrize("cv", [1, 0, 2.5])
def test_bad_cv(cv):
    X, y = regression_data()
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
    X, y = regression_data()
    with pytest.raises(ValueError, match="Unknown label type"):
        StreamingRidgeClassifier().fit(X, y)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # scikit-learn's label check alone casts NaN to int
@pytest.mark.parametrize("bad, said", [(np.nan, "NaN"), (np.inf, "infinity")])
def test_classifier_labels_nan_or_infinite_are_named(bad, said):
    X, _ = regression_data()
    y = np.where(np.arange(X.shape[0]) % 2, 1.0, 0.0)
    y[3] = bad
    for labels in (y, da.from_array(y, chunks=50)):
        with pytest.raises(ValueError, match=f"Input y contains {said}"):
            StreamingRidgeClassifier().fit(X, labels)


def test_many_classes_from_dask_labels_fit_without_a_regression_hint(recwarn):
    """30 classes read from a dask y: the distinct labels are checked, not taken for a
    30-sample regression target (scikit-learn's "more unique classes than half" hint)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = np.arange(600) % 30
    StreamingRidgeClassifier(alpha=1.0).fit(da.from_array(X, chunks=200), da.from_array(y, chunks=200))
    assert not [w for w in recwarn if "unique classes" in str(w.message)]
