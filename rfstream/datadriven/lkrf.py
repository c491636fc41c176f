"""LKRF: learning kernels with random features (Sinha & Duchi 2016).

The EERF paper's main data-dependent baseline.  Same candidates and same single
score pass as :class:`~rfstream.EERFFeatures` (:mod:`rfstream.datadriven.scored`);
the scores are turned into a distribution over the candidates by kernel
alignment under a chi-square constraint, and ``M`` features are sampled from it.
"""
from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval

from .scored import LabelScoredFeatures, scored_state

__all__ = ["LKRFFeatures", "chi_square_weights", "project_simplex"]


def project_simplex(z) -> np.ndarray:
    """Euclidean projection of ``z`` onto the probability simplex (sort-based, exact)."""
    z = np.asarray(z, dtype=np.float64)
    u = np.sort(z)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, z.size + 1)
    r = np.flatnonzero(u - css / k > 0)[-1]
    return np.maximum(z - css[r] / (r + 1), 0.0)


def chi_square_weights(v, rho, *, n_iter=100) -> np.ndarray:
    r"""Solve Sinha & Duchi's (2016) problem (4) with the chi-square divergence.

    ``maximize_q  sum_m q_m v_m  s.t.  q in the simplex,
    D(q || u) = M0 ||q||^2 - 1 <= rho``, with ``u`` uniform over the ``M0``
    candidates and ``v_m >= 0`` the alignment of candidate ``m`` with the labels.
    The maximizer is ``q(eta) = Proj_simplex(u + eta v)`` for the smallest
    ``eta`` where the constraint is tight (the divergence of ``q(eta)`` grows
    with ``eta``), found by bisection; if even the limit ``eta -> inf``
    (uniform over the maximizers of ``v``) is feasible, that limit is returned.
    ``rho = 0`` gives ``u``.  The problem is invariant to the scale of ``v``.
    """
    v = np.asarray(v, dtype=np.float64)
    n = v.size
    u = np.full(n, 1.0 / n)
    top = v.max() if n else 0.0
    if rho <= 0 or top <= 0 or np.all(v == top):
        return u
    v = v / top

    def div(q):
        return n * float(q @ q) - 1.0

    limit = (v == 1.0) / np.count_nonzero(v == 1.0)
    if div(limit) <= rho:
        return limit
    lo, hi = 0.0, 1.0
    while div(project_simplex(u + hi * v)) < rho and hi < 1e300:
        lo, hi = hi, 2.0 * hi
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        if div(project_simplex(u + mid * v)) > rho:
            hi = mid
        else:
            lo = mid
    return project_simplex(u + lo * v)  # the feasible end of the bracket


class LKRFFeatures(LabelScoredFeatures):
    r"""Learning kernels with random features (LKRF): ``M`` features sampled by alignment.

    Sinha & Duchi (2016): draw ``M0 = n_candidates`` features ``w_m`` from the
    base distribution, compute their alignment with the labels ``v_m =
    S(w_m)^2`` (``S`` the score of :class:`~rfstream.EERFFeatures`, over the
    same kind of subsample, in ONE pass), find weights ``q`` over the
    candidates that maximize the kernel alignment ``sum_m q_m v_m`` subject to
    a chi-square divergence bound ``D(q || uniform) <= rho`` (their problem
    (4), solved exactly by :func:`chi_square_weights`), and sample ``M =
    n_components`` features i.i.d. from ``q`` (with replacement, as in their
    Section 2; a candidate may appear more than once).  The output is the base
    map of the sampled candidates with ``M`` features.

    ``rho`` is the regularization parameter the EERF paper criticizes: ``rho =
    0`` is plain random features, ``rho >= M0 - 1`` puts all the weight on the
    best candidate(s); it must be tuned (the EERF paper tries
    ``10^-5 .. 10^5``).  Deviations, shared with EERF: ``v`` comes from the
    balanced score by default (``score_mode="raw"`` for Sinha & Duchi's ``+-1``
    labels, ``v = (y' phi)^2`` up to a constant), multi-class alignment sums
    the one-vs-rest alignments, and only a subsample of rows is scored (at
    least ``min(N, 2000)`` rows whatever ``subsample`` says, drawn as EERF
    draws it: see its "Subsample").

    Parameters
    ----------
    n_components, n_candidates, subsample, base, score_mode, kernel, gamma, sampler, random_state, dtype
        As :class:`~rfstream.EERFFeatures`, except that ``n_components`` may
        exceed ``n_candidates`` (features are sampled with replacement).  A gamma grid: one
        fit per gamma, as :class:`~rfstream.EERFFeatures`.
    rho : float >= 0, default=1.0
        Bound on the chi-square divergence ``M0 ||q||^2 - 1`` of the weights
        from the uniform distribution.

    Attributes
    ----------
    weights_ : ndarray of shape (n_candidates,)
        ``q``.
    scores_, selected_, base_map_, coordinates_, classes_, n_subsample_, gamma_, seed_, n_features_in_
        As :class:`~rfstream.EERFFeatures`; ``selected_`` holds the sampled
        candidate indices in increasing order (with repeats).

    References
    ----------
    A. Sinha and J. C. Duchi, "Learning Kernels with Random Features", NIPS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import LKRFFeatures
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> lkrf = LKRFFeatures(20, n_candidates=50, random_state=0).fit(X, y)
    >>> lkrf.transform(X).shape, lkrf.weights_.shape, lkrf.selected_.shape
    ((300, 20), (50,), (20,))
    """

    _parameter_constraints: ClassVar[dict] = {
        **LabelScoredFeatures._parameter_constraints,
        "rho": [Interval(Real, 0, None, closed="left")],
    }

    _distinct_selection = False  # sampled with replacement: M may exceed M0

    def __init__(
        self,
        n_components=100,
        *,
        n_candidates=None,
        subsample=0.1,
        rho=1.0,
        base="fourier",
        score_mode="balanced",
        kernel="gaussian",
        gamma=1.0,
        sampler="mc",
        random_state=None,
        dtype="float32",
    ):
        self.rho = rho
        super().__init__(n_components, n_candidates=n_candidates, subsample=subsample, base=base,
                         score_mode=score_mode, kernel=kernel, gamma=gamma, sampler=sampler,
                         random_state=random_state, dtype=dtype)

    _fitted_rule = staticmethod(scored_state)  # what a saved model's fitted state must hold

    def _select(self, scores):
        self.weights_ = chi_square_weights(np.asarray(scores) ** 2, float(self.rho))
        rng = np.random.default_rng([self.seed_, 2])
        return np.sort(rng.choice(scores.size, size=self.n_components, replace=True, p=self.weights_ / self.weights_.sum()))
