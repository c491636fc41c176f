"""rfstream.lapack: the client's LAPACK routines called without the GIL give what scipy's wrappers give."""
import numpy as np
import pytest
import scipy.linalg
import scipy.linalg.lapack as scipy_lapack

from rfstream import lapack


def _spd(D, seed=0):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((D, D))
    return M @ M.T + np.eye(D), rng.standard_normal((D, 3))


@pytest.mark.parametrize("D", [1, 2, 7, 130])
def test_each_routine_equals_scipys_wrapper(D):
    G, C = _spd(D)
    assert all(lapack._routine(name) is not None for name in lapack._SIGNATURES)  # the GIL-free calls
    L = lapack.potrf(G)
    np.testing.assert_array_equal(np.tril(L), np.tril(scipy_lapack.dpotrf(G, lower=1)[0]))
    np.testing.assert_allclose(lapack.potrs(L, C), scipy.linalg.solve(G, C, assume_a="pos"), rtol=1e-10)
    np.testing.assert_allclose(lapack.potrs(L, C[:, 0]), scipy.linalg.solve(G, C[:, 0]), rtol=1e-10)
    np.testing.assert_array_equal(np.tril(lapack.trtri(np.tril(L))), scipy_lapack.dtrtri(np.tril(L), lower=1)[0])
    lwork, _ = scipy_lapack.dsytrd_lwork(D, lower=1)
    want = scipy_lapack.dsytrd(G, lower=1, lwork=max(int(lwork), 1))
    got = lapack.sytrd(G)
    for a, b in zip(got, want[:4]):
        np.testing.assert_array_equal(a, b)
    c, _, _, tau = got
    for trans in "NT":
        out = np.array(C, order="F")
        if D > 1:
            size = max(int(scipy_lapack.dormqr("L", trans, c[1:, :D - 1], tau, out[1:], -1)[1][0]), 1)
            out[1:] = scipy_lapack.dormqr("L", trans, c[1:, :D - 1], tau, out[1:], size)[0]
        np.testing.assert_array_equal(lapack.ormqr_below(c, tau, C, trans), out)
    for got, want in zip(lapack.syevr(G), scipy.linalg.eigh(G, driver="evr")):
        np.testing.assert_array_equal(got, want)


def test_inputs_are_not_modified_and_failures_are_linalg_errors():
    G, C = _spd(20)
    G0, C0 = G.copy(), C.copy()
    lapack.potrs(lapack.potrf(G), C)
    lapack.sytrd(G)
    np.testing.assert_array_equal(G, G0)
    np.testing.assert_array_equal(C, C0)
    F = np.array(G, order="F")
    assert lapack.potrf(F, overwrite_a=True) is F and np.array_equal(np.tril(F), np.tril(lapack.potrf(G)))
    with pytest.raises(np.linalg.LinAlgError, match="dpotrf"):
        lapack.potrf(-np.eye(3))
