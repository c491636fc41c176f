"""The ridge solvers' pass as a graph: one reduction with the feature map fused into it.

The Gram pass (and CG's passes, and prediction) make the features inside their tasks
from the input rows; these tests read the graphs and compare the fused features with
reducing over a stored ``Z``.  The mathematics of the solver: tests/solvers/ridge/test_ridge.py.
"""
import collections

import dask
import dask.array as da
import numpy as np
import pytest
from helpers.ridge_data import classification_data, rel

import rfstream.solvers.ridge.estimators as ridge_module
import rfstream.solvers.targets as targets_module
from rfstream import (
    RandomFourierFeatures,
    Standardizer,
    StreamingRidge,
    StreamingRidgeClassifier,
)
from rfstream.features import ArcCosineFeatures, feature_source
from rfstream.triangles import packed_size


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


def _travelling(layout):
    """The length of a Gram pass's partials over several row blocks: each symmetric part
    (Z'Z, Y'Y) as its upper triangle (rfstream.triangles)."""
    return packed_size(layout.size, ridge_module.symmetric_spans(layout, 1))


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
    assert reduction.shape == (_travelling(ridge_module.gram_layout(64, 1, 5)),)  # nothing with n in it
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
    assert rel(est.coef_, ref.coef_) < 1e-4


@pytest.mark.parametrize("Est", [StreamingRidge, StreamingRidgeClassifier])
def test_features_computed_in_the_pass_equal_reducing_over_z(Est):
    # Z = rff.transform(X) is reduced over X with the features made in
    # SUB_BLOCK-row sub-blocks inside the task, without their constant; Z + 0
    # (no source) is reduced as it is, in SUB_BLOCK-row sub-blocks: same model
    # up to float32 rounding of the sub-block sums.  Chunks wide enough for several
    # sub-blocks in each of the 5 CV folds (whose sizes differ).
    from rfstream.features.fused import FUSED_SUB_BLOCK
    from rfstream.solvers.ridge.gram import SUB_BLOCK

    rng = np.random.default_rng(3)
    n = 12 * max(SUB_BLOCK, FUSED_SUB_BLOCK) + 123
    X = da.from_array(rng.normal(size=(n, 6)), chunks=(n // 2, 6))
    y = X[:, 0] - X[:, 1] ** 2 + 0.1 * da.from_array(rng.normal(size=n), chunks=n // 2)
    if Est is StreamingRidgeClassifier:
        y = (y > 0).astype(int) + (y > 1).astype(int)
    rff = RandomFourierFeatures(96, gamma=0.3, random_state=0).fit(X)
    Z = rff.transform(X)
    fn, rows = feature_source(Z)
    # the cosines, their sqrt(2/D) applied to the Gram's partials (ScaledBlock)
    assert rows.name == X.name and fn.unscaled.__self__ is rff and fn.scale == np.sqrt(2 / 96)
    np.testing.assert_array_equal(fn(X[:100].compute()), Z[:100].compute())
    assert feature_source(Z + 0) is None and feature_source(Z.astype(np.float64)) is None
    fused = Est(alpha=[0.01, 1.0]).fit(Z, y)
    plain = Est(alpha=[0.01, 1.0]).fit(Z + 0, y)
    assert fused.alpha_ == plain.alpha_
    assert rel(fused.coef_, plain.coef_) < 1e-4
    np.testing.assert_allclose(fused.cv_mse_, plain.cv_mse_, rtol=1e-4)


def test_the_cosines_over_whole_rows_give_the_same_partials():
    # random Fourier features tell the Gram their projection and np.cos apart (whole_rows): it
    # projects into its [Z, Y, 1] buffer and takes the cosines of whole rows, [Y, 1] written
    # after: bit for bit the partials of the map's own cosines; weighted rows, sub-blocks of
    # two sizes, a sparse block (whose projection is a fresh array, copied in)
    import scipy.sparse as sp

    from rfstream.features.fused import unscaled_block, whole_rows
    from rfstream.solvers.ridge.gram import SUB_BLOCK, _fused_fold

    rng = np.random.default_rng(11)
    x = rng.normal(size=(2 * SUB_BLOCK + 5, 7))
    Y = rng.normal(size=(x.shape[0], 3)).astype(np.float32)
    root = np.sqrt(rng.uniform(0.5, 2.0, size=x.shape[0]))
    block = RandomFourierFeatures(300, gamma=0.2, random_state=0).fit(x)._fused_block()
    features, _ = unscaled_block(block)
    project, ufunc = whole_rows(block)
    assert ufunc is np.cos and whole_rows(ArcCosineFeatures(8).fit(x)._fused_block()) is None
    for rows in (x, sp.csr_matrix(np.where(np.abs(x) > 1, x, 0.0))):
        folds = []
        for split in (None, (project, ufunc)):
            fold = {"G": np.zeros((300, 300)), "C": np.zeros((300, 3)), "s": np.zeros(300)}
            _fused_fold(rows, Y, fold, {}, features, np.dtype("float32"), root, split)
            folds.append(fold)
        for name in ("G", "C", "s"):
            np.testing.assert_array_equal(folds[1][name], folds[0][name])


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
    assert rel(fused.coef_, ref.coef_) < tol
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
    # float64 there; Z + 0 is reduced over its stored blocks.  The pass's features are the
    # float32 cosines, their sqrt(2/D) applied to the float64 partials; Z's are the float32
    # rounding of that product: features equal to 6e-8, summed in another order (the
    # float32 phase's rounding may differ by a few passes; the float64 finish meets tol on
    # the true residual): solutions equal to 1e-7, and the CG solution equals the Gram pass's.
    import rfstream.solvers.ridge.cg as cg_module
    import rfstream.solvers.ridge.cg as cg_stats_module
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
    assert len(passes) == fused.n_iter_ + plain.n_iter_ and abs(fused.n_iter_ - plain.n_iter_) <= 4
    assert Z.name in passes[-1].__dask_graph__().layers  # (the check can fail)
    assert rel(fused.coef_, plain.coef_) < 1e-7
    np.testing.assert_allclose(fused.intercept_, plain.intercept_, rtol=1e-7, atol=1e-9)
    gram = Est(alpha=1.0, solver="gram").fit(Z, yn)
    assert rel(fused.coef_, gram.coef_) < 1e-5  # float32 Gram sub-block sums vs float64 products


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
    assert rel(est.coef_, ref.coef_) < 1e-8


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
    assert rel(fused.coef_, ref.coef_) < 1e-4
    # prediction makes the features of the sparse rows in the task as well
    np.testing.assert_allclose(ref.predict(rff.transform(X)).compute(), ref.predict(rff.transform(Xn)),
                               rtol=1e-6, atol=1e-6)


def test_classifier_fit_dask_is_two_small_computes(monkeypatch):
    # classes (one da.unique reduction) and the Gram pass: two computes.
    X, y = classification_data(3, n=400)
    captured = _capture_reduction(monkeypatch)
    StreamingRidgeClassifier().fit(da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100))
    assert len(captured) == 2
    # the unique labels (unknown length until computed) and the packed partials
    assert all(c.ndim == 1 for c in captured)
    assert captured[1].shape == (_travelling(ridge_module.gram_layout(X.shape[1], 3, 1)),)
