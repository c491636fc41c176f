"""NystroemFeatures(landmarks="leverage"): the scores, the weighted keyed sample, its passes.

The uniform landmarks and the map itself are tested in test_nystroem.py; the contract
every registered map keeps in test_contract.py (default parameters, i.e. uniform).
"""
import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from dask.base import tokenize
from scipy import stats

from rfstream import load_model, save_model
from rfstream.datadriven import NystroemFeatures
from rfstream.datadriven.leverage import leverage_scores, pilot_map, pilot_size, ridge_lambda, target_rank
from rfstream.datadriven.nystroem import row_keys, sample_landmarks
from rfstream.random import STREAM_NYSTROEM_LANDMARKS, row_uniform


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(400, 3))


def leverage(m=25, **params):
    return NystroemFeatures(m, gamma=0.4, landmarks="leverage", **{"random_state": 5, **params})


# ------------------------------------------------------------------ the scores
def test_scores_are_the_ridge_leverage_scores_of_the_pilot_features(X):
    # l_i = z_i' (Z'Z + lambda I)^{-1} z_i, here from float64 features and a solve; the task's
    # float32 features and factor agree to float32 rounding (relative 1e-7 times D0 terms)
    pilot = pilot_map(3, 25, "gaussian", 0.4, np.random.default_rng(1))
    assert pilot.n_components == pilot_size(25) == 256  # max(2m, 256)
    scores, lam, d_eff = leverage_scores(X, pilot, 25)
    Z = pilot.block(X).astype(np.float64)
    G = Z.T @ Z
    exact = np.einsum("ij,ji->i", Z, np.linalg.solve(G + lam * np.eye(G.shape[0]), Z.T))
    np.testing.assert_allclose(scores(X), exact, rtol=1e-3)
    np.testing.assert_allclose(exact.sum(), d_eff, rtol=1e-6)  # the scores add up to d_eff
    assert np.all((exact > 0) & (exact < 1))
    # lambda: Musco & Musco's (trace - top-k eigenvalues) / k, k = ceil(m / (4 ln m))
    s = np.sort(np.linalg.eigvalsh(G))[::-1]
    assert lam == pytest.approx((s.sum() - s[:2].sum()) / 2, rel=1e-6)  # k = ceil(25 / 12.9) = 2
    np.testing.assert_allclose(np.trace(G), X.shape[0], rtol=1e-5)  # ||z||^2 = 1 = k(x, x) for "cossin"


def test_target_rank_and_lambda_rule():
    assert [target_rank(m) for m in (1, 2, 25, 100, 300, 1000)] == [1, 1, 2, 6, 14, 37]
    assert ridge_lambda([10.0, 5.0, 3.0, 2.0], 2) == 10.0  # k = 1: (20 - 10) / 1
    assert ridge_lambda([10.0, 5.0, 3.0, 2.0, 0.0], 9) == 2.5  # k = 2: (20 - 15) / 2
    assert ridge_lambda([4.0, -1e-12, 0.0], 1) == pytest.approx(4e-10)  # no tail: floored at 1e-10 trace


def test_keys_are_exponential_draws_over_the_weights():
    x = np.arange(1.0, 11.0)[:, None]
    u = row_uniform(3, STREAM_NYSTROEM_LANDMARKS, 100, 110)
    np.testing.assert_array_equal(row_keys(x, 100, 3), u)  # uniform: the key is u itself
    np.testing.assert_allclose(row_keys(x, 100, 3, weights=lambda r: r[:, 0]), -np.log1p(-u) / x[:, 0])
    assert np.all(np.isfinite(row_keys(x, 100, 3, weights=lambda r: 0 * r[:, 0])))  # weight 0: floored


def test_one_landmark_is_drawn_with_probability_proportional_to_its_weight():
    # k = 1: the smallest of independent E_i / w_i is row i with probability w_i / sum(w)
    # exactly; counts over S seeds against S w / sum(w): chi-square, 9 degrees of freedom,
    # fail above its 99.9% quantile
    rows = np.arange(10.0)[:, None]
    weights = np.arange(1.0, 11.0)
    S = 3000
    counts = np.bincount([sample_landmarks(rows, 1, seed, weights=lambda r: r[:, 0] + 1)[0][0]
                          for seed in range(S)], minlength=10)
    expected = S * weights / weights.sum()
    assert np.sum((counts - expected) ** 2 / expected) < stats.chi2.ppf(0.999, 9), counts


def test_a_small_far_cluster_is_picked_more_often_than_uniform_picks_it():
    # 1000 rows in a tight cluster (low effective rank at gamma = 1) and 10 isolated rows
    # on a circle of radius 8: each isolated row is its own eigenvector of K, with ridge
    # leverage 1 / (1 + lambda), far above a clustered row's.  A uniform sample of m = 30
    # holds Hypergeometric(1010, 10, 30) of them, 0.3 on average: over 10 seeds the total
    # exceeds 11 with probability < 1e-4 (its binomial bound, Binomial(300, 10/1010));
    # leverage sampling picks about 5 per seed
    rng = np.random.default_rng(0)
    angles = np.arange(10) * 2 * np.pi / 10
    X = np.vstack([0.2 * rng.normal(size=(1000, 2)), 8 * np.c_[np.cos(angles), np.sin(angles)]])
    limit = stats.binom.ppf(1 - 1e-4, 300, 10 / 1010)
    assert limit <= 11
    far = {}
    for landmarks in ("uniform", "leverage"):
        far[landmarks] = sum(int(np.sum(NystroemFeatures(30, gamma=1.0, landmarks=landmarks, random_state=s)
                                        .fit(X).component_indices_ >= 1000)) for s in range(10))
    assert far["uniform"] <= limit < far["leverage"], far


# ------------------------------------------------------------------ the fit
@pytest.mark.parametrize("chunks", [(100,) * 4, (13,) * 30 + (10,)])
def test_same_landmarks_whatever_the_chunking_and_for_numpy_sparse_and_dask(X, chunks):
    ref = leverage().fit(X)
    got = leverage().fit(da.from_array(X, chunks=(chunks, 3)))
    sparse = leverage().fit(sp.csr_matrix(X))
    for fitted in (got, sparse):
        np.testing.assert_array_equal(fitted.component_indices_, ref.component_indices_)
        np.testing.assert_array_equal(fitted.components_, ref.components_)
        np.testing.assert_array_equal(fitted.normalization_, ref.normalization_)
        assert fitted.leverage_lambda_ == pytest.approx(ref.leverage_lambda_, rel=1e-6)
    # numpy in -> numpy out, dask in -> the same values, lazily
    Xd = da.from_array(X, chunks=(chunks, 3))
    np.testing.assert_array_equal(got.transform(Xd).compute(), ref.transform(X))


def test_uniform_is_the_default_and_unchanged(X):
    nys = NystroemFeatures(25, gamma=0.4, random_state=5).fit(X)
    assert NystroemFeatures().landmarks == "uniform"
    np.testing.assert_array_equal(nys.component_indices_, sample_landmarks(X, 25, 5)[0])
    assert not hasattr(nys, "leverage_lambda_") and not hasattr(nys, "effective_dimension_")


def test_seed_decides_the_landmarks(X):
    a, b, c = leverage().fit(X), leverage().fit(X), leverage(random_state=6).fit(X)
    np.testing.assert_array_equal(a.component_indices_, b.component_indices_)
    assert not np.array_equal(a.component_indices_, c.component_indices_)
    # the pass after the Gram is named by its content: a resumed run finds it again
    s1 = leverage_scores(X, pilot_map(3, 25, "gaussian", 0.4, np.random.default_rng(1)), 25)[0]
    s2 = leverage_scores(X, pilot_map(3, 25, "gaussian", 0.4, np.random.default_rng(1)), 25)[0]
    assert tokenize(s1) == tokenize(s2)


def test_leverage_fit_reads_every_block_twice(X):
    # pass 1: the pilot's Gram; pass 2: the keyed sample, scored in its tasks.  Uniform: once
    reads = []

    def read(block):
        reads.append(block.shape[0])
        return block

    Xd = da.from_array(X, chunks=(100, 3)).map_blocks(read, meta=np.empty((0, 3)))
    with dask.config.set(scheduler="synchronous"):
        leverage().fit(Xd)
        assert reads == [100] * 8
        reads.clear()
        NystroemFeatures(25, gamma=0.4, random_state=5).fit(Xd)
        assert reads == [100] * 4


def test_saved_and_loaded(X, tmp_path):
    nys = leverage().fit(X)
    save_model(nys, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.landmarks == "leverage" and loaded.effective_dimension_ == nys.effective_dimension_
    np.testing.assert_array_equal(loaded.transform(X), nys.transform(X))


# ------------------------------------------------------------------ bad parameters
@pytest.mark.parametrize("value", ["leverages", None, 1])
def test_bad_landmarks_is_one_line_naming_the_choices(X, value):
    nys = NystroemFeatures(10, landmarks=value)
    for call in (lambda: nys.fit(X), lambda: nys.check_parameters(3)):
        with pytest.raises(ValueError, match=r"The 'landmarks' parameter of NystroemFeatures must be a str "
                                             r"among \{'leverage', 'uniform'\}|\{'uniform', 'leverage'\}") as err:
            call()
        assert "\n" not in str(err.value)


def test_bad_size_with_leverage_is_one_line(X):
    with pytest.raises(ValueError, match=r"The 'n_components' parameter of NystroemFeatures") as err:
        NystroemFeatures(0, landmarks="leverage").fit(X)
    assert "\n" not in str(err.value)
