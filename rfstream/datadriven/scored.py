"""Features chosen by their score against the labels: the candidates and the one scoring pass.

EERF (:mod:`rfstream.datadriven.eerf`, Shahrampour et al. 2018) and LKRF
(:mod:`rfstream.datadriven.lkrf`, Sinha & Duchi 2016) draw ``M0`` candidate features, score
each by ``S(w) = (1/N0) sum_n y_n phi(x_n, w)`` (EERF eq. 7) over a subsample of ``N0`` rows,
and differ only in how they turn the scores into ``M`` features.  The statistics of all
candidates come from ONE pass (:func:`label_statistics`).  Departs from the paper: at least
``min(N, MIN_SCORED_ROWS)`` rows are scored whatever ``subsample`` says.  The pass, the
subsample and the balanced score: docs/eerf.md, "What is implemented".
"""
from __future__ import annotations

import copy
import itertools
import math
from functools import partial
from numbers import Integral, Real
from typing import ClassVar

import dask.array as da
import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from .._validation import check_dask_array
from ..cluster import compute
from ..features.arccos import ArcCosineFeatures
from ..features.base import KERNEL_PARAMETERS, FeatureMap
from ..features.fourier import FOURIER_PARAMETERS, RandomFourierFeatures
from ..random import STREAM_EERF_SUBSAMPLE, row_uniform
from ..reductions import Layout, sum_rows
from ..samplers import check_sampler
from ..solvers.targets import check_targets, find_classes

__all__ = ["BASES", "MIN_SCORED_ROWS", "LabelScoredFeatures", "label_statistics",
           "scores_from_statistics", "scoring_threshold", "subsample_mask"]

#: candidate feature families: phi(x, w) and the distribution of w
BASES = ("fourier", "arccos0", "arccos1", "arccos2", "linear")
#: rows of candidate features a task holds at once (slices cut at global multiples)
SCORE_ROWS = 4096
#: the score reads at least min(N, MIN_SCORED_ROWS) rows whatever ``subsample`` says (why
#: this many: docs/eerf.md, "M0 and N0")
MIN_SCORED_ROWS = 2000
#: the pass runs on the Bernoulli rows first when ``subsample * N >= BERNOULLI_MARGIN * m``
BERNOULLI_MARGIN = 2.0
#: keys read in one go by :func:`scoring_threshold` (256 virtual blocks)
_KEY_SLICE = 1 << 20


# ----------------------------------------------------------------- the pass
def subsample_mask(seed: int, start: int, stop: int, fraction: float) -> np.ndarray:
    """Mask of the global rows ``start:stop`` whose key from ``(seed, STREAM_EERF_SUBSAMPLE, i)``
    is below ``fraction`` (:func:`scoring_threshold`): the subsample, whatever the chunking."""
    if fraction >= 1.0:
        return np.ones(stop - start, dtype=bool)
    return row_uniform(seed, STREAM_EERF_SUBSAMPLE, start, stop) < fraction


def _kth_smallest_key(seed: int, n: int, k: int) -> float:
    """The ``k``-th smallest key of the rows ``0:n`` (``1 <= k <= n``), in O(k) memory."""
    best = np.empty(0)
    for start in range(0, n, _KEY_SLICE):
        keys = np.concatenate([best, row_uniform(seed, STREAM_EERF_SUBSAMPLE, start,
                                                 min(start + _KEY_SLICE, n))])
        best = np.partition(keys, k - 1)[:k] if keys.size > k else keys
    return float(best.max())


def scoring_threshold(seed: int, n: int, fraction: float, minimum: int = MIN_SCORED_ROWS) -> float:
    """The key threshold of the scored rows: ``max(fraction, just above u_(m))``, ``m = min(n, minimum)``,
    ``u_(m)`` the ``m``-th smallest key, so that ``N0 >= m``; reads the keys (no data) of all
    ``n`` rows unless ``fraction >= 1`` or ``n <= minimum``."""
    if fraction >= 1.0 or n <= minimum:
        return 1.0
    return max(float(fraction), float(np.nextafter(_kth_smallest_key(seed, n, minimum), 2.0)))


def _statistics_layout(n_responses: int, n_candidates: int) -> Layout:
    return Layout(n=(), sy=(n_responses,), syy=(n_responses,), sphi=(n_candidates,),
                  syphi=(n_responses, n_candidates))


def _responses(y, classes) -> np.ndarray:
    """``(rows, K)`` float64 responses: class indicators (one-vs-rest) or the target."""
    if classes is None:
        return np.asarray(y, dtype=np.float64)[:, None]
    return (np.asarray(y)[:, None] == np.asarray(classes)[None, :]).astype(np.float64)


def _statistics_chunk(x, y, offset, *, features, n_candidates, classes, seed, fraction):
    """Sums over the subsample rows of one block, packed by :func:`_statistics_layout`."""
    n_resp = 1 if classes is None else len(classes)
    lay = _statistics_layout(n_resp, n_candidates)
    out = lay.empty()
    part = lay.unpack(out)
    stop = offset + x.shape[0]
    keep = subsample_mask(seed, offset, stop, fraction)
    bounds = [offset, *range((offset // SCORE_ROWS + 1) * SCORE_ROWS, stop, SCORE_ROWS), stop]
    for a, b in itertools.pairwise(bounds):
        rows = np.flatnonzero(keep[a - offset : b - offset]) + (a - offset)
        if rows.size == 0:
            continue
        phi = features(x[rows])
        Y = _responses(y[rows], classes)
        part["n"][...] += rows.size
        part["sy"] += Y.sum(axis=0)
        part["syy"] += (Y * Y).sum(axis=0)
        part["sphi"] += phi.sum(axis=0, dtype=np.float64)
        part["syphi"] += Y.T.astype(phi.dtype) @ phi
    return out


def label_statistics(X, y, features, n_candidates, *, classes, seed, fraction):
    """The per-candidate sums over the subsample (a dict of float64 arrays), ONE pass over ``X``
    and ``y``; ``features(x)`` gives a block's ``n_candidates`` features; ``classes`` or None."""
    n_resp = 1 if classes is None else len(classes)
    lay = _statistics_layout(n_resp, n_candidates)
    chunk = partial(_statistics_chunk, features=features, n_candidates=n_candidates,
                    classes=classes, seed=seed, fraction=fraction)
    vec = np.asarray(compute(sum_rows(chunk, lay.size, X, y)), dtype=np.float64)
    return {k: v.copy() for k, v in lay.unpack(vec).items()}


def scores_from_statistics(stats, *, score="balanced", classification=True, y_range=None):
    """Per-candidate scores ``|S(w)|`` (``sqrt(sum_k S_k(w)^2)`` over responses) from the sums.

    * ``score_mode="raw"`` -- eq. 7 as printed: ``S_k = (1/N0) sum_n y_nk phi(x_n, w)``
      with ``y_nk = +-1`` (one-vs-rest) for classes, and the target scaled to
      ``[-1, 1]`` by ``y_range = (min, max)`` for regression (the paper's
      "responses normalized to [-1, 1]").
    * ``score_mode="balanced"`` -- the responses are centred and scaled to unit
      variance over the subsample: ``S_k = cov(y_k, phi) / var(y_k)``.  For a
      class indicator that is ``mean(phi | class k) - mean(phi | not k)``, the
      same for a 2% class as for a 50% class.
    """
    n = float(stats["n"])
    if n < 1:
        raise ValueError(
            "subsample selected no training row; increase subsample (the fraction of rows scored)."
        )
    sy, syy, sphi, syphi = stats["sy"], stats["syy"], stats["sphi"], stats["syphi"]
    if score == "balanced":
        mean_y = sy / n
        var_y = syy / n - mean_y**2
        if np.any(var_y <= 1e-12 * np.maximum(syy / n, 1e-300)):
            what = "a class present on every row or on none" if classification else "a constant target"
            raise ValueError(
                f"y has {what} among the {int(n)} subsample rows: the score needs varying "
                "responses. Increase subsample or check y."
            )
        S = (syphi / n - np.outer(mean_y, sphi / n)) / var_y[:, None]
    elif classification:
        S = (2.0 * syphi - sphi[None, :]) / n  # y = +1 in class k, -1 elsewhere
    else:
        lo, hi = y_range
        a = 2.0 / (hi - lo) if hi > lo else 0.0
        S = (a * syphi - (1.0 + a * lo) * sphi[None, :]) / n  # y' = a (y - lo) - 1
    scores = np.sqrt((S * S).sum(axis=0))
    if not np.all(np.isfinite(scores)):
        raise ValueError("the candidate scores are not finite: X or y contains NaN or inf.")
    return scores


def _coordinate_block(x, *, index, scale, dtype):
    """Features ``scale * x[:, index]`` (the linear kernel's coordinate features)."""
    cols = x[:, index]
    cols = cols.toarray() if sp.issparse(cols) else np.asarray(cols)
    return np.multiply(cols, scale, dtype=dtype)


def _keep_columns(fmap, index):
    """A copy of a fitted RFF / arc-cosine map with only the features ``index``."""
    out = copy.deepcopy(fmap)
    out.n_components = len(index)
    out.random_weights_ = np.ascontiguousarray(fmap.random_weights_[:, index])
    if hasattr(fmap, "random_offset_"):
        out.random_offset_ = fmap.random_offset_[index]
    return out


# --------------------------------------------------------------- estimators

def scored_state(view):
    """The fitted state of a map that keeps the best-scored candidates (EERF, LKRF; a saved
    model's, :mod:`rfstream.io.model_checks`): a score per candidate, the kept candidates'
    indices among them, and sorted distinct classes when the labels were classes."""
    candidates = view.array("scores_")
    if len(candidates) != 1:
        view.fail(f"scores_ has shape {candidates}, not (n_candidates,)")
    kept = view.array("selected_", kinds="iu", finite=False)
    if len(kept) != 1:
        view.fail(f"selected_ has shape {kept}, not (n_components,)")
    view.within("selected_", 0, candidates[0])
    if view.fitted.get("classes_") is not None:
        view.array("classes_", kinds="biuUS", finite=False)
        view.distinct_sorted("classes_")
    if "weights_" in view.fitted:
        view.array("weights_", candidates, nonnegative=True)


class LabelScoredFeatures(FeatureMap):
    """Base of EERF and LKRF: candidates, the score pass, and the kept features.

    Subclasses implement ``_select(scores) -> indices`` (``n_components`` of
    the ``n_candidates`` indices) and may add parameters.
    """

    _parameter_constraints: ClassVar[dict] = {
        **FeatureMap._parameter_constraints,
        **KERNEL_PARAMETERS,
        "n_candidates": [Interval(Integral, 1, None, closed="left"), None],
        "subsample": [Interval(Real, 0, 1, closed="right")],
        "base": [StrOptions(set(BASES))],
        "score_mode": [StrOptions({"balanced", "raw"})],
        "sampler": FOURIER_PARAMETERS["sampler"],
    }

    def __init__(
        self,
        n_components=100,
        *,
        n_candidates=None,
        subsample=0.1,
        base="fourier",
        score_mode="balanced",
        kernel="gaussian",
        gamma=1.0,
        sampler="mc",
        random_state=None,
        dtype="float32",
    ):
        self.n_components = n_components
        self.n_candidates = n_candidates
        self.subsample = subsample
        self.base = base
        self.score_mode = score_mode
        self.kernel = kernel
        self.gamma = gamma
        self.sampler = sampler
        self.random_state = random_state
        self.dtype = dtype

    #: whether n_candidates must be >= n_components (False where features are sampled
    #: with replacement)
    _distinct_selection = True
    _y_purpose = "it scores candidate features against the labels"
    makes_data_pass = True

    def _select(self, scores):  # pragma: no cover - abstract
        raise NotImplementedError

    def _m0(self):
        return 10 * self.n_components if self.n_candidates is None else self.n_candidates

    def _check_params(self, n_features):
        if self._distinct_selection and self._m0() < self.n_components:
            raise ValueError(
                f"n_candidates must be >= n_components (M0 >= M); got n_candidates={self._m0()} "
                f"< n_components={self.n_components}."
            )
        if self.base == "fourier":
            check_sampler(self.sampler, self.kernel)
        elif self.sampler != "mc":
            raise ValueError(
                f"sampler={self.sampler!r} applies to base='fourier' only; got base={self.base!r}. "
                "Use sampler='mc'."
            )

    def _resolve_gamma(self, X, rng):
        return super()._resolve_gamma(X, rng) if self.base == "fourier" else None

    def _draw(self, rng, n_features):
        self.seed_ = int(rng.integers(0, 2**63 - 1))

    def _candidates(self):
        """``(features, fitted map or None, coordinates or None)`` of the ``M0`` candidates.

        A function of ``seed_`` only.  ``features(x)`` gives the candidate
        features of a block of rows (scaled for ``M0`` features; the scale
        does not change the ranking).
        """
        m0, d = self._m0(), self.n_features_in_
        rng = np.random.default_rng([self.seed_, 1])
        dtype = self._output_dtype()
        if self.base == "linear":
            perms = [rng.permutation(d) for _ in range(-(-m0 // d))]
            index = np.concatenate(perms)[:m0]
            return partial(_coordinate_block, index=index, scale=1.0, dtype=dtype), None, index
        seed = int(rng.integers(0, 2**32 - 1))  # a random_state every map accepts
        if self.base == "fourier":
            fmap = RandomFourierFeatures.for_columns(
                d, n_components=m0, kernel=self.kernel, gamma=self.gamma_, sampler=self.sampler,
                random_state=seed, dtype=self.dtype)
        else:
            fmap = ArcCosineFeatures.for_columns(d, n_components=m0, degree=int(self.base[-1]),
                                                 random_state=seed, dtype=self.dtype)
        return fmap.block, fmap, None

    def _fit_data(self, X, y, seed):
        """Score the ``M0`` candidates in one pass over the rows and keep ``n_components``.

        ``y``: class labels (integer, bool or string dtype: one-vs-rest
        responses) or a float regression target.
        """
        if isinstance(X, da.Array):  # the subsample's size depends on the number of rows
            check_dask_array(X, known_rows=True)
        y = check_targets(X, y)
        classification = y.dtype.kind in "biuOUS"
        classes, y_range = None, None
        if classification:
            self.classes_ = classes = find_classes(y, name=type(self).__name__)
            classes = classes[1:] if classes.size == 2 else classes
        else:
            self.classes_ = None
            if self.score_mode == "raw":
                y_range = tuple(float(v) for v in compute(y.min(), y.max()))
        features, fmap, coords = self._candidates()
        stats = self._score_pass(X, y, features, classes)
        self.n_subsample_ = int(stats["n"])
        self.scores_ = scores_from_statistics(stats, score=self.score_mode,
                                              classification=classification, y_range=y_range)
        index = np.asarray(self._select(self.scores_), dtype=np.int64)
        self.selected_ = index
        if fmap is None:
            self.base_map_ = None
            self.coordinates_ = coords[index]
        else:
            self.base_map_ = _keep_columns(fmap, index)
            self.coordinates_ = None

    def _score_pass(self, X, y, features, classes):
        """The statistics over ``N0 >= min(N, MIN_SCORED_ROWS)`` rows (:func:`scoring_threshold`).

        When ``subsample * N >= 2 m`` (:data:`BERNOULLI_MARGIN`) the Bernoulli
        subsample holds ``m`` rows or more but with probability ``1 - exp(-m /
        4)`` (Chernoff), and its threshold is then ``subsample`` itself: the
        pass runs on it without reading the ``N`` keys first, and again on the
        exact threshold only if it fell short.
        """
        n, fraction = int(X.shape[0]), float(self.subsample)
        m = min(n, MIN_SCORED_ROWS)

        def run(threshold):
            return label_statistics(X, y, features, self._m0(), classes=classes, seed=self.seed_,
                                    fraction=threshold)

        if fraction * n >= BERNOULLI_MARGIN * m:
            stats = run(fraction)
            if stats["n"] >= m:
                return stats
        return run(scoring_threshold(self.seed_, n, fraction, MIN_SCORED_ROWS))

    @property
    def _n_features_out(self):
        return self.selected_.shape[0]

    def _block(self, x):
        if self.base_map_ is not None:
            return self.base_map_.block(x)
        scale = math.sqrt(self.n_features_in_ / self.coordinates_.shape[0])
        return _coordinate_block(x, index=self.coordinates_, scale=scale, dtype=self._output_dtype())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
