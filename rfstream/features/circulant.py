"""Circulant nonlinear maps (Yu, Kumar, Rowley & Chang 2015, Section 8).

``Z(x) = sqrt(2/k) cos(R D x + b)`` with ``R = circ(r)`` (eq. 12), ``D`` random signs and
``b`` random phases; ``R D x = r (*) (D x)`` is a circular convolution (eq. 14) computed in
the Fourier domain (eq. 15), the circulant matrix never formed: ``O(k log d)`` time per row
and ``O(k)`` parameters.  :func:`circulant_project` and :func:`circulant_grad` (eqs. 16-17)
are shared with :class:`rfstream.CompactNonlinearMap`.  Measurements: docs/cnm.md.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.fft
import scipy.sparse as sp

from ..kernels import sample_frequencies
from .base import KernelFeatureMap

__all__ = ["CirculantFeatures", "circulant_grad", "circulant_project", "draw_circulant"]


def circulant_project(xs, r, k):
    """First ``k`` outputs of the stacked circulant projections ``[circ(r_j) xs]_j``.

    Parameters
    ----------
    xs : ndarray of shape (m, d)
        Rows, already multiplied by the signs ``D``.
    r : ndarray of shape (n_blocks, d)
        One circulant vector per block of ``d`` outputs; ``n_blocks = ceil(k / d)``.
    k : int
        Outputs kept (``k < d``: the first ``k`` of one block, Section 8.1;
        ``k > d``: blocks concatenated, the last one cut).

    Returns
    -------
    u : ndarray of shape (m, k), in the dtype of ``xs``
        ``u[:, j d + i] = (circ(r_j) xs')[i] = sum_l r_j[(i - l) mod d] xs[:, l]``.
    """
    m, d = xs.shape
    fx = scipy.fft.rfft(xs, axis=1)  # (m, d//2+1), once for all blocks
    fr = scipy.fft.rfft(r.astype(xs.dtype, copy=False), axis=1)  # (B, d//2+1)
    u = scipy.fft.irfft(fx[:, None, :] * fr[None, :, :], n=d, axis=2)  # (m, B, d)
    return u.reshape(m, r.shape[0] * d)[:, :k].astype(xs.dtype, copy=False)  # m may be 0


def circulant_grad(xs, G, n_blocks):
    """Gradient of ``sum(G * circulant_project(xs, r, k))`` with respect to ``r``.

    Eqs. 16-17 of Yu et al. (2015): ``d u_j[i] / d r_j[l] = xs[(i - l) mod d]``,
    so the gradient of block ``j`` is the circular cross-correlation of ``G_j``
    (the block's columns of ``G``, zero-padded beyond ``k``) with ``xs``, summed
    over the rows: ``irfft(sum_m rfft(G_j) conj(rfft(xs)))``.  The sum over the
    rows is taken in the Fourier domain, so the cost is ``O(m k log d)``.

    Parameters
    ----------
    xs : ndarray of shape (m, d)
        Sign-flipped rows (as given to :func:`circulant_project`).
    G : ndarray of shape (m, k)
        Derivative of the objective with respect to the outputs ``u``.
    n_blocks : int

    Returns
    -------
    grad : ndarray of shape (n_blocks, d), float64
    """
    m, d = xs.shape
    k = G.shape[1]
    pad = np.zeros((m, n_blocks * d))
    pad[:, :k] = G
    fg = scipy.fft.rfft(pad.reshape(m, n_blocks, d), axis=2)  # (m, B, d//2+1)
    fx = scipy.fft.rfft(np.asarray(xs, dtype=np.float64), axis=1)  # (m, d//2+1)
    spectrum = np.einsum("mbf,mf->bf", fg, np.conj(fx))
    return scipy.fft.irfft(spectrum, n=d, axis=1)


def draw_circulant(rng, kernel, gamma, k, d):
    """``(r, signs, offset)`` of a circulant map with ``k`` outputs of ``d`` inputs, float64,
    drawn from ``rng`` in that order (Section 8.2): ``ceil(k/d)`` vectors ``r`` from the
    kernel's spectral density, ``d`` signs of ``D`` and ``k`` phases ``b ~ U[0, 2 pi]``."""
    r = sample_frequencies(kernel, gamma, (-(-k // d), d), rng)
    signs = np.where(rng.random(d) < 0.5, -1.0, 1.0)
    return r, signs, rng.uniform(0.0, 2.0 * np.pi, size=k)


def dense_rows(x, dtype):
    """A numpy row block as a dense array of ``dtype`` (sparse blocks densified)."""
    return np.asarray(x.toarray() if sp.issparse(x) else x, dtype=dtype)


class CirculantFeatures(KernelFeatureMap):
    r"""Randomized circulant nonlinear map: random Fourier features with ``R = circ(r)``.

    ``Z(x) = sqrt(2/k) cos(R D x + b)`` (Yu et al. 2015, eq. 13, with the phase
    ``b ~ U[0, 2 pi]`` of random Fourier features so that ``Z(x)' Z(y)`` is an
    unbiased estimate of the kernel):

    * ``r`` has i.i.d. entries from the kernel's spectral density (Section 8.2;
      e.g. ``N(0, 2 gamma)`` for the Gaussian kernel), so every row of ``R``,
      a permutation of ``r``, is a valid frequency vector;
    * ``D = diag(signs)``, random +-1 (one ``D`` for all blocks, so the FFT of
      ``D x`` is computed once per row and reused, Section 8.1);
    * ``k <= d``: the first ``k`` outputs of one ``d x d`` circulant
      projection; ``k > d``: ``ceil(k/d)`` independent circulant blocks
      concatenated, the last one cut.

    ``R D x`` is computed with FFTs (eq. 15, :func:`circulant_project`); the
    circulant matrix is never formed.  Parameters: ``ceil(k/d) d + d + k``
    numbers, ``O(k)`` for ``k >= d``, against ``d k`` for
    :class:`~rfstream.RandomFourierFeatures`.

    Prefix maps (:mod:`rfstream.features.prefix`): the first ``n`` columns are
    the map of ``n`` outputs made of the first ``ceil(n/d)`` circulant vectors,
    the signs and the first ``n`` phases (the last block cut, as the map cuts its
    own, Section 8.1).

    Deviation: the rows of one circulant block are not independent (they are
    cyclic shifts of each other), so the kernel estimate is unbiased but its
    variance differs from i.i.d. random Fourier features; the paper measures
    nearly the same MSE (Figure 3), as do our tests and docs/cnm.md.

    Parameters
    ----------
    n_components : int, default=100
        Number of output features ``k``.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        Product-form kernels whose spectral density has i.i.d. coordinates
        (see :class:`~rfstream.RandomFourierFeatures`).
    gamma : float > 0 or "auto", default=1.0
    random_state : int, Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"

    Attributes
    ----------
    gamma_ : float
    circulant_ : ndarray of shape (ceil(k / d), d)
        ``r`` of each block, in ``dtype``.
    signs_ : ndarray of shape (d,)
        Diagonal of ``D``.
    random_offset_ : ndarray of shape (k,)
        Phases ``b``.
    n_features_in_ : int

    References
    ----------
    F. X. Yu, S. Kumar, H. Rowley and S.-F. Chang, "Compact Nonlinear Maps and
    Circulant Extensions", arXiv:1503.03893, 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import CirculantFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 8))
    >>> cf = CirculantFeatures(n_components=20, random_state=0).fit(X)
    >>> cf.transform(X).shape, cf.circulant_.shape
    ((5, 20), (3, 8))
    """

    prefix_valid = True

    def _keep_prefix(self, n):
        """The first ``ceil(n / d)`` circulant vectors and ``n`` phases; the same signs."""
        self.circulant_ = self.circulant_[: -(-n // self.circulant_.shape[1])].copy()
        self.random_offset_ = self.random_offset_[:n].copy()

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`):
        ``ceil(k / d)`` circulant vectors of the ``d`` inputs, ``d`` signs, ``k`` phases."""
        d = view.int("n_features_in_")
        blocks = view.array("circulant_")
        k = view.array("random_offset_")
        if len(k) != 1 or len(blocks) != 2 or blocks != (-(-k[0] // d), d):
            view.fail(f"circulant_ has shape {blocks}, not (ceil(k / {d}), {d}) for the k = "
                      f"{k[0] if len(k) == 1 else k} phases of random_offset_")
        view.array("signs_", (d,))
        view.one_of("signs_", (-1.0, 1.0))

    def _draw(self, rng, n_features):
        dtype = self._output_dtype()
        r, signs, offset = draw_circulant(rng, self.kernel, self.gamma_, self.n_components, n_features)
        self.circulant_, self.signs_, self.random_offset_ = (a.astype(dtype) for a in (r, signs, offset))

    @property
    def _n_features_out(self):
        return self.random_offset_.shape[0]

    def _block(self, x):
        xs = dense_rows(x, self.circulant_.dtype) * self.signs_
        u = circulant_project(xs, self.circulant_, self.random_offset_.shape[0])
        u += self.random_offset_
        np.cos(u, out=u)
        u *= math.sqrt(2.0 / u.shape[1])
        return u
