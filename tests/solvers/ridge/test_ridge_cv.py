"""Cross-validation of the ridge solvers by the task's metric (rfstream.solvers.ridge.cv).

The oracle is the explicit loop: for each fold, fit scikit-learn's RidgeClassifier
(the same +-1 least-squares objective, Cholesky) on the fold's training rows,
predict its held-out rows with numpy and count the (weighted) errors.  The folds
are the solver's own (seed, row) stream.  The one-pass path solves the same
normal equations from the Gram partials, so the decision values agree to ~1e-12
and the predicted classes are the same; the error rates, sums of the same 0/1
weights, then agree to rounding (1e-12).
"""
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import RidgeClassifier
from sklearn.metrics import balanced_accuracy_score, roc_auc_score
from sklearn.model_selection import KFold

from rfstream import RandomFourierFeatures, StreamingRidge, StreamingRidgeClassifier
from rfstream.random import STREAM_FOLDS, row_integers

ALPHAS = [1e-3, 0.3, 3.0, 30.0, 300.0]


def _data(n_classes=3, n=700, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    score = X[:, 0] - 0.7 * X[:, 1] * X[:, 2] + 0.8 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


def _explicit(X, y, alphas, scoring, seed=0, K=5, sample_weight=None, class_weight=None, folds=None):
    """(fold scores (A, K), mean per alpha) by refitting on each fold's training rows."""
    folds = row_integers(seed, STREAM_FOLDS, 0, X.shape[0], K) if folds is None else folds
    classes = np.unique(y)
    c = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    if class_weight is not None:  # the fit's row weights: sample_weight x class_weight
        c = c * np.array([class_weight.get(v, 1.0) for v in y])
    scores, weight = np.zeros((len(alphas), K)), np.zeros(K)
    for k in range(K):
        test = folds == k
        weight[k] = c[test].sum()
        for i, a in enumerate(alphas):
            model = RidgeClassifier(alpha=a, solver="cholesky", class_weight=class_weight)
            sw = None if sample_weight is None else np.asarray(sample_weight, dtype=float)[~test]
            model.fit(X[~test], y[~test], sample_weight=sw)  # class_weight applied by sklearn
            dec = X[test] @ np.atleast_2d(model.coef_).T + np.atleast_1d(model.intercept_)
            pred = classes[(dec[:, 0] > 0).astype(int)] if dec.shape[1] == 1 else classes[np.argmax(dec, 1)]
            if scoring == "error_rate":
                scores[i, k] = c[test] @ (pred != y[test]) / c[test].sum()
            elif scoring == "balanced_error":
                scores[i, k] = 1 - balanced_accuracy_score(y[test], pred, sample_weight=c[test])
            else:
                scores[i, k] = roc_auc_score(y[test], dec[:, 0], sample_weight=c[test])
    if scoring == "error_rate":  # the error rate of all held-out predictions together
        return scores, scores @ weight / weight.sum()
    return scores, scores.mean(axis=1)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("scoring", ["error_rate", "balanced_error"])
def test_cv_errors_equal_the_explicit_loop(n_classes, scoring):
    X, y = _data(n_classes)
    est = StreamingRidgeClassifier(alpha=ALPHAS, scoring=scoring, random_state=3).fit(X, y)
    folds, mean = _explicit(X, y, ALPHAS, scoring, seed=3)
    res = est.cv_results_
    np.testing.assert_allclose(res["fold_scores"], folds, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res["mean_score"], mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res["std_score"], folds.std(axis=1), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(res["alpha"], ALPHAS)
    assert est.alpha_ == ALPHAS[int(np.argmin(mean))]
    assert est.best_score_ == pytest.approx(mean.min(), abs=1e-12)


def test_cv_auc_within_its_bound_of_the_explicit_loop():
    # The AUC comes from histograms of the held-out decision values: exact up to
    # the reported bound (pairs sharing a bin counted 1/2), ~1e-4 here.
    X, y = _data(2)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    est = StreamingRidgeClassifier(alpha=ALPHAS, scoring="roc_auc").fit(X, y, sample_weight=w)
    folds, _ = _explicit(X, y, ALPHAS, "roc_auc", sample_weight=w)
    bound = est.cv_results_["auc_error_bound"]
    assert np.all(np.abs(est.cv_results_["fold_scores"] - folds) <= bound + 1e-12)
    assert bound.max() < 1e-2
    assert est.best_score_ == est.cv_results_["mean_score"].max()


def test_cv_auc_needs_two_classes():
    X, y = _data(3)
    with pytest.raises(ValueError, match="roc_auc' needs two classes; got 3"):
        StreamingRidgeClassifier(alpha=ALPHAS, scoring="roc_auc").fit(X, y)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_weights_count_as_sklearns_weighted_scorers(n_classes):
    # Row weights sample_weight x class_weight, as the fit: weighted error counts.
    X, y = _data(n_classes, seed=2)
    rng = np.random.default_rng(5)
    w = rng.integers(0, 4, size=len(y)).astype(float)  # zeros drop rows from the counts
    cw = {0: 2.0, 1: 0.5}
    est = StreamingRidgeClassifier(alpha=ALPHAS, class_weight=cw).fit(X, y, sample_weight=w)
    for scoring in ("error_rate", "balanced_error"):
        est.set_params(scoring=scoring).fit(X, y, sample_weight=w)
        folds, mean = _explicit(X, y, ALPHAS, scoring, sample_weight=w, class_weight=cw)
        np.testing.assert_allclose(est.cv_results_["fold_scores"], folds, rtol=0, atol=1e-12)
        np.testing.assert_allclose(est.cv_results_["mean_score"], mean, rtol=0, atol=1e-12)
    unweighted = StreamingRidgeClassifier(alpha=ALPHAS).fit(X, y)
    assert not np.allclose(unweighted.cv_results_["fold_scores"], est.cv_results_["fold_scores"])


def test_explicit_splits_are_scored_on_their_test_rows():
    X, y = _data(3, n=400)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    folds = np.empty(len(y), dtype=int)
    for k, (_, test) in enumerate(splits):
        folds[test] = k
    est = StreamingRidgeClassifier(alpha=ALPHAS, cv=splits).fit(X, y)
    ref, mean = _explicit(X, y, ALPHAS, "error_rate", K=4, folds=folds)
    np.testing.assert_allclose(est.cv_results_["fold_scores"], ref, rtol=0, atol=1e-12)
    assert est.alpha_ == ALPHAS[int(np.argmin(mean))]


@pytest.mark.parametrize("scoring", ["error_rate", "balanced_error", "roc_auc"])
@pytest.mark.parametrize("chunks", [97, 350])
def test_dask_equals_numpy(scoring, chunks):
    # Folds depend on (seed, global row) only; the counts are sums of the same
    # weights in another order.
    X, y = _data(2 if scoring == "roc_auc" else 3, n=900)
    w = np.random.default_rng(0).uniform(0, 2, size=len(y))
    ref = StreamingRidgeClassifier(alpha=ALPHAS, scoring=scoring).fit(X, y, sample_weight=w)
    est = StreamingRidgeClassifier(alpha=ALPHAS, scoring=scoring).fit(
        da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks),
        sample_weight=da.from_array(w, chunks=chunks))
    assert est.alpha_ == ref.alpha_
    for key in ("mean_score", "std_score", "fold_scores"):
        np.testing.assert_allclose(est.cv_results_[key], ref.cv_results_[key], rtol=0, atol=1e-12)


def test_sparse_features_and_sub_blocks():
    # CSR features (random binning's kind) give the same counts as dense ones; 9000
    # numpy rows are one block of two sub-blocks, the dask chunks one sub-block each.
    X, y = _data(3, n=9000, seed=6)
    ref = StreamingRidgeClassifier(alpha=ALPHAS, scoring="balanced_error").fit(X, y)
    for Xs in (sp.csr_matrix(X), da.from_array(X, chunks=(1000, -1))):
        est = StreamingRidgeClassifier(alpha=ALPHAS, scoring="balanced_error").fit(Xs, y)
        np.testing.assert_allclose(est.cv_results_["fold_scores"], ref.cv_results_["fold_scores"],
                                   rtol=0, atol=1e-12)
    _, mean = _explicit(X, y, ALPHAS, "balanced_error")
    np.testing.assert_allclose(ref.cv_results_["mean_score"], mean, rtol=0, atol=1e-12)


def test_features_made_in_the_scoring_pass():
    # Z = rff.transform(X) (dask): both passes make the features in their tasks;
    # Z + 0 reduces the stored blocks.  float32 features: the decision values
    # differ by float32 rounding (~1e-6), far from flipping a prediction here,
    # so the error rates agree to float64 rounding of their sums.
    X, y = _data(3, n=3000, seed=4)
    Xd = da.from_array(X, chunks=(1000, -1))
    rff = RandomFourierFeatures(64, gamma=0.2, random_state=0).fit(Xd)
    Z = rff.transform(Xd)
    fused = StreamingRidgeClassifier(alpha=ALPHAS).fit(Z, y)
    plain = StreamingRidgeClassifier(alpha=ALPHAS).fit(Z + 0, y)
    zn = np.asarray(Z.compute(), dtype=np.float64)
    direct = StreamingRidgeClassifier(alpha=ALPHAS).fit(zn, y)
    assert fused.alpha_ == plain.alpha_ == direct.alpha_
    np.testing.assert_allclose(fused.cv_results_["mean_score"], plain.cv_results_["mean_score"], atol=2e-3)
    np.testing.assert_allclose(fused.cv_results_["mean_score"], direct.cv_results_["mean_score"], atol=2e-3)


def _counting(X, chunks):
    """A dask X whose blocks count their reads (not dask's empty probes for meta)."""
    reads = []

    def read(block):
        if block.shape[0]:
            reads.append(block.shape[0])
        return block

    Xd = da.from_array(X, chunks=(chunks, -1)).map_blocks(read, dtype=X.dtype)
    return Xd, reads


@pytest.mark.parametrize("alphas, scoring, passes", [
    (ALPHAS, "error_rate", 2),                    # the Gram pass and the scoring pass
    (ALPHAS[:2], "balanced_error", 2),            # whatever the number of alphas
    ([0.1 * i for i in range(1, 21)], "error_rate", 2),
    (ALPHAS, "squared_error", 1),                 # from the partials of the Gram pass
    (1.0, "error_rate", 1),                       # one alpha: no CV
])
@pytest.mark.parametrize("calibrate", [False, "auto"])
def test_passes_over_the_rows(alphas, scoring, passes, calibrate):
    X, y = _data(3, n=600)
    Xd, reads = _counting(X, 150)
    StreamingRidgeClassifier(alpha=alphas, scoring=scoring, calibrate=calibrate).fit(
        Xd, da.from_array(y, chunks=150))
    passes += calibrate == "auto" and np.ndim(alphas) > 0  # a searched fit is calibrated: one more
    assert len(reads) == passes * 4 and sum(reads) == passes * 600


def test_default_scoring():
    # Classifiers choose alpha by the error rate a user reads (one more pass when
    # alpha is a list); regressors by the held-out MSE, from the partials.
    assert StreamingRidgeClassifier().scoring == "error_rate"
    assert StreamingRidge().scoring == "squared_error"
    X, y = _data(3)
    est = StreamingRidgeClassifier(alpha=ALPHAS).fit(X, y)
    assert est.cv_results_["scoring"] == "error_rate"
    _, mean = _explicit(X, y, ALPHAS, "error_rate")
    np.testing.assert_allclose(est.cv_results_["mean_score"], mean, rtol=0, atol=1e-12)


def test_squared_error_table_matches_cv_mse():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 5))
    yr = X @ rng.normal(size=5) + rng.normal(size=500)
    reg = StreamingRidge(alpha=ALPHAS).fit(X, yr)
    assert reg.cv_results_["scoring"] == "squared_error"
    np.testing.assert_allclose(reg.cv_results_["mean_score"], reg.cv_mse_, rtol=1e-12)
    assert reg.alpha_ == ALPHAS[int(np.argmin(reg.cv_mse_))]
    assert reg.best_score_ == pytest.approx(reg.cv_mse_.min(), rel=1e-12)
    Xc, yc = _data(2)
    clf = StreamingRidgeClassifier(alpha=ALPHAS, scoring="squared_error").fit(Xc, yc)
    np.testing.assert_allclose(clf.cv_results_["mean_score"], clf.cv_mse_, rtol=1e-12)


@pytest.mark.parametrize("Est, scoring", [(StreamingRidge, "error_rate"), (StreamingRidgeClassifier, "r2")])
def test_bad_scoring(Est, scoring):
    X, y = _data(2)
    with pytest.raises(ValueError, match="'scoring' parameter"):
        Est(alpha=ALPHAS, scoring=scoring).fit(X, y)


@pytest.mark.parametrize("n_targets", [1, 3])
def test_one_product_of_every_fold_equals_a_product_per_fold(monkeypatch, n_targets):
    # cv.held_out_decisions: the route that multiplies every row by every fold's models and keeps
    # its own fold's columns gives each row's own fold's decisions to float32 rounding, and NaN for
    # the rows of no scored fold (fold index K: PredefinedSplit's training-only rows).
    from rfstream.solvers.ridge import cv

    rng = np.random.default_rng(0)
    K, D, m = 4, 48, 300
    z = rng.standard_normal((m, D)).astype(np.float32)
    folds = rng.integers(0, K + 1, m)
    W, b = rng.standard_normal((K, D, 2 * n_targets)), rng.standard_normal((K, 2 * n_targets))
    expected = np.full((m, W.shape[2]), np.nan)
    for i in range(m):
        if folds[i] < K:
            expected[i] = z[i].astype(np.float64) @ W[folds[i]] + b[folds[i]]
    routes = {}
    for name, columns in (("one product", K * W.shape[2]), ("per fold", 0)):
        monkeypatch.setattr(cv, "ONE_PRODUCT_COLUMNS", columns)
        routes[name] = cv.held_out_decisions(z, folds, W, b)
        np.testing.assert_array_equal(np.isnan(routes[name]), np.isnan(expected))
        np.testing.assert_allclose(routes[name], expected, rtol=0, atol=1e-4 * np.abs(expected[folds < K]).max())
    np.testing.assert_allclose(routes["one product"], routes["per fold"], rtol=0,
                               atol=1e-5 * np.abs(expected[folds < K]).max())
