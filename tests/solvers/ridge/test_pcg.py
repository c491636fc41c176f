"""Nystrom-preconditioned conjugate gradients (solver="pcg", rfstream.solvers.ridge.nystrom_pcg).

The oracle is a Cholesky solve in float64 of the same problem on the same
features (scikit-learn's Ridge / RidgeClassifier, solver="cholesky"): PCG run to
a tight residual must reach the same weights whatever the preconditioner, which
changes the path, not the solution.  rfstream's own Gram pass (solver="gram")
forms its sub-block Grams in the features' float32 (rfstream/solvers/ridge/gram.py),
so it agrees to that rounding, about 1e-5 relative here.
"""
import json

import dask.array as da
import numpy as np
import pytest

from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge, RidgeClassifier

from rfstream import (
    RandomFourierFeatures,
    Standardizer,
    StreamingRidge,
    StreamingRidgeClassifier,
    cli,
)
from rfstream.datasets import train_test
from rfstream.solvers.memory import check_gram_memory, check_pcg_memory
from rfstream.solvers.ridge.nystrom_pcg import NystromPreconditioner, nystrom_factor


pytestmark = pytest.mark.long_file(55)  # seconds in the suite: started first (tests/conftest.py)

def _features(n=3000, d=8, D=600, seed=0, classes=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    if classes:
        y = np.argmax(X[:, :classes] + 0.5 * rng.normal(size=(n, classes)), axis=1)
    else:
        y = np.sin(X[:, :3]) @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=n)
    Xd = da.from_array(X, chunks=700)
    fmap = RandomFourierFeatures(D, gamma=0.2, random_state=seed).fit(Xd)
    return fmap.transform(Xd), y


def _close(a, b, rtol):
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * np.abs(b).max())


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_pcg_equals_cholesky_regression(fit_intercept, weighted):
    Z, y = _features()
    Z = Z.persist()  # some 150 passes read the features from memory (fused features: the test below)
    Y = np.column_stack([y, np.cos(y)])  # two targets share every pass
    w = np.random.default_rng(3).uniform(0.2, 3.0, size=len(y)) if weighted else None
    kw = dict(alpha=0.05, fit_intercept=fit_intercept)
    exact = Ridge(solver="cholesky", **kw).fit(np.asarray(Z, dtype=np.float64), Y, sample_weight=w)
    gram = StreamingRidge(solver="gram", **kw).fit(Z, Y, sample_weight=w)
    pcg = StreamingRidge(solver="pcg", tol=1e-10, max_iter=500, pcg_rank=128, **kw).fit(Z, Y, sample_weight=w)
    _close(pcg.coef_, exact.coef_, 1e-6)
    np.testing.assert_allclose(pcg.intercept_, exact.intercept_ * np.ones(2), rtol=0, atol=1e-6)
    _close(gram.coef_, exact.coef_, 1e-4)
    assert 1 < pcg.n_iter_ < 500


def test_pcg_equals_cholesky_classifier_and_beats_jacobi():
    Z, y = _features(classes=4)
    Z = Z.persist()  # some 600 passes read the features from memory (7 MB)
    kw = dict(alpha=0.01, class_weight="balanced")
    Zn = np.asarray(Z, dtype=np.float64)
    exact = RidgeClassifier(solver="cholesky", **kw).fit(Zn, y)
    pcg = StreamingRidgeClassifier(solver="pcg", tol=1e-10, max_iter=1000, pcg_rank=256, **kw).fit(Z, y)
    _close(pcg.coef_, exact.coef_, 1e-6)
    np.testing.assert_array_equal(pcg.predict(Z).compute(), exact.predict(Zn))
    # the point of the preconditioner: far fewer passes than Jacobi at small alpha.  Jacobi is
    # given twice PCG's passes and must not reach the tolerance in them (it takes about 417); its
    # passes run over the same features as a numpy array (the same sums, without a dask graph
    # per pass: 1.7 s against 7.9 s)
    cap = 2 * pcg.n_iter_ + 1
    with pytest.warns(ConvergenceWarning, match=f"stopped after max_iter={cap} passes"):
        jacobi = StreamingRidgeClassifier(solver="cg", tol=1e-10, max_iter=cap, **kw).fit(Z.compute(), y)
    assert pcg.n_iter_ < jacobi.n_iter_ / 2, (pcg.n_iter_, jacobi.n_iter_)


def test_pcg_on_stored_features_matches_fused():
    Z, y = _features(D=300)
    fused = StreamingRidge(alpha=0.1, solver="pcg", tol=1e-10, pcg_rank=64).fit(Z, y)
    stored = StreamingRidge(alpha=0.1, solver="pcg", tol=1e-10, pcg_rank=64).fit(Z.compute(), y)
    _close(stored.coef_, fused.coef_, 1e-6)
    assert abs(stored.n_iter_ - fused.n_iter_) <= 2  # the same rows sampled: the same preconditioner


@pytest.mark.parametrize("solver", ["cg", "pcg"])
def test_a_float32_fit_meets_tol_on_the_true_residual(solver, monkeypatch):
    # tol = 1e-3 >= FLOAT32_UNTIL: the iterations and the pass that checks the residual
    # multiply in float32; the residual of the returned weights, in float64 on the
    # materialized features, is within tol all the same
    import rfstream.solvers.ridge.cg as cg_module

    single = []
    original = cg_module.fused_row_sum
    def spy(chunk, size, Z, spec, *a, **k):
        if chunk is cg_module.product_chunk:  # the product passes, not the statistics pass beside them
            single.append(spec.V.dtype == np.float32)
        return original(chunk, size, Z, spec, *a, **k)

    monkeypatch.setattr(cg_module, "fused_row_sum", spy)
    Z, y = _features(D=300)
    tol, alpha = 1e-3, 0.05
    est = StreamingRidge(solver=solver, alpha=alpha, tol=tol, pcg_rank=32).fit(Z, y)
    assert len(single) == est.n_iter_ - 1 and all(single)  # n_iter_: the statistics pass and the products
    Zc = np.asarray(Z, dtype=np.float64)
    Zc -= Zc.mean(axis=0)
    b = Zc.T @ (y - y.mean())
    residual = b - (Zc.T @ (Zc @ est.coef_) + alpha * est.coef_)
    assert np.linalg.norm(residual) <= tol * np.linalg.norm(b)


def test_nystrom_factor_is_the_leading_eigenpairs():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(40, 25)) * np.geomspace(10, 0.1, 25)
    U, lam = nystrom_factor(B.copy(), rank=6)
    exact = np.linalg.eigvalsh(B.T @ B)[::-1][:6]
    np.testing.assert_allclose(lam, exact, rtol=1e-10)
    np.testing.assert_allclose(U.T @ U, np.eye(6), atol=1e-10)
    np.testing.assert_allclose(B.T @ B @ U, U * lam, atol=1e-8 * lam[0])
    # float32 rows: the products in float32, the eigenproblem in float64; U float64
    U32, lam32 = nystrom_factor(B.astype(np.float32), rank=6)
    assert U32.dtype == np.float64
    np.testing.assert_allclose(lam32, exact, rtol=1e-5)
    np.testing.assert_allclose(U32.T @ U32, np.eye(6), atol=1e-5)


def test_preconditioner_of_the_whole_gram_is_its_inverse():
    """With every row sampled and full rank, P^-1 A = (lam_r + alpha) I (eq. 5.3)."""
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(200, 30))
    alpha, mu = 0.5, Z.mean(axis=0)
    P = NystromPreconditioner.from_rows(Z, np.zeros(200), alpha=alpha, mu=mu, n_rows=200, m=200,
                                        rank=30, seed=0)
    A = (Z - mu).T @ (Z - mu) + alpha * np.eye(30)
    np.testing.assert_allclose(P(A), (P.lam[-1] + alpha) * np.eye(30), atol=1e-8)
    assert P.rank == 30 and P.sample_rows == 200


def test_memory_errors_name_the_solver_to_use():
    with pytest.raises(ValueError, match=r"solver='pcg' with pcg_rank=100000 at D=1000000 needs about "
                                         r"\d+\.\d GiB on the client.*lower pcg_rank"):
        check_pcg_memory(1_000_000, 100_000, 1)
    with pytest.raises(ValueError, match=r"or use solver='pcg' \(CLI: --ridge-solver pcg\), whose memory is D x pcg_rank"):
        check_gram_memory(1, 1, 200_000, 1)


def test_cli_pcg(tmp_path, capsys, prepared):
    train, _ = prepared("letter")
    common = ["--n-components", "256", "--ridge-solver", "pcg", "--scheduler", "threads"]
    code = cli.main(["fit", str(train), "--out", str(tmp_path / "m1"), "--alpha", "0.01",
                     "--pcg-rank", "64", "--cg-tol", "1e-2", *common])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["alpha"] == 0.01 and 2 <= summary["solver_passes"] <= 200  # the stats pass + iterations
    solver = json.loads((tmp_path / "m1" / "model.json").read_text())
    assert "pcg" in json.dumps(solver)
    # a list of alphas: every (fold, alpha) in the same passes, then the scoring pass
    code = cli.main(["fit", str(train), "--out", str(tmp_path / "m2"), "--alpha", "0.01,0.1", "--cv", "3",
                     "--pcg-rank", "64", "--cg-tol", "1e-2", *common])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["alpha"] in (0.01, 0.1) and 3 <= summary["solver_passes"] <= 201
    code = cli.main(["fit", str(train), "--out", str(tmp_path / "m3"), "--alpha", "0.01,0.1", "--cv", "loo",
                     *common])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--ridge-solver pcg searches a list of alphas by k-fold" in err[0]


@pytest.mark.parametrize("D", [1024])
def test_pcg_reaches_cholesky_test_error_on_letter(D, datasets_dir, tmp_path):
    """Real data: PCG at its default tolerance is within 0.1 point of the exact solve."""
    X_tr, X_te, y_tr, y_te = train_test("letter", tmp_path, datasets_dir)
    scaler = Standardizer().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    fmap = RandomFourierFeatures(D, gamma="auto", random_state=0).fit(X_tr)
    # the training features kept in memory (61 MB): PCG's passes read them instead of
    # making them again (stored and fused features give the same fit: the test above)
    Z_tr, Z_te = fmap.transform(X_tr).persist(), fmap.transform(X_te)
    y_te = np.asarray(y_te)
    errors = {}
    for solver in ("gram", "pcg"):
        model = StreamingRidgeClassifier(alpha=1e-3, solver=solver, pcg_rank=D // 4).fit(Z_tr, y_tr)
        errors[solver] = float(np.mean(model.predict(Z_te).compute() != y_te))
    assert errors["gram"] < 0.07  # Cholesky: 6.1% at D = 1024, 3.9% at 2048 (docs/wide.md)
    assert abs(errors["pcg"] - errors["gram"]) <= 0.001, errors
