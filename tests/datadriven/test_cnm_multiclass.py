"""CompactNonlinearMap: multi-class losses (Crammer-Singer, multinomial) and gamma="paper"."""
import dask.array as da
import numpy as np
import pytest
from test_cnm import _finite_differences, _params

from rfstream import CompactNonlinearMap, load_model, save_model
from rfstream.datadriven.cnm import PAPER_GAMMA_FACTOR
from rfstream.datadriven.cnm_sgd import (
    classification_objective,
    crammer_singer,
    map_gradient,
)
from rfstream.solvers import sgd_steps

FAST = {"max_iter": 4, "n_steps_w": 20, "n_steps_theta": 20, "batch_size": 150}


def test_crammer_singer_loss_is_the_multiclass_hinge():
    rng = np.random.default_rng(0)
    p, y = rng.normal(size=(40, 5)) * 2, rng.integers(0, 5, size=40)
    loss, g = crammer_singer(p, y)
    for i in range(40):
        wrong = np.delete(p[i], y[i])
        assert loss[i] == pytest.approx(max(0.0, 1.0 + wrong.max() - p[i, y[i]]))
        if loss[i] > 0:  # +1 at the most violating wrong class, -1 at the true one
            assert g[i, y[i]] == -1.0 and g[i].sum() == 0.0 and np.sum(g[i] == 1.0) == 1
            assert p[i, np.argmax(g[i])] == wrong.max()
        else:
            assert not g[i].any()
    assert 0 < np.mean(loss > 0) < 1  # both cases occur


@pytest.mark.parametrize("multiclass", ["crammer-singer", "multinomial"])
@pytest.mark.parametrize("structure, k", [("dense", 6), ("circulant", 7)])
def test_multiclass_map_gradient_matches_finite_differences(multiclass, structure, k):
    """dLoss/dTheta (and b, r) = chain rule dL/dscores -> dL/dZ = g W / m -> map_gradient."""
    rng = np.random.default_rng(k)
    d, m, K = 4, 30, 4
    x, y = rng.normal(size=(m, d)), rng.integers(0, K, size=m)
    coef, intercept = rng.normal(size=(K, k)) * 2, rng.normal(size=K) * 0.1
    params = _params(structure, d, k, rng)
    loss, dZ, u = classification_objective(x, y, params, k, coef, intercept, multiclass)
    grad = map_gradient(x, params, k, u, dZ)
    num = _finite_differences(
        lambda p: classification_objective(x, y, p, k, coef, intercept, multiclass)[0], params)
    assert loss > 0
    for key in num:  # CS is piecewise linear: no max switches within eps on this data
        np.testing.assert_allclose(grad[key], num[key], atol=1e-6, err_msg=key)


def test_crammer_singer_steps_pegasos():
    """Pegasos on the CS objective: stays in the ball and lowers the objective on separable data."""
    rng = np.random.default_rng(1)
    K, D, alpha = 3, 5, 1e-2
    centers = rng.normal(size=(K, D)) * 3
    y = rng.integers(0, K, size=600)
    Z = centers[y] + rng.normal(size=(600, D))

    def objective(W, v):
        return 0.5 * alpha * (np.sum(W**2) + np.sum(v**2)) + crammer_singer(Z @ W.T + v, y)[0].mean()

    W0, v0 = np.zeros((K, D)), np.zeros(K)
    batches = [(Z[i:i + 50], y[i:i + 50]) for i in range(0, 600, 50)] * 5
    W, v, t = sgd_steps(W0, v0, batches, loss="crammer_singer", alpha=alpha, t0=0)
    assert t == len(batches) and W.shape == (K, D) and v.shape == (K,)
    assert np.sqrt(np.sum(W**2) + np.sum(v**2)) <= np.sqrt(2 / alpha) + 1e-9
    assert objective(W, v) < 0.5 * objective(W0, v0)  # objective(0) = 1
    assert np.mean(np.argmax(Z @ W.T + v, axis=1) == y) > 0.9
    assert not W0.any()  # inputs untouched


@pytest.fixture(scope="module")
def rings3():
    """Three rings (radius bands) in 2-D plus 2 noise columns: not linearly separable."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4))
    return X, np.digitize(np.hypot(X[:, 0], X[:, 1]), [0.8, 1.5])


@pytest.mark.parametrize("multiclass", ["crammer-singer", "multinomial"])
def test_joint_multiclass_fits_numpy_equals_dask(rings3, multiclass):
    X, y = rings3
    # as tests/datadriven/test_cnm.py's OvR test, with the constant map step 0.2: in 240 map steps
    # the default decay (first step 1.0, t0 = 500) is still above 0.6 and scored 0.61-0.80
    # (multinomial) and 0.63-0.82 (crammer-singer) over seeds 0-4, the constant 0.88-0.97 and 0.77-0.98
    # (docs/cnm.md, "The default schedule, decided again")
    kw = {"multiclass": multiclass, "random_state": 0, "max_iter": 8, "n_steps_w": 30,
          "n_steps_theta": 30, "batch_size": 200, "theta_schedule": "constant"}
    est = CompactNonlinearMap(12, **kw).fit(X[:1200], y[:1200])
    assert est.coef_.shape == (3, 12) and est.decision_function(X[:5]).shape == (5, 3)
    assert est.score(X[1200:], y[1200:]) > 0.75  # a linear model on X gets ~0.5
    Xd, yd = da.from_array(X[:1200], chunks=(500, 4)), da.from_array(y[:1200], chunks=500)
    dask_est = CompactNonlinearMap(12, **kw).fit(Xd, yd)
    np.testing.assert_array_equal(dask_est.projection_, est.projection_)
    np.testing.assert_array_equal(dask_est.coef_, est.coef_)


def test_binary_problem_ignores_multiclass(rings3, tmp_path):
    X, y = rings3
    yb = (y == 1).astype(int)
    ref = CompactNonlinearMap(6, random_state=2, **FAST).fit(X, yb)
    est = CompactNonlinearMap(6, multiclass="crammer-singer", random_state=2, **FAST).fit(X, yb)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.projection_, ref.projection_)
    save_model(est, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.multiclass == "crammer-singer"
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_gamma_paper_is_four_times_auto(rings3):
    X, y = rings3
    auto = CompactNonlinearMap(8, random_state=3, **FAST).fit(X, y)
    paper = CompactNonlinearMap(8, gamma="paper", random_state=3, **FAST).fit(X, y)
    assert PAPER_GAMMA_FACTOR == 4.0
    assert paper.gamma_ == pytest.approx(4.0 * auto.gamma_)
    with pytest.raises(ValueError, match="gamma='paper'.*kernel='gaussian'"):
        CompactNonlinearMap(8, kernel="laplacian", gamma="paper", **FAST).fit(X, y)
    with pytest.raises(ValueError, match="multiclass"):
        CompactNonlinearMap(8, multiclass="softmax", **FAST).fit(X, y)
