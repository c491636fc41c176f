"""EERF: random features chosen by their score against the labels (Shahrampour et al. 2018).

EERF draws ``M0`` candidate features ``phi(., w)`` from a data-independent
distribution, scores each by ``S(w) = (1/N0) sum_n y_n phi(x_n, w)`` (eq. 7)
over a subsample of ``N0`` training rows, and keeps the ``M`` with the largest
``|S|`` (Algorithm 1).  The candidates and the one scoring pass are shared with
LKRF (:mod:`rfstream.datadriven.scored`).
"""
from __future__ import annotations

import numpy as np

from .scored import LabelScoredFeatures, scored_state

__all__ = ["EERFFeatures", "top_m"]


def top_m(scores, m: int) -> np.ndarray:
    """Indices of the ``m`` largest scores, largest first, ties broken by the lower index."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:m]


class EERFFeatures(LabelScoredFeatures):
    r"""Energy-based exploration of random features (EERF): the ``M`` best of ``M0`` candidates.

    Shahrampour, Beirami & Tarokh (2018), Algorithm 1: draw ``M0 =
    n_candidates`` features ``w`` from the initial distribution ``P0`` of
    ``base``, evaluate the empirical score ``S(w) = (1/N0) sum_n y_n phi(x_n,
    w)`` (eq. 7) on a subsample of ``N0 ~= max(subsample * N, min(N, 2000))``
    training rows (below), and keep the ``M = n_components`` candidates with the largest ``|S(w)|``.  The
    output is the feature map of the kept candidates, scaled as the base map
    with ``M`` features; any linear solver is then trained on it (eq. 8 with a
    quadratic regularizer, e.g. :class:`~rfstream.StreamingRidgeClassifier`).

    **Robust score (deviation from eq. 7, default ``score_mode="balanced"``).**
    With ``y = +-1`` and imbalanced classes (Adult: 24% positive), eq. 7 is
    ``S(w) = mean(y) mean(phi(., w)) + cov(y, phi(., w))``: the first term
    dominates and favours features that are merely large on average
    (low frequencies with phases near 0), not features that separate the
    classes; on Adult with ``M = 100`` the raw score is *worse* than plain RFF
    (docs/eerf.md).  The default therefore centres and standardizes every
    response over the subsample: ``S_k(w) = cov(y_k, phi(., w)) / var(y_k)``,
    which for the indicator of class ``k`` is ``mean(phi | y = k) -
    mean(phi | y != k)`` -- free of the class mean and of the class
    proportion.  The centring is done exactly after the single pass (the pass
    accumulates ``sum y``, ``sum y^2``, ``sum phi`` and ``sum y phi``), so it
    costs nothing.  ``score_mode="raw"`` gives eq. 7 as printed.

    **Responses.**  Classification (``y`` of integer, bool or string dtype):
    one-vs-rest indicators of the classes (one response for two classes), and
    the score of a candidate is ``sqrt(sum_k S_k(w)^2)`` (for two classes
    ``|S(w)|``; for more, the candidate's contribution to the kernel
    polarization of all one-vs-rest problems, cf. the remark after eq. 7).
    Regression (float ``y``): the target, scaled to ``[-1, 1]`` by its minimum
    and maximum over the training set for ``score_mode="raw"`` (as in the paper's
    experiments); the balanced score is invariant to that scaling.

    **Selection** is exact and deterministic: the indices of the ``M`` largest
    scores, sorted by decreasing score with ties broken by the lower candidate
    index (a stable sort of ``-|S|``).

    **Subsample.**  A uniform sample without replacement of the training rows,
    as the paper's "we randomly subsample N_0 data points" (Table 3): row
    ``i`` has a uniform key ``u_i`` from ``(seed, global row index)``
    (stream 30); the rows with ``u_i < subsample`` are scored and, when they
    are fewer than ``m = min(N, MIN_SCORED_ROWS)`` (2000), the ``m`` rows with
    the smallest keys instead.  So ``N0 >= min(N, 2000)`` whatever
    ``subsample`` says (every row of a training set of 2000 rows or fewer),
    and the fit does not depend on the chunking or the number of workers
    (:func:`rfstream.datadriven.scored.scoring_threshold`).

    Parameters
    ----------
    n_components : int, default=100
        Number of kept features ``M``.
    n_candidates : int or None, default=None
        Number of candidates ``M0 >= M``; ``None`` means ``10 M`` (the paper
        suggests ``5 M`` to ``20 M``).
    subsample : float in (0, 1], default=0.1
        Expected fraction ``N0 / N`` of the training rows used by the score
        (Bernoulli per row; 1.0 = every row), raised to score at least
        ``min(N, 2000)`` rows (see above; the paper's rule of thumb is
        ``N0 = 0.1 N``).  The pass still reads every block, but computes
        candidate features only for the subsample rows.
    base : {"fourier", "arccos0", "arccos1", "arccos2", "linear"}, default="fourier"
        Candidate family: ``"fourier"``: ``sqrt(2/M) cos(w'x + b)`` with ``w``
        from ``kernel``'s spectral density at ``gamma`` (drawn by ``sampler``)
        and ``b ~ U[0, 2 pi]``, as :class:`~rfstream.RandomFourierFeatures`;
        ``"arccosN"``: ``sqrt(2/M) H(w'x) (w'x)^N``, ``w ~ N(0, I)``, the
        arc-cosine kernel of degree ``N`` (:class:`~rfstream.ArcCosineFeatures`);
        ``"linear"``: coordinates ``sqrt(d/M) x_w`` with ``w`` uniform on the
        ``d`` columns (linear kernel; candidates are successive random
        permutations of the columns, so they repeat only when ``M0 > d``).
    score_mode : {"balanced", "raw"}, default="balanced"
        See above.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        ``base="fourier"`` only.
    gamma : float > 0 or "auto", default=1.0
        ``base="fourier"`` only; "auto" is the papers' rule
        (:func:`rfstream.kernels.auto_gamma`, the rule used in the paper).
        A list of gammas (a grid) is searched by
        :func:`rfstream.pipeline.fit_dataset` and ``rfstream fit``, one whole
        fit per gamma (the standardizer's, the scoring pass, the ridge's two
        each; :mod:`rfstream.selection.gamma_loop`): the passes score
        candidates drawn for one gamma, so they cannot be shared between gammas.
        Fitted directly, the map takes one gamma.
    sampler : {"mc", "qmc", "orthogonal"}, default="mc"
        How the candidate frequencies are drawn (``base="fourier"`` only).
    random_state : int, numpy Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"

    Attributes
    ----------
    scores_ : ndarray of shape (n_candidates,)
        The score of every candidate (float64).
    selected_ : ndarray of shape (n_components,)
        Indices of the kept candidates, best first.
    base_map_ : RandomFourierFeatures, ArcCosineFeatures or None
        The fitted map of the kept features (``None`` for ``base="linear"``).
    coordinates_ : ndarray of shape (n_components,) or None
        The kept columns (``base="linear"`` only).
    classes_ : ndarray or None
        Class labels (classification) or ``None`` (regression).
    n_subsample_ : int
        ``N0``, the number of rows scored (at least ``min(N, 2000)``).
    gamma_ : float or None
    seed_ : int
        Seed of the candidates and the subsample.
    n_features_in_ : int

    Notes
    -----
    Cost of ``fit``: one pass over the rows, ``O(M0 N0 d)`` (``O(M0 N0)`` for
    "linear") plus ``O(M0 log M0)`` for the sort; for dask ``y`` of a
    classification task a ``da.unique(y)`` pass first (the labels only).
    When ``subsample * N < 4000`` the keys of all ``N`` rows are generated
    first, on the client (no data read, ``O(2000)`` memory), to find the
    top-up threshold.  ``transform`` costs what the base map with ``M`` features costs.

    References
    ----------
    S. Shahrampour, A. Beirami and V. Tarokh, "On Data-Dependent Random
    Features for Improved Generalization in Supervised Learning", AAAI 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import EERFFeatures
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> eerf = EERFFeatures(20, subsample=1.0, random_state=0).fit(X, y)
    >>> eerf.transform(X).shape, eerf.scores_.shape
    ((300, 20), (200,))
    """

    _fitted_rule = staticmethod(scored_state)  # what a saved model's fitted state must hold

    def _select(self, scores):
        return top_m(scores, self.n_components)
