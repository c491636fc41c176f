"""KernelPCA over random features (rfstream/solvers/kpca.py): the mathematics and the passes.

Tolerances.  With float64 features the Gram method is the explicit covariance's
eigendecomposition up to float64 rounding of sums over a few hundred rows (1e-8 is a
wide margin).  Against scikit-learn's exact kernel PCA the eigenvalues must satisfy
Weyl's inequality with the random-feature error measured on the same rows, and the
subspaces a floor measured with margin (0.989 to 0.997 over four seeds, floor 0.9).
"""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import KernelPCA as ExactKernelPCA
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import check_estimator

from rfstream import (
    KernelPCA,
    RandomFourierFeatures,
    Standardizer,
    StreamingRidge,
    load_model,
    save_model,
)
from rfstream.cluster import compute, run_context


def _data(n=400, d=4, seed=1):
    # anisotropic: distinct leading eigenvalues, so the components are well defined
    return np.random.default_rng(seed).normal(size=(n, d)) * np.array([2.0, 1.3, 0.8, 0.4, 0.3, 0.2][:d])


def _rff(D=120, gamma=0.2, dtype="float64"):
    return RandomFourierFeatures(D, gamma=gamma, random_state=0, dtype=dtype)


def canonical_correlations(A, B):
    """Cosines of the principal angles between the column spaces of the centred A and B."""
    qa, _ = np.linalg.qr(A - A.mean(axis=0))
    qb, _ = np.linalg.qr(B - B.mean(axis=0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def test_gram_is_the_explicit_covariance_eigendecomposition():
    X = _data()
    Z = _rff().fit(X).transform(X)
    kpca = KernelPCA(6).fit(Z)
    C = np.cov(Z.T, bias=True)  # (Z - mu)'(Z - mu) / n
    values, vectors = np.linalg.eigh(C)
    values, vectors = values[::-1][:6], vectors[:, ::-1][:, :6].T
    vectors *= np.sign(vectors[np.arange(6), np.argmax(np.abs(vectors), axis=1)])[:, None]
    assert kpca.method_ == "gram" and kpca.n_components_ == 6
    np.testing.assert_allclose(kpca.explained_variance_, values, rtol=1e-8)
    np.testing.assert_allclose(kpca.components_, vectors, atol=1e-8)
    np.testing.assert_allclose(kpca.mean_, Z.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(kpca.total_variance_, np.trace(C), rtol=1e-10)
    np.testing.assert_allclose(kpca.explained_variance_ratio_, values / np.trace(C), rtol=1e-8)
    np.testing.assert_allclose(kpca.transform(Z), (Z - Z.mean(axis=0)) @ vectors.T, atol=1e-8)
    # the map inside: fitted on X, the same components
    inner = KernelPCA(6, features=_rff()).fit(X)
    np.testing.assert_allclose(inner.components_, kpca.components_, atol=1e-10)
    assert inner.n_features_in_ == 4 and inner.features_.n_components == 120


def test_numpy_and_dask_agree_and_dask_stays_lazy():
    X = _data()
    Xd = da.from_array(X, chunks=130)  # uneven blocks
    ref = KernelPCA(5, features=_rff()).fit(X)
    with run_context(progress="never") as run:
        lazy = KernelPCA(5, features=_rff()).fit(Xd)
    assert run.passes == 1  # the Gram pass, the features made in its tasks
    np.testing.assert_allclose(lazy.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(lazy.explained_variance_, ref.explained_variance_, rtol=1e-10)
    T = lazy.transform(Xd)
    assert isinstance(T, da.Array) and T.chunks == (Xd.chunks[0], (5,)) and T.dtype == np.float64
    assert T.name == lazy.transform(Xd).name  # deterministic graph name
    np.testing.assert_allclose(compute(T), ref.transform(X), atol=1e-10)
    # after a map in a Pipeline: Z = map.transform(X) carries its source, features made in the tasks
    rff = _rff().fit(X)
    piped = KernelPCA(5).fit(rff.transform(Xd))
    np.testing.assert_allclose(piped.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(compute(piped.transform(rff.transform(Xd))), ref.transform(X), atol=1e-10)


def test_randomized_agrees_with_gram_in_two_plus_q_passes():
    X = _data(n=500, d=5)
    Xd = da.from_array(X, chunks=200)
    gram = KernelPCA(4, features=_rff(200)).fit(X)
    with run_context(progress="never") as run:
        rand = KernelPCA(4, features=_rff(200), method="randomized", n_power_iter=2).fit(Xd)
    assert run.passes == 2 + 2 and rand.method_ == "randomized"
    # leading eigenvalues: a Rayleigh-Ritz estimate from below, close after 3 products with C
    np.testing.assert_allclose(rand.explained_variance_, gram.explained_variance_, rtol=1e-3)
    assert np.all(rand.explained_variance_ <= gram.explained_variance_ * (1 + 1e-10))
    assert canonical_correlations(rand.components_.T, gram.components_.T).min() > 0.999
    np.testing.assert_allclose(rand.total_variance_, gram.total_variance_, rtol=1e-10)  # exact


def test_variance_keeps_the_fewest_components_reaching_the_fraction():
    Z = _rff(60).fit(_data()).transform(_data())
    full = KernelPCA(60).fit(Z)
    cumulative = np.cumsum(full.explained_variance_ratio_)
    kpca = KernelPCA(60, variance=0.9).fit(Z)
    k = kpca.n_components_
    assert cumulative[k - 1] >= 0.9 > cumulative[k - 2]
    assert kpca.components_.shape == (k, 60) and kpca.transform(Z).shape == (400, k)
    assert KernelPCA(3, variance=0.99).fit(Z).n_components_ == 3  # n_components is the cap


def test_against_scikit_learn_exact_kernel_pca():
    # 600 rows: sklearn diagonalizes the 600 x 600 centred kernel matrix K_c; its
    # eigenvalues / n are those of the features' covariance up to the random-feature error
    X, gamma, n = _data(n=600), 0.1, 600
    exact = ExactKernelPCA(5, kernel="rbf", gamma=gamma)
    scores = exact.fit_transform(X)
    rff = RandomFourierFeatures(2000, gamma=gamma, random_state=0, dtype="float64").fit(X)
    # randomized: 4 passes of 600 x 2000 x 15 products instead of a 2000 x 2000 eigh (2 s on a
    # loaded 2-core runner); its eigenvalues are the Gram's to 1e-6 here, the bound's margin 4x
    kpca = KernelPCA(5, features=rff, method="randomized").fit(X)
    ours, theirs = kpca.explained_variance_, exact.eigenvalues_ / n
    # Hoffman-Wielandt: ||lambda(H ZZ' H / n) - lambda(H K H / n)||_2 <= ||H (ZZ' - K) H||_F / n,
    # on every eigenvalue and so on the top 5 (0.003 against a bound of 0.012 here)
    E = rff.transform(X) @ rff.transform(X).T - rbf_kernel(X, gamma=gamma)
    E = E - E.mean(axis=0) - E.mean(axis=1)[:, None] + E.mean()  # H E H
    assert np.linalg.norm(ours - theirs) <= np.linalg.norm(E) / n
    assert np.all(np.abs(ours / theirs - 1) < 0.15)
    # the top-5 score subspaces on the same rows: every canonical correlation > 0.9
    assert canonical_correlations(kpca.transform(X), scores).min() > 0.9


def test_pipeline_map_kpca_ridge_fits_and_predicts():
    X = _data()
    y = np.sin(X[:, 0]) + X[:, 1] ** 2
    Xd, yd = da.from_array(X, chunks=150), da.from_array(y, chunks=150)
    model = Pipeline([("features", _rff(100)), ("kpca", KernelPCA(8)), ("solver", StreamingRidge(alpha=1e-3))])
    model.fit(Xd, yd)
    pred = model.predict(Xd)
    assert isinstance(pred, da.Array)
    numpy_model = Pipeline([("features", _rff(100)), ("kpca", KernelPCA(8)), ("solver", StreamingRidge(alpha=1e-3))])
    np.testing.assert_allclose(compute(pred), numpy_model.fit(X, y).predict(X), atol=1e-8)
    assert np.corrcoef(compute(pred), y)[0, 1] > 0.8  # 8 components carry the signal


def test_float32_sparse_and_reproducible():
    X = _data()
    Z = _rff(dtype="float32").fit(X).transform(X)
    kpca = KernelPCA(4).fit(Z)
    assert kpca.transform(Z).dtype == np.float32
    ref = KernelPCA(4).fit(Z.astype(np.float64))
    np.testing.assert_allclose(kpca.components_, ref.components_, atol=1e-4)
    rows = np.arange(4)
    assert np.all(kpca.components_[rows, np.argmax(np.abs(kpca.components_), axis=1)] > 0)
    np.testing.assert_array_equal(KernelPCA(4).fit(Z).components_, kpca.components_)
    # CSR features (random binning's kind): the same model as their dense copy
    S = sp.random(300, 40, density=0.2, format="csr", random_state=0) @ sp.diags(np.geomspace(4, 0.1, 40))
    dense = KernelPCA(3).fit(S.toarray())
    np.testing.assert_allclose(KernelPCA(3).fit(S).transform(S), dense.transform(S.toarray()), atol=1e-10)
    rand = KernelPCA(3, method="randomized").fit(S)
    np.testing.assert_allclose(rand.explained_variance_, dense.explained_variance_, rtol=1e-4)


def test_auto_method_and_memory_refusal():
    wide = da.from_array(np.random.default_rng(0).normal(size=(40, 9000)), chunks=(20, -1))
    assert KernelPCA(2, n_oversamples=2, n_power_iter=0).fit(wide).method_ == "randomized"  # D > 8192
    huge = da.zeros((10, 10**6), chunks=(10, 10**6))
    with pytest.raises(ValueError, match="Gram pass needs"):
        KernelPCA(2, method="gram").fit(huge)  # refused before the pass


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
@pytest.mark.parametrize("params", [{}, {"n_components": 3, "method": "randomized"}])
def test_check_estimator(params):
    # features=None: X are the features
    check_estimator(KernelPCA(**params))


def test_save_and_load_give_the_same_scores(tmp_path):
    # the catalog's shape: Standardizer -> map -> KernelPCA on the map's features
    X = _data()
    model = Pipeline([("standardize", Standardizer()), ("features", _rff()),
                      ("solver", KernelPCA(4, variance=0.5))]).fit(X)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.named_steps["solver"].n_components_ == model.named_steps["solver"].n_components_
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
