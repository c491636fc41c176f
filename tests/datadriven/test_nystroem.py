"""NystroemFeatures (rfstream.datadriven.nystroem): the landmark pass, the mathematics, scikit-learn.

The contract every map keeps (numpy/dask, chunkings, processes, save/load,
check_estimator with the default parameters, bad input) is tested once for all maps in
test_contract.py.  ``python tests/datadriven/test_nystroem.py`` prints the comparison with
scikit-learn's ``Nystroem`` that docs/nystroem.md reports.
"""
import sys
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from rfstream import Standardizer, StreamingRidgeClassifier
from rfstream.catalog import FEATURES, make_model
from rfstream.datadriven import NystroemFeatures
from rfstream.datadriven.nystroem import inverse_sqrt, sample_landmarks
from rfstream.datasets import train_test
from rfstream.features import feature_source
from rfstream.kernels import KERNELS, auto_gamma, kernel_matrix
from rfstream.metrics import kernel_approximation_error
from rfstream.random import STREAM_NYSTROEM_LANDMARKS, row_uniform


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(300, 4))


# ------------------------------------------------------------------ the landmark pass
def test_landmarks_are_the_rows_with_the_smallest_keys(X):
    keys = row_uniform(7, STREAM_NYSTROEM_LANDMARKS, 0, X.shape[0])
    expected = np.sort(np.argsort(keys)[:25])
    index, rows = sample_landmarks(X, 25, 7)
    np.testing.assert_array_equal(index, expected)
    np.testing.assert_array_equal(rows, X[expected])  # gathered exactly
    index, rows = sample_landmarks(X, 1000, 7)  # more than the rows: all of them, in order
    np.testing.assert_array_equal(index, np.arange(X.shape[0]))
    np.testing.assert_array_equal(rows, X)


@pytest.mark.parametrize("chunks", [(300,), (10,) * 30, (1, 99, 0, 200), (7,) * 42 + (6,)])
@pytest.mark.parametrize("split_every", [None, 2])
def test_landmarks_do_not_depend_on_chunks_or_reduction_tree(X, chunks, split_every):
    # chunks smaller than k, an empty one, a tree of fan-in 2: the same rows, bit for bit
    ref = sample_landmarks(X, 25, 3)
    got = sample_landmarks(da.from_array(X, chunks=(chunks, 4)), 25, 3, split_every=split_every)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
    sparse = sample_landmarks(sp.csr_matrix(X), 25, 3)
    for a, b in zip(sparse, ref):
        np.testing.assert_array_equal(a, b)


def test_fit_reads_every_block_once(X):
    reads = []

    def read(block):
        reads.append(block.shape[0])
        return block

    Xd = da.from_array(X, chunks=(50, 4)).map_blocks(read, meta=np.empty((0, 4)))
    with dask.config.set(scheduler="synchronous"):
        NystroemFeatures(20, gamma=0.3, random_state=0).fit(Xd)
    assert reads == [50] * 6  # one pass (gamma="auto" adds a gather of its sampled rows)


def test_landmarks_are_a_uniform_sample_without_replacement():
    # each of n rows is a landmark with probability p = k/n: over S seeds its count has
    # mean S p and, a draw being k distinct rows, covariance S p (1 - p) n / (n - 1) (I - 11'/n);
    # the sum of squared deviations over that variance is chi-square with n - 1 degrees of
    # freedom (the counts add up to S k): fail above its 99.9% quantile
    n, k, S = 40, 8, 3000
    rows = np.arange(n, dtype=np.float64)[:, None]  # each row holds its own index
    counts = np.zeros(n)
    for seed in range(S):
        index, chosen = sample_landmarks(rows, k, seed)
        assert len(np.unique(index)) == k  # without replacement, exactly k
        np.testing.assert_array_equal(chosen[:, 0], index)
        counts[index] += 1
    p = k / n
    chi2 = np.sum((counts - S * p) ** 2) / (S * p * (1 - p) * n / (n - 1))
    assert chi2 < stats.chi2.ppf(0.999, n - 1), counts


# ------------------------------------------------------------------ the mathematics
@pytest.mark.parametrize("kernel", KERNELS)
def test_features_reproduce_the_kernel_against_the_landmarks(X, kernel):
    # z(x)' z(l) = k(x, L) K_mm^+ K_mm e_l = k(x, l) for a full-rank K_mm
    gamma = 0.3
    nys = NystroemFeatures(40, kernel=kernel, gamma=gamma, random_state=0, dtype="float64").fit(X)
    assert nys.rank_ == 40
    Z, ZL = nys.transform(X), nys.transform(nys.components_)
    np.testing.assert_allclose(Z @ ZL.T, kernel_matrix(X, nys.components_, kernel, gamma), atol=1e-10)
    # K - Z Z' is the Schur complement of K_mm: positive semi-definite (to rounding)
    residual = kernel_matrix(X, None, kernel, gamma) - Z @ Z.T
    assert np.linalg.eigvalsh(residual).min() > -1e-9


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_row_a_landmark_gives_the_exact_kernel_with_a_warning(X, kernel):
    with pytest.warns(UserWarning, match=r"n_components=100 > n_samples=60: every row is a landmark"):
        nys = NystroemFeatures(kernel=kernel, gamma=0.3, random_state=0, dtype="float64").fit(X[:60])
    Z = nys.transform(X[:60])
    assert Z.shape == (60, 60)
    np.testing.assert_allclose(Z @ Z.T, kernel_matrix(X[:60], None, kernel, 0.3), atol=1e-10)
    with pytest.warns(UserWarning, match=r"n_components=100 > n_samples=60"):  # the same on dask
        lazy = NystroemFeatures(kernel=kernel, gamma=0.3, random_state=0, dtype="float64").fit(
            da.from_array(X[:60], chunks=25))
    np.testing.assert_array_equal(lazy.normalization_, nys.normalization_)


def test_duplicated_landmarks_are_dropped_by_the_rank_cutoff():
    # 5 distinct rows repeated: K_mm has rank 5 and eigenvalues ~1e-16 around 0, which
    # clipping at 1e-12 (scikit-learn) would weight by 1e6; the pseudo-inverse drops them
    distinct = np.random.default_rng(1).normal(size=(5, 3))
    X = np.repeat(distinct, 40, axis=0)
    nys = NystroemFeatures(30, gamma=0.5, random_state=0, dtype="float64").fit(X)
    assert nys.rank_ == 5
    Z = nys.transform(X)
    assert np.all(np.isfinite(Z))
    np.testing.assert_allclose(Z @ Z.T, kernel_matrix(X, None, "gaussian", 0.5), atol=1e-10)


def test_inverse_sqrt_is_the_pseudo_inverse_square_root():
    A = np.random.default_rng(2).normal(size=(6, 4))
    K = A @ A.T  # rank 4
    R, rank = inverse_sqrt(K)
    assert rank == 4
    np.testing.assert_allclose(R, R.T, atol=1e-12)
    np.testing.assert_allclose(R @ K @ R, np.linalg.pinv(K) @ K, atol=1e-10)  # projector onto range(K)
    np.testing.assert_allclose(R @ R, np.linalg.pinv(K), atol=1e-10)


def test_float32_output_is_the_float64_block_rounded_once(X):
    a = NystroemFeatures(50, gamma=0.3, random_state=0).fit(X)
    b = NystroemFeatures(50, gamma=0.3, random_state=0, dtype="float64").fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X).astype(np.float32))
    assert a._block(X[:0]).shape == (0, 50)  # an empty dask block


def test_a_large_block_is_made_in_sub_blocks_with_the_same_features():
    # 9,000 rows: three sub-blocks of 3,000 (FUSED_SUB_BLOCK = 4096); float64 rounding only
    X = np.random.default_rng(3).normal(size=(9000, 4))
    nys = NystroemFeatures(50, gamma=0.3, random_state=0, dtype="float64").fit(X)
    pieces = np.concatenate([nys.transform(X[i:i + 1000]) for i in range(0, 9000, 1000)])
    np.testing.assert_allclose(nys.transform(X), pieces, rtol=0, atol=1e-12)
    buf = np.full((9000, 50), np.nan)
    assert nys._block_into(X, buf) is buf and np.array_equal(buf, nys.transform(X))


def test_solver_passes_make_the_features_in_their_tasks(X):
    # the fused path: a ridge fit on transform(dask X) computes the features inside its
    # own tasks; it equals the fit on the stored features.  float64 features: the Gram's
    # products are then float64 too, and only their grouping differs (float32 products
    # would differ by 1e-7 relative, times the condition number of the Gram)
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    Xd = da.from_array(X, chunks=(70, 4))
    nys = NystroemFeatures(30, gamma=0.3, random_state=0, dtype="float64").fit(Xd)
    Z = nys.transform(Xd)
    assert feature_source(Z) is not None
    fused = StreamingRidgeClassifier(alpha=1.0).fit(Z, da.from_array(y, chunks=70))
    stored = StreamingRidgeClassifier(alpha=1.0).fit(nys.transform(X), y)
    np.testing.assert_allclose(fused.coef_, stored.coef_, rtol=1e-9, atol=1e-12)


def test_registered_and_fitted_in_a_pipeline(X):
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    assert FEATURES["nystroem"] is NystroemFeatures
    model = make_model("classification", features="nystroem",
                       feature_params={"n_components": 50, "gamma": "auto", "random_state": 0})
    Xd = da.from_array(X, chunks=(100, 4))
    model.fit(Xd, da.from_array(y, chunks=100))
    assert model[1].gamma_ > 0 and model[1].components_.shape == (50, 4)
    assert np.mean(model.predict(Xd).compute() != y) < 0.25  # XOR-like: no linear fit does this


# ------------------------------------------------------------------ against scikit-learn
def approximation_errors(X, kernel, n_components, seeds, *, gamma):
    """``(rfstream, scikit-learn)`` arrays of ||K - ZZ'||_F / ||K||_F, one per seed.

    Both maps get the same kernel, gamma, number of components and seed; both errors of
    a seed are measured on the same 1000 sampled rows (seed 1000 + seed).
    """
    from sklearn.kernel_approximation import Nystroem

    sk_kernel = {"gaussian": "rbf", "laplacian": "laplacian"}[kernel]
    ours, theirs = [], []
    for seed in seeds:
        nys = NystroemFeatures(n_components, kernel=kernel, gamma=gamma, random_state=seed).fit(X)
        sk = Nystroem(kernel=sk_kernel, gamma=gamma, n_components=n_components, random_state=seed).fit(X)
        ours.append(kernel_approximation_error(X, nys, random_state=1000 + seed))
        theirs.append(kernel_approximation_error(X, sk, kernel=kernel, gamma=gamma,
                                                 random_state=1000 + seed))
    return np.array(ours), np.array(theirs)


def magic_train(workdir):
    """The shipped MAGIC training split (14,238 x 10), standardized, in memory."""
    X = train_test("magic_demo", workdir)[0]
    return Standardizer().fit_transform(X).compute()


@pytest.fixture(scope="module")
def magic(tmp_path_factory):
    return magic_train(tmp_path_factory.mktemp("magic"))


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_approximation_no_worse_than_scikit_learn_on_magic(magic, kernel):
    # Paired over seeds: d_s = ours_s - sklearn_s.  Both maps sample landmarks uniformly,
    # so E[d] = 0; "no worse" fails when mean(d) exceeds the one-sided 99.9% quantile of
    # Student's t with S - 1 degrees of freedom times the standard error of mean(d):
    # the margin is the measured seed-to-seed spread, not a chosen number.
    gamma = auto_gamma(magic, kernel, random_state=0)
    S = 20
    ours, theirs = approximation_errors(magic, kernel, 100, range(S), gamma=gamma)
    d = ours - theirs
    margin = stats.t.ppf(0.999, S - 1) * d.std(ddof=1) / np.sqrt(S)
    assert d.mean() <= margin, (ours.mean(), theirs.mean(), margin)
    assert ours.max() < 0.5  # a real approximation, not two equally broken ones


if __name__ == "__main__":  # the table of docs/nystroem.md
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        Xm = magic_train(tmp)
        seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
        print("| kernel | m | rfstream NystroemFeatures | scikit-learn Nystroem | difference (paired) |")
        print("|---|---|---|---|---|")
        for kern in ("gaussian", "laplacian"):
            g = auto_gamma(Xm, kern, random_state=0)
            for m in (100, 300, 1000):
                a, b = approximation_errors(Xm, kern, m, seeds, gamma=g)
                diff = a - b
                se = diff.std(ddof=1) / np.sqrt(len(diff))
                print(f"| {kern} (gamma {g:.3g}) | {m} | {a.mean():.4f} +- {a.std(ddof=1):.4f} "
                      f"| {b.mean():.4f} +- {b.std(ddof=1):.4f} | {diff.mean():+.4f} +- {se:.4f} |")
