"""StreamingSGDClassifier / StreamingSGDRegressor with solver="newton": a Newton step per
pass on the smoothed losses, exact where SGD is approximate.

The oracles are those of tests/solvers/sgd/test_sgd.py (scikit-learn's exact solvers of the same
objective); also the passes' graphs (the features made inside the tasks, for the Newton
passes and for SGD's epochs).
"""
import dask.array as da
import numpy as np
import pytest
from helpers.sgd_cases import StreamingSGDClassifier, StreamingSGDRegressor, blobs, objective_of
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from rfstream import RandomFourierFeatures
from rfstream.cluster import connect


# ------------------------------------------------------------------ solver="newton"
@pytest.mark.parametrize("loss", ["log_loss", "squared_hinge", "hinge"])
def test_second_order_derivatives(loss):
    # d1 and d2 against central differences of the value and of d1, away from
    # the kinks (margin 0, and margin h for the smoothed hinge)
    from rfstream.solvers.sgd.losses import second_order

    rng = np.random.default_rng(0)
    y = rng.choice([-1.0, 1.0], size=(200, 2))
    p = rng.normal(size=(200, 2)) * 2
    margin = 1 - y * p
    p[(np.abs(margin) < 1e-2) | (np.abs(margin - 0.5) < 1e-2)] += 0.05
    h, eps = 0.5, 1e-6
    value, d1, d2 = second_order(loss, p, y, smoothing=h)
    up, down = second_order(loss, p + eps, y, h), second_order(loss, p - eps, y, h)
    np.testing.assert_allclose(d1, (up[0] - down[0]) / (2 * eps), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d2, (up[1] - down[1]) / (2 * eps), rtol=1e-5, atol=1e-5)
    if loss == "hinge":  # below the hinge, by at most h/2
        hinge = np.maximum(1 - y * p, 0)
        assert np.all(value <= hinge + 1e-12) and np.all(value >= hinge - h / 2 - 1e-12)


@pytest.mark.parametrize(
    "loss,ref,rel",
    [
        ("log_loss", lambda C: LogisticRegression(C=C, solver="liblinear", tol=1e-10), 1e-7),
        ("squared_hinge", lambda C: LinearSVC(C=C, loss="squared_hinge", dual=False, tol=1e-10), 1e-7),
        ("hinge", lambda C: LinearSVC(C=C, loss="hinge", dual=True, tol=1e-10, max_iter=200000), 1e-3),
    ],
)
def test_newton_reaches_sklearn_optimum(loss, ref, rel):
    # The Newton solver is exact: it reaches the optimum to `rel` (the smoothed
    # hinge to its tol 1e-3 relative estimated gap) in a few passes.
    X, y = blobs(n=3000, d=10)
    alpha = 1e-3
    est = StreamingSGDClassifier(loss, alpha=alpha, solver="newton", max_iter=60,
                                 tol=1e-9 if rel < 1e-3 else 1e-3).fit(X, y)
    opt = ref(1 / (alpha * X.shape[0])).fit(X, y)
    f_opt = objective_of(est, X, y, opt.coef_, opt.intercept_)
    assert f_opt * (1 - 1e-9) <= est.objective_ * (1 + 1e-9) and est.objective_ <= f_opt * (1 + rel), (
        est.objective_, f_opt)
    assert est.objective_ == pytest.approx(est.objective(X, y), rel=1e-12)
    assert est.objective_path_[-1] == est.objective_ and est.n_iter_ == len(est.objective_path_)
    assert est.n_iter_ <= (8 if loss != "hinge" else 30)
    assert 0 <= est.gap_ <= max(1e-9, 1e-3 if loss == "hinge" else 1e-9) * est.objective_ * 1.0001


def test_newton_ignores_row_order_and_chunking():
    # Rows sorted by label, in 4 chunks (one class per chunk, as KDD99's runs of
    # one attack type): parameter averaging is biased there (docs/sgd.md), the
    # Newton passes are sums over all rows and give the numpy model again.
    X, y = blobs(n=4000, d=6)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    kw = {"alpha": 1e-3, "solver": "newton", "tol": 1e-10, "max_iter": 30}
    ref = StreamingSGDClassifier("log_loss", **kw).fit(X, y)
    est = StreamingSGDClassifier("log_loss", **kw).fit(da.from_array(X, chunks=(1000, -1)), y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-8, atol=1e-10)
    sgd = StreamingSGDClassifier("log_loss", alpha=1e-3, max_iter=6, tol=None).fit(
        da.from_array(X, chunks=(1000, -1)), y)
    assert est.objective_ < sgd.objective_


@pytest.mark.parametrize("loss", ["log_loss", "hinge"])
def test_newton_makes_the_features_in_its_tasks(loss, monkeypatch):
    # Z = rff.transform(X): each Newton pass reduces over X, the features made in
    # FUSED_SUB_BLOCK-row sub-blocks inside the task; same model as over the stored
    # blocks of Z + 0 up to the float32 rounding of the sub-block products
    from rfstream.features.fused import FUSED_SUB_BLOCK

    X, y = blobs(n=3 * FUSED_SUB_BLOCK + 700, d=5, noise=0.5)
    Xd = da.from_array(X, chunks=(len(X) // 2 + 1, -1))  # 2 blocks of 2 sub-blocks each
    rff = RandomFourierFeatures(90, gamma=0.3, random_state=4).fit(Xd)
    Z = rff.transform(Xd)
    import rfstream.features.fused as fused_module

    calls = []
    original = fused_module.fused_chunk
    monkeypatch.setattr(fused_module, "fused_chunk",
                        lambda *a, **k: calls.append(len(a[0])) or original(*a, **k))
    kw = {"alpha": 1e-3, "solver": "newton", "max_iter": 8, "tol": None, "class_weight": "balanced"}
    with connect("threads"):
        fused = StreamingSGDClassifier(loss, **kw).fit(Z, y)
        assert calls and max(calls) > FUSED_SUB_BLOCK  # row blocks of several sub-blocks
        n_calls = len(calls)
        plain = StreamingSGDClassifier(loss, **kw).fit(Z + 0, y)
        assert len(calls) == n_calls  # stored features: the plain chunk function
    # (near the optimum, whether one more step still decreases f is float rounding:
    # the paths may differ in length by a pass, not in value)
    assert abs(fused.n_iter_ - plain.n_iter_) <= 1
    np.testing.assert_allclose(fused.objective_path_[:4], plain.objective_path_[:4], rtol=1e-6)
    np.testing.assert_allclose(fused.objective_, plain.objective_, rtol=1e-6)
    np.testing.assert_allclose(fused.coef_, plain.coef_, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("kw", [
    {"loss": "hinge"},
    {"loss": "log_loss", "early_stopping": True},  # held-out rows: features made apart
    {"loss": "squared_hinge", "chunks_per_round": 1, "average": False},
    {"regression": True},
])
def test_sgd_epochs_make_the_features_in_their_tasks(kw, monkeypatch):
    # Z = rff.transform(X): each epoch reduces over X (with Z's row chunks: the averaged
    # model depends on them) and makes the features of each window of mini-batches in the
    # task; the held-out rows and the evaluation pass are made in sub-blocks.  Same model as
    # over the stored blocks of Z + 0: the same block function per row, the same steps.  Only
    # float32 rounding can differ (the map's GEMM on a window against a whole block), about
    # 1e-7 of each feature, and the incoming model is scored per window instead of per
    # block (the objective's float64 sum in another order).
    from rfstream.features.fused import FUSED_SUB_BLOCK
    import rfstream.solvers.sgd.epochs as epochs_module

    kw = dict(kw)
    regression = kw.pop("regression", False)
    X, y = blobs(n=2 * FUSED_SUB_BLOCK + 900, d=5, noise=0.5)
    Xd = da.from_array(X, chunks=(FUSED_SUB_BLOCK + 1000, -1))  # a short last block, kept
    rff = RandomFourierFeatures(90, gamma=0.3, random_state=4).fit(Xd)
    Z = rff.transform(Xd)
    target = X[:, 0] - X[:, 1] ** 2 if regression else y
    passes = []
    original = epochs_module.compute
    monkeypatch.setattr(epochs_module, "compute", lambda *c: passes.extend(c) or original(*c))
    make = (lambda: StreamingSGDRegressor(alpha=1e-3, max_iter=3, tol=None)) if regression else (
        lambda: StreamingSGDClassifier(alpha=1e-3, max_iter=3, tol=None, **kw))
    with connect("threads"):
        fused = make().fit(Z, target)
        assert passes and all(Z.name not in p.__dask_graph__().layers for p in passes)
        assert all(Xd.name in p.__dask_graph__().layers for p in passes)  # X as chunked, no rechunk
        plain = make().fit(Z + 0, target)
    np.testing.assert_allclose(fused.coef_, plain.coef_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fused.intercept_, plain.intercept_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fused.objective_path_, plain.objective_path_, rtol=1e-6)
    assert fused.t_ == plain.t_ and fused.n_samples_seen_ == plain.n_samples_seen_
    if kw.get("early_stopping"):
        assert np.isfinite(fused.validation_score_)
        assert fused.validation_score_ == pytest.approx(plain.validation_score_, abs=1e-3)


def test_newton_ovr_class_weight_and_no_intercept():
    # OvR: K independent binary problems, each row weighted by its own class's
    # weight: the sum of K weighted binary logistic regressions.
    X, y = blobs(n=1500, d=5, n_classes=3)
    alpha, cw = 1e-3, {0: 2.0, 1: 1.0, 2: 0.5}
    C = 1 / (alpha * X.shape[0])
    est = StreamingSGDClassifier("log_loss", alpha=alpha, class_weight=cw, solver="newton",
                                 tol=1e-10, max_iter=30).fit(X, y)
    sw = np.array([cw[c] for c in y])
    refs = [LogisticRegression(C=C, solver="liblinear", tol=1e-10).fit(X, y == k, sample_weight=sw)
            for k in range(3)]
    f_opt = objective_of(est, X, y, np.vstack([r.coef_ for r in refs]),
                          np.concatenate([r.intercept_ for r in refs]))
    assert f_opt * (1 - 1e-7) <= est.objective_ <= f_opt * (1 + 1e-7)
    assert np.mean(est.predict(X) == y) > 0.5  # 3 classes, noisy
    # without intercept: LogisticRegression(fit_intercept=False) with the same C
    est = StreamingSGDClassifier("log_loss", alpha=alpha, fit_intercept=False, solver="newton",
                                 tol=1e-12, max_iter=30).fit(X, y == 1)
    ref = LogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=1000).fit(X, y == 1)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-5, atol=1e-7)
    assert np.all(est.intercept_ == 0)


def test_newton_errors():
    X, y = blobs(n=200, n_classes=3)
    with pytest.raises(ValueError, match="solver"):
        StreamingSGDClassifier(solver="lbfgs").fit(X, y)
    with pytest.raises(ValueError, match="solver='newton' supports.*multinomial"):
        StreamingSGDClassifier("log_loss", multi_class="multinomial", solver="newton").fit(X, y)
    with pytest.raises(ValueError, match="early_stopping=True needs solver='sgd'"):
        StreamingSGDClassifier(early_stopping=True, solver="newton").fit(X, y)
    with pytest.raises(ValueError, match="partial_fit needs solver='sgd'"):
        StreamingSGDClassifier(solver="newton").partial_fit(X, y, classes=[0, 1, 2])
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="Newton stopped after max_iter=1"):
        StreamingSGDClassifier("log_loss", solver="newton", max_iter=1, tol=1e-12).fit(X, y)
    X[7, 1] = np.nan  # dask input skips sklearn's check: the pass itself names the problem
    with pytest.raises(ValueError, match="X or y contains NaN or infinity"):
        StreamingSGDClassifier(solver="newton").fit(da.from_array(X, chunks=50), da.from_array(y, chunks=50))


def test_batch_windows_make_each_window_once_and_refuse_another_order():
    from rfstream.solvers.sgd.epochs import BatchWindows

    order = np.random.default_rng(0).permutation(50)
    x = np.arange(50.0)[:, None] * np.ones((1, 3))
    calls = []

    def made(ix):
        calls.append(ix.size)
        return x[ix] * 2

    take = BatchWindows(made, order, window=32)
    batches = [order[i : i + 16] for i in range(0, 50, 16)]
    for idx in batches:
        np.testing.assert_array_equal(take(idx), x[idx] * 2)
    assert calls == [32, 18]  # two windows for four batches, the last one short
    with pytest.raises(ValueError, match="order"):
        BatchWindows(made, order, window=32)(order[16:32])
