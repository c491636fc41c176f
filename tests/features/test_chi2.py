"""The chi-squared maps (rfstream.features.chi2): AdditiveChi2Sampler equals scikit-learn's
transform column for column (it is deterministic); SkewedChi2Sampler estimates the skewed
chi2 kernel as well as scikit-learn's sampler; both refuse input outside their domain in
one line naming the column.

The contract of every registered map is tested in test_contract.py.
"""
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import AdditiveChi2Sampler as SklearnAdditive
from sklearn.kernel_approximation import SkewedChi2Sampler as SklearnSkewed

from rfstream import AdditiveChi2Sampler, SkewedChi2Sampler
from rfstream.features.chi2 import skewed_chi2_kernel

SEEDS = range(8)


@pytest.fixture(scope="module")
def H():
    """Histogram-like rows with exact zeros (the zero entries give zero features)."""
    H = np.random.default_rng(0).random((30, 6))
    H[H < 0.25] = 0.0
    return H


def _stack(Z):
    """The computed blocks of a dask array of CSR blocks, as one CSR matrix."""
    return sp.vstack([Z.blocks[i].compute() for i in range(Z.numblocks[0])], format="csr")


@pytest.mark.parametrize("steps, interval", [(1, None), (2, None), (3, None), (4, 0.3)])
def test_additive_equals_sklearn(H, steps, interval):
    ours = AdditiveChi2Sampler(sample_steps=steps, sample_interval=interval).fit(H)
    ref = SklearnAdditive(sample_steps=steps, sample_interval=interval).fit(H)
    expected = ref.transform(H)
    Z = ours.transform(H)
    assert Z.shape == (30, 6 * (2 * steps - 1)) and Z.dtype == np.float32
    np.testing.assert_allclose(Z, expected, rtol=1e-6, atol=1e-6)  # float32: rounded once
    Zs = ours.transform(sp.csr_matrix(H))
    assert sp.issparse(Zs) and sp.issparse(ref.transform(sp.csr_matrix(H)))
    np.testing.assert_allclose(Zs.toarray(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours.transform(da.from_array(H, chunks=7)).compute(), expected,
                               rtol=1e-6, atol=1e-6)
    Zd = ours.transform(da.from_array(sp.csr_matrix(H), chunks=(7, 6), asarray=False))
    assert sp.issparse(Zd._meta) and Zd.chunks[1] == (Z.shape[1],)
    np.testing.assert_allclose(_stack(Zd).toarray(), expected, rtol=1e-6, atol=1e-6)
    assert ours.get_feature_names_out().shape == (Z.shape[1],)


def test_additive_approximates_the_kernel(H):
    K = (2 * H[:, None] * H[None] / np.where(H[:, None] + H[None] > 0, H[:, None] + H[None], 1)).sum(2)
    errors = []
    for n in (1, 2, 3):
        Z = AdditiveChi2Sampler(sample_steps=n, dtype="float64").fit_transform(H)
        errors.append(np.abs(Z @ Z.T - K).max())
    # the sampled spectrum (Vedaldi & Zisserman, eq. 17): with one sample the diagonal is
    # 0.8 k (20% off); measured relative errors 0.20, 0.10, 0.05 of max k
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.07 * K.max()


def test_additive_refuses_negative_input(H):
    bad = H.copy()
    bad[4, 3] = -0.5
    message = r"Negative values in data passed to AdditiveChi2Sampler.*histogram\); column 3 has -0\.5\."
    with pytest.raises(ValueError, match=message):
        AdditiveChi2Sampler().fit(bad)
    est = AdditiveChi2Sampler().fit(H)
    for X in (bad, sp.csr_matrix(bad), sp.csc_matrix(bad)):
        with pytest.raises(ValueError, match=message):
            est.transform(X)
    lazy = est.transform(da.from_array(bad, chunks=10))  # checked in the blocks, when computed
    with pytest.raises(ValueError, match=message):
        lazy.compute()
    AdditiveChi2Sampler().fit(da.from_array(bad, chunks=10))  # nothing is read in fit


def test_additive_parameters(H):
    with pytest.raises(ValueError, match=r"sample_interval is required with sample_steps=5"):
        AdditiveChi2Sampler(sample_steps=5).fit(H)
    with pytest.raises(ValueError, match=r"'sample_interval' parameter .* range \(0.0, inf\)"):
        AdditiveChi2Sampler(sample_interval=0.0).fit(H)
    assert AdditiveChi2Sampler(sample_steps=5, sample_interval=0.3).fit(H).transform(H).shape == (30, 54)


def test_skewed_draw_and_sklearn_form(H):
    # the same formula as sklearn's transform on our draw: cos(log(x + c) W + b) sqrt(2/D)
    est = SkewedChi2Sampler(skewedness=0.5, n_components=20, random_state=0, dtype="float64").fit(H)
    ref = SklearnSkewed(skewedness=0.5, n_components=20).fit(H)
    ref.random_weights_, ref.random_offset_ = est.random_weights_, est.random_offset_
    np.testing.assert_allclose(est.transform(H), ref.transform(H), rtol=1e-12, atol=1e-12)


def test_skewed_unbiased_and_as_accurate_as_sklearn(H):
    K = skewed_chi2_kernel(H, skewedness=0.5)
    x, y = H[0] + 0.5, H[1] + 0.5  # the oracle, written out for one pair
    assert K[0, 1] == pytest.approx(np.prod(2 * np.sqrt(x * y) / (x + y)))

    def error(est):
        Z = est.fit_transform(H)
        return Z @ Z.T - K

    ours = [error(SkewedChi2Sampler(skewedness=0.5, n_components=300, random_state=s, dtype="float64"))
            for s in SEEDS]
    theirs = [error(SklearnSkewed(skewedness=0.5, n_components=300, random_state=s)) for s in SEEDS]
    mean_err = np.mean(ours, axis=0)
    # k in (0, 1]; one entry's std is about 0.7 / sqrt(300 x 8) = 0.015 after 8 draws
    assert abs(mean_err.mean()) < 0.03 and np.abs(mean_err).max() < 0.1
    diff = np.array([np.abs(a).mean() - np.abs(b).mean() for a, b in zip(ours, theirs)])
    assert diff.mean() <= 2 * diff.std(ddof=1) / np.sqrt(len(diff)) + 1e-12  # paired, seed noise


def test_skewed_inputs_and_prefix(H):
    est = SkewedChi2Sampler(n_components=16, random_state=0).fit(H)
    Z = est.transform(H)
    assert Z.dtype == np.float32 and est.random_weights_.dtype == np.float32
    np.testing.assert_allclose(est.transform(sp.csr_matrix(H)), Z, atol=1e-6)
    np.testing.assert_allclose(est.transform(da.from_array(H, chunks=7)).compute(), Z, atol=1e-6)
    small = est.with_components(8)  # i.i.d. frequencies: the first 8 are a map of 8
    np.testing.assert_allclose(small.transform(H), est.prefix_scale(8) * Z[:, est.prefix_columns(8)],
                               atol=1e-6)


def test_skewed_refuses_input_at_or_below_minus_skewedness(H):
    est = SkewedChi2Sampler(skewedness=0.5, n_components=8, random_state=0).fit(H)
    bad = H.copy()
    bad[2, 4] = -0.5
    message = r"SkewedChi2Sampler needs input > -skewedness = -0\.5 .*; column 4 has -0\.5\."
    with pytest.raises(ValueError, match=message):
        est.transform(bad)
    with pytest.raises(ValueError, match=message):
        est.transform(da.from_array(bad, chunks=10)).compute()
    zero = SkewedChi2Sampler(skewedness=0.0, n_components=8, random_state=0).fit(H)
    with pytest.raises(ValueError, match=r"column \d has 0\."):  # the zeros of a sparse row count
        zero.transform(sp.csr_matrix(H))
