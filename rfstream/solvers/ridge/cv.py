"""Ridge's cross-validation: the alpha path of every (gamma, fold), and the pass that scores it.

Each training Gram ("all folds but k") is solved for every alpha with no pass: a Cholesky solve per
alpha, or for many alphas one reduction ``G = Q T Q'`` they share (:func:`search_path`; the path of
Hastie, Tibshirani & Friedman, The Elements of Statistical Learning, 2nd ed., Section 3.4.1); the
held-out squared error comes from fold k's partials.  A classifier's metric (error rate, balanced error, AUC)
takes one scoring pass that predicts every held-out row with every candidate at once
(:func:`score_pass`): two passes in all, whatever the grid.  docs/ridge.md.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ... import lapack
from ...cluster import client_map, compute
from ...devices import is_numpy, symmetric_eigh
from ...options import ParameterWarning
from ...reductions import Layout
from ..passes import RowSpec, row_sum, sub_blocks, weight_fields
from ..targets import encode_classes, signed
from .gram import group_chunk, group_spec
from .on_device import device_held_out_decisions
from .platt import DECISION_BINS, count_decisions


def check_alpha(alpha):
    alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64)) if not isinstance(alpha, str) else None
    if alphas is None or alphas.ndim != 1 or alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas < 0):
        raise ValueError(
            f"alpha must be a float >= 0 or a non-empty list of floats >= 0; got {alpha!r}."
        )
    return alphas


def check_totals(totals):
    """Refuse a Gram pass that saw no rows, non-finite values or only zero weights."""
    for total in totals:
        if total["m"] == 0:
            raise ValueError("cannot fit on 0 rows: X is empty.")
        if not all(np.isfinite(v).all() for v in total.values()):
            raise ValueError(
                "X, y or sample_weight contains NaN or infinity (the Gram reduction is not "
                "finite); remove or impute them before fitting."
            )
        if total["n"] <= 0:
            raise ValueError("every row has weight zero (sample_weight times class_weight): nothing "
                             "to fit; give some rows a weight > 0.")


def normal_equations(stats, fit_intercept):
    """(G, C, mu, nu): Z'Z and Z'Y, centred on the row means mu, nu if fitting an intercept.

    The centred Gram ``G - n mu mu'`` is made in place of its outer product: the same numbers as
    ``G - n * np.outer(mu, mu)``, without its second temporary D x D array (docs/ridge.md)."""
    if not fit_intercept:
        return stats["G"], stats["C"], np.zeros(stats["G"].shape[0]), np.zeros(stats["C"].shape[1])
    n = max(stats["n"], 1.0)
    mu, nu = stats["s"] / n, stats["t"] / n
    G = np.outer(mu, mu)
    G *= n
    np.subtract(stats["G"], G, out=G)
    C = stats["C"] - n * np.outer(mu, nu)
    return G, C, mu, nu


def solve(G, C, alpha):
    """(G + alpha I)^-1 C by Cholesky, falling back to least squares if singular; the
    factor is one copy of ``G``, unscanned (the caller checked the partials); without the GIL
    (:mod:`rfstream.lapack`), so that :func:`rfstream.cluster.client_map`'s threads run at once."""
    A = np.array(G, dtype=np.float64, order="F", copy=True)
    A[np.diag_indices_from(A)] += alpha
    try:
        return lapack.potrs(lapack.potrf(A, overwrite_a=True), C)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        return scipy.linalg.lstsq(G + alpha * np.eye(G.shape[0]), C, cond=None)[0]


def held_out_moments(mu, nu, fold):
    """``(AA, AB, BB)``: the second moments of one fold's centred features and targets,
    ``(z - mu)``, ``(y - nu)``, from its partials: once per fold, for every alpha."""
    n, s, t = fold["n"], fold["s"], fold["t"]
    AA = fold["G"] - np.outer(s, mu) - np.outer(mu, s) + n * np.outer(mu, mu)
    AB = fold["C"] - np.outer(s, nu) - np.outer(mu, t) + n * np.outer(mu, nu)
    BB = np.trace(fold["B"]) - 2 * t @ nu + n * nu @ nu
    return AA, AB, BB


def held_out_sse(W, moments):
    """Squared error on one fold of the predictions (z - mu) W + nu, from its
    :func:`held_out_moments`."""
    AA, AB, BB = moments
    return BB - 2 * np.sum(W * AB) + np.sum(W * (AA @ W))


#: From this many alphas on, one reduction per (gamma, fold) serves every alpha
#: (:func:`tridiagonal_path`); below it each (fold, alpha) is one Cholesky solve, the cheaper for a
#: few.  The rule and its measurement: docs/ridge.md, "The route of each (gamma, fold)".
SHARED_MIN_ALPHAS = 11


def tridiagonal_reduction(G):
    """``(c, d, e, tau)`` of ``G = Q T Q'`` (LAPACK ``dsytrd``, lower; Golub & Van Loan, Matrix
    Computations, 4th ed., Algorithm 8.3.1, blocked): ``T``'s diagonal ``d`` and off-diagonal ``e``,
    ``Q``'s Householder vectors below the subdiagonal of ``c`` with their factors ``tau``.  ``G``
    is not modified (LAPACK works on a copy, without the GIL: :mod:`rfstream.lapack`)."""
    return lapack.sytrd(G)


def apply_q(reduction, X, trans):
    """``Q X`` (``trans="N"``) or ``Q' X`` (``"T"``) of a :func:`tridiagonal_reduction`, by LAPACK
    ``dormqr``: the vectors of ``dsytrd``'s lower form are a QR factorization's of ``c[1:, :-1]``
    (as LAPACK's ``dormtr`` applies them), so ``Q`` is never formed."""
    c, _, _, tau = reduction
    return lapack.ormqr_below(c, tau, X, trans)


def tridiagonal_solve(reduction, QC, alpha):
    """``(T + alpha I)^-1 QC`` (LAPACK ``dptsv``, O(D T); ``dgtsv``'s LU where rounding leaves it
    not positive definite), or None where ``T + alpha I`` is singular (alpha = 0 on a singular Gram)."""
    _, d, e, _ = reduction
    _, _, x, info = scipy.linalg.lapack.dptsv(d + alpha, e, QC)
    if info == 0:
        return x
    _, _, _, x, info = scipy.linalg.lapack.dgtsv(e, d + alpha, e, QC)  # indefinite by rounding: LU
    return x if info == 0 else None


def tridiagonal_path(G, C):
    """``alpha -> (G + alpha I)^-1 C`` for many alphas from one reduction ``G = Q T Q'``
    (:func:`tridiagonal_reduction`, 4/3 D^3 flops): per alpha a tridiagonal solve and ``Q`` applied,
    O(D^2 T).  Exact, as a Cholesky solve per alpha; the shared reduction of the regularization path
    as Elden (1977, "Algorithms for the regularization of ill-conditioned least squares problems",
    BIT 17, Section 3) does it with a bidiagonalization.  ``G`` must be symmetric (its lower
    triangle is read); alpha = 0, or ``T + alpha I`` singular: :func:`solve` (as the per-alpha route)."""
    reduction = tridiagonal_reduction(G)
    QC = apply_q(reduction, C, "T")

    def at(a):
        x = tridiagonal_solve(reduction, QC, a) if a > 0 else None
        return solve(G, C, a) if x is None else apply_q(reduction, x, "N")

    return at


def _eigen_path(G, C, values):
    """``alpha -> (G + alpha I)^-1 C`` from the eigendecomposition ``values = (e, V)`` of ``G``."""
    e, V = values
    VC = V.T @ C

    def at(a):
        return V @ (VC / (np.maximum(e, 0) + a)[:, None]) if a > 0 or e.min() > 0 else solve(G, C, a)

    return at


def search_path(G, C, n_alphas):
    """``alpha -> (G + alpha I)^-1 C`` by the cheapest exact route for ``n_alphas`` alphas: a Cholesky
    solve per alpha below :data:`SHARED_MIN_ALPHAS`, else one shared reduction (on the job's GPU, an
    eigendecomposition, where :func:`rfstream.devices.symmetric_eigh` makes one)."""
    if n_alphas < SHARED_MIN_ALPHAS:
        return lambda a: solve(G, C, a)
    on_device = symmetric_eigh(G)
    return _eigen_path(G, C, on_device) if on_device is not None else tridiagonal_path(G, C)


def fold_path(stats, total, k, alphas, fit_intercept):
    """``(W (D, A x T), b (A x T), sse (A,), n)`` of scored fold ``k``: its training Gram ("all folds
    but k") solved for every alpha by :func:`search_path`, each model's held-out squared error from the
    fold's partials; zeros for a fold with no weight."""
    D, T = total["C"].shape
    fold = {key: v[k] for key, v in stats.items()}
    W_all, b_all, sse = np.zeros((D, alphas.size * T)), np.zeros(alphas.size * T), np.zeros(alphas.size)
    if fold["n"] == 0:
        return W_all, b_all, sse, 0.0
    train = {key: total[key] - fold[key] for key in total}
    G, C, mu, nu = normal_equations(train, fit_intercept)
    del train
    path = search_path(G, C, alphas.size)
    moments = held_out_moments(mu, nu, fold)
    for i, a in enumerate(alphas):
        W = path(a)
        sse[i] = held_out_sse(W, moments)
        W_all[:, i * T:(i + 1) * T], b_all[i * T:(i + 1) * T] = W, nu - mu @ W
    return W_all, b_all, sse, float(fold["n"])


def alpha_path(stats, total, alphas, scored, fit_intercept):
    """``(W, b, sse, n)``: the weights (K, D, A x T) and intercepts (K, A x T) of every
    (scored fold, alpha), their held-out squared errors (K, A) and the folds' weights
    (K,), by :func:`fold_path`; no data pass."""
    return grid_paths([stats], [total], alphas, scored, fit_intercept)[0]


def grid_paths(stats, totals, alphas, scored, fit_intercept):
    """:func:`alpha_path` of every gamma (``stats``, ``totals``: one per gamma), the (gamma, fold)
    solves on the client's cores at once (:func:`rfstream.cluster.client_map`)."""
    D = totals[0]["C"].shape[0]
    units = [(g, k) for g in range(len(totals)) for k in range(scored)]
    shared = alphas.size >= SHARED_MIN_ALPHAS
    shown = ("factorizations of the folds' training Grams", 1 if shared else alphas.size,
             f"{'tridiagonal reduction' if shared else 'Cholesky'}, D={D:,}")
    done = client_map(lambda unit: fold_path(stats[unit[0]], totals[unit[0]], unit[1], alphas, fit_intercept),
                      units, width=D, shown=shown)
    paths = []
    for g in range(len(totals)):
        parts = done[g * scored:(g + 1) * scored]
        paths.append(tuple(np.stack([p[i] for p in parts]) for i in range(4)))
    return paths


def grid_cross_validate(groups, y, stats, totals, alphas, cv, weights, *, scoring, classes,
                        fit_intercept, seed, platt=False):
    """``(table, cv_mse, best, platt_counts)``: :func:`rfstream.solvers.ridge.cv.cv_table` of
    every (gamma, alpha), the mean held-out squared error of each (same order), the index of the
    best candidate and, with ``platt`` (a classifier's scoring pass only), the best candidate's
    out-of-fold decision histograms (T, 2, DECISION_BINS) for Platt scaling, else None.

    ``groups``: the :class:`rfstream.solvers.ridge.gram.FeatureGroups` of the Gram
    pass, ``stats``/``totals`` its per-group partials and their sums over folds;
    ``cv`` and ``weights`` as the pass had them.
    """
    scored = cv[1]
    paths = grid_paths(stats, totals, alphas, scored, fit_intercept)
    fold_n = paths[0][3]
    sse = np.concatenate([p[2] for p in paths], axis=1)  # (K, G x A)
    cv_mse = sse.sum(axis=0) / max(fold_n.sum(), 1.0)
    bound, parts = None, None
    if scoring == "squared_error":
        with np.errstate(invalid="ignore", divide="ignore"):
            scores = sse / fold_n[:, None]
    else:
        counts, layout = score_pass(groups, y, [p[0] for p in paths], [p[1] for p in paths],
                                    scoring=scoring, classes=classes, cv=cv, weights=weights, seed=seed,
                                    platt=platt)
        parts = [layout.unpack(part) for part in np.split(compute(counts), groups.n_groups)]
        per_group = [fold_scores(part, scoring) for part in parts]
        scores = np.concatenate([s for s, _ in per_group], axis=1)
        if scoring == "roc_auc":
            bound = np.concatenate([b for _, b in per_group], axis=1)
    table = cv_table(alphas, scores, fold_n, scoring, bound, gammas=groups.gammas)
    best = best_candidate(table)
    return table, cv_mse, best, chosen_platt(parts, best, alphas.size) if platt and parts else None


def chosen_platt(parts, best, n_alphas):
    """The Platt histograms (T, 2, DECISION_BINS) of candidate ``best`` (gamma-major, as
    :func:`cv_table`) from a scoring pass's unpacked counts per group ``parts``."""
    group, a = divmod(best, n_alphas)
    return parts[group]["platt"][a].copy()


def grid_edge(values, chosen):
    """"smallest" or "largest" when ``values[chosen]`` is at that end of three or more
    distinct values (the best may lie outside the grid), else None."""
    values = np.asarray(values, dtype=np.float64)
    if np.unique(values).size < 3:
        return None
    value = values[chosen]
    return "smallest" if value == values.min() else "largest" if value == values.max() else None


def warn_on_edge(values, chosen, name, labels=None):
    """Warn when the choice sits on the edge of the grid (:func:`grid_edge`), naming the
    direction to extend it; returns the side or None."""
    side = grid_edge(values, chosen)
    if side is not None:
        shown = labels[chosen] if labels is not None else f"{float(np.asarray(values)[chosen]):g}"
        towards = "smaller" if side == "smallest" else "larger"
        warnings.warn(f"the chosen {name}={shown} is the {side} of its grid; the best may lie beyond "
                      f"it: extend the grid towards {towards} {name} values.", UserWarning, stacklevel=4)
    return side


def warn_on_largest_size(sizes, chosen):
    """Warn when the chosen ``n_components`` is the largest of a list of two or more sizes:
    a larger map may score better.  Returns whether it warned."""
    sizes = np.asarray(sizes)
    largest = np.unique(sizes).size >= 2 and sizes[chosen] == sizes.max()
    if largest:
        warnings.warn(ParameterWarning(
            "the chosen {n_components=} is the largest of its list; the best may lie beyond it: extend the "
            "list towards larger {n_components} values (the Gram's memory grows as their square)",
            n_components=int(sizes[chosen])), stacklevel=4)
    return bool(largest)


#: The metrics that ``scoring=`` names; the classifiers' default is "error_rate".
CLASSIFIER_SCORINGS = ("error_rate", "balanced_error", "roc_auc", "squared_error")
REGRESSOR_SCORINGS = ("squared_error",)
#: Metrics where a larger score is better (the others are errors).
GREATER_IS_BETTER = frozenset({"roc_auc", "log_evidence"})  # log_evidence: select="evidence"

#: Bin edges of the held-out decision values behind the CV AUC: 2^12 bins of equal angle,
#: tan(pi (k / 2^12 - 1/2)) (width 7.7e-4 at 0, where +-1 targets put them), open at both ends.
CV_AUC_EDGES = np.tan(np.pi * (np.arange(1, 2**12) / 2**12 - 0.5))
CV_AUC_BINS = CV_AUC_EDGES.size + 1


def score_layout(n_scored, n_candidates, n_classes, scoring, platt_targets=0):
    """The partials of the scoring pass: per-class weights (K, C), per-class weights
    predicted right (K, A, C), for "roc_auc" the histograms (K, A, CV_AUC_BINS), and with
    ``platt_targets`` T the held-out decisions' Platt histograms (A, T, 2, DECISION_BINS)
    (:mod:`rfstream.solvers.ridge.platt`)."""
    K, A, C = n_scored, n_candidates, n_classes
    shapes = {"weight": (K, C), "right": (K, A, C)}
    if scoring == "roc_auc":
        shapes.update(pos=(K, A, CV_AUC_BINS), neg=(K, A, CV_AUC_BINS))
    if platt_targets:
        shapes.update(platt=(A, platt_targets, 2, DECISION_BINS))
    return Layout(**shapes)


#: Up to this many columns (scored folds x candidates x targets), a dense block's decisions by every
#: fold's models are one product and each row keeps its own fold's; beyond it, one product per fold of
#: its rows, copied out.  The rule and its measurement: docs/ridge.md, "The scoring pass's products".
ONE_PRODUCT_COLUMNS = 32


def held_out_decisions(z, folds, W, b):
    """``z[i] W[k] + b[k]`` for each row i of fold k < len(W) (m, P); other rows NaN."""
    if not is_numpy(z):
        return device_held_out_decisions(z, folds, W, b)
    K, D, P = W.shape
    out = np.full((z.shape[0], P), np.nan)
    if isinstance(z, np.ndarray) and K * P <= ONE_PRODUCT_COLUMNS:
        every = (z @ W.transpose(1, 0, 2).reshape(D, K * P).astype(z.dtype)).reshape(-1, K, P)
        rows = np.flatnonzero(folds < K)
        out[rows] = every[rows, folds[rows]] + b[folds[rows]]
        return out
    for k in range(K):
        rows = np.flatnonzero(folds == k)
        if rows.size:
            zk = z[rows]
            out[rows] = np.asarray(zk @ W[k].astype(zk.dtype, copy=False), dtype=np.float64) + b[k]
    return out


@dataclass(frozen=True, eq=False, kw_only=True)
class ScoreSpec(RowSpec):
    """The scoring pass's :class:`rfstream.solvers.passes.RowSpec`: ``classes`` (encoded
    per row), ``W`` (K, D, A x T) and ``b`` (K, A x T) the weights of every (scored fold,
    candidate) of one group, and the ``scoring`` metric."""

    W: np.ndarray
    b: np.ndarray
    scoring: str


def score_chunk(z, *rows, offset, spec, out=None):
    """Counts of one row block (docs/ridge.md).

    ``z`` and ``rows`` (labels, then sample weights and fold indices when they travel)
    as in :func:`rfstream.solvers.ridge.gram.gram_chunk`; ``spec`` a :class:`ScoreSpec`.
    """
    W, b, layout = spec.W, spec.b, spec.layout
    out = layout.empty() if out is None else out
    m = z.shape[0]
    if m == 0:
        return out
    folds = spec.row_folds(m, rows, offset)
    c = spec.row_weights(rows, offset)
    c = np.ones(m) if c is None else c
    codes = encode_classes(spec.take(rows)["y"], spec.classes)
    blocks = sub_blocks(z, spec, W.shape[1])  # stored sub-blocks sliced, or features made
    parts = layout.unpack(out)
    for start, stop, zs in blocks:  # decisions of one sub-block at a time: (rows x A T) floats
        rows_s = slice(start, stop)
        _add_counts(parts, held_out_decisions(zs, folds[rows_s], W, b), folds[rows_s], codes[rows_s],
                    c[rows_s], spec.scoring)
    return out


def _add_counts(parts, dec, folds, codes, c, scoring):
    """Add the counts of held-out decisions ``dec`` (m, A x T) into ``parts``."""
    K, A, C = parts["right"].shape
    keep = folds < K  # rows of no scored fold (PredefinedSplit's training-only rows)
    folds, codes, c, dec = folds[keep], codes[keep], c[keep], dec[keep].reshape(-1, A, dec.shape[1] // A)
    parts["weight"] += np.bincount(folds * C + codes, weights=c, minlength=K * C).reshape(K, C)
    pred = (dec[:, :, 0] > 0).astype(np.intp) if dec.shape[2] == 1 else np.argmax(dec, axis=2)
    if "platt" in parts:  # every candidate's out-of-fold decisions, for Platt's sigmoid (platt.py)
        T = dec.shape[2]
        count_decisions(parts["platt"].reshape(A * T, 2, DECISION_BINS), dec.reshape(-1, A * T),
                        np.tile(signed(codes, C) > 0, (1, A)), c)
    for a in range(A):
        right = pred[:, a] == codes
        parts["right"][:, a] += np.bincount(folds[right] * C + codes[right], weights=c[right],
                                            minlength=K * C).reshape(K, C)
        if scoring == "roc_auc":
            bins = np.searchsorted(CV_AUC_EDGES, dec[:, a, 0], side="right")
            for label, name in ((1, "pos"), (0, "neg")):
                rows = codes == label
                parts[name][:, a] += np.bincount(folds[rows] * CV_AUC_BINS + bins[rows], weights=c[rows],
                                                 minlength=K * CV_AUC_BINS).reshape(K, CV_AUC_BINS)


def score_pass(groups, y, W, b, *, scoring, classes, cv, weights, seed, platt=False):
    """``(counts, layout)``: the packed counts of the scoring pass (lazy for dask) and the
    layout of one group's counts, group g at ``counts[g * layout.size:(g + 1) * layout.size]``.

    ``groups``: :func:`rfstream.solvers.ridge.gram.feature_groups`; ``W``, ``b``: each
    group's weights (K, D, A x T) and (K, A x T); ``cv`` (:func:`rfstream.solvers.folds.check_cv`)
    and ``weights`` ``(sample_weight, weight_args)`` as the Gram pass had them; ``platt``: count
    every candidate's held-out decisions for Platt scaling too.
    """
    n_folds, scored, folds = cv
    n_targets = len(classes) if len(classes) > 2 else 1
    layout = score_layout(scored, W[0].shape[2] // n_targets, len(classes), scoring,
                          platt_targets=n_targets if platt else 0)
    w, weight_args = weights
    spec = ScoreSpec(layout=layout, n_folds=n_folds, seed=seed, W=W[0], b=b[0], scoring=scoring,
                     classes=classes, class_weight=weight_fields(weight_args)["class_weight"])
    models = [{"W": Wg, "b": bg} for Wg, bg in zip(W, b)]
    counts = row_sum(group_chunk, groups.n_groups * layout.size, groups.rows,
                     group_spec(score_chunk, groups, spec, models), y=y, w=w, folds=folds)
    return counts, layout


def fold_scores(parts, scoring):
    """``(scores, bound)``: the score of every (scored fold, candidate), (K, A), from the
    reduced counts; NaN for a fold with no weight.  ``bound`` (K, A) is the AUC's
    error bound for "roc_auc", else None."""
    weight, right = parts["weight"], parts["right"]
    total = weight.sum(axis=1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        if scoring == "error_rate":
            return 1.0 - right.sum(axis=2) / total, None
        if scoring == "balanced_error":
            recall = right / weight[:, None, :]  # NaN for a class with no weight in the fold: left out
            return 1.0 - np.nanmean(np.where(weight[:, None, :] > 0, recall, np.nan), axis=2), None
        pos, neg = parts["pos"], parts["neg"]
        pairs = pos.sum(axis=2) * neg.sum(axis=2)
        below = np.cumsum(neg, axis=2) - neg
        auc = np.sum(pos * (below + 0.5 * neg), axis=2) / pairs
        return auc, 0.5 * np.sum(pos * neg, axis=2) / pairs


def cv_table(alphas, scores, fold_weight, scoring, bound=None, gammas=None):
    """``cv_results_``: the candidates, mean and std of the score over the folds, and
    the per-fold scores (candidates, K).

    Candidates are the alphas, or with a gamma grid every (gamma, alpha), gamma by
    gamma: ``scores`` (K, G x A) and columns "gamma" and "alpha" of G x A entries.
    The mean of "squared_error" and "error_rate" weights each fold by its (weighted)
    rows: the score of all held-out predictions together (``cv_mse_`` for
    "squared_error"); "balanced_error" and "roc_auc" average the folds' scores.
    The std is over the folds, unweighted (``np.std``, as ``GridSearchCV``).
    Folds with no weight are left out.
    """
    valid = fold_weight > 0
    s = scores[valid]
    if scoring in ("squared_error", "error_rate"):
        mean = fold_weight[valid] @ s / fold_weight[valid].sum()
    else:
        mean = np.mean(s, axis=0)
    alphas = np.asarray(alphas, dtype=np.float64)
    groups = mean.size // alphas.size  # several sizes of n_components, or gammas: alpha within each group
    table = {"alpha": np.tile(alphas, groups), "scoring": scoring, "mean_score": mean,
             "std_score": np.std(s, axis=0), "fold_scores": scores.T.copy()}
    if gammas is not None:
        gammas = np.asarray(gammas, dtype=np.float64)
        table = {"gamma": np.repeat(gammas, alphas.size), **table, "alpha": np.tile(alphas, gammas.size)}
    if bound is not None:
        table["auc_error_bound"] = bound.T.copy()
    return table


def best_candidate(table):
    """Index of the best mean score; of equal ones (error rates tie often), the first
    in the list, as ``np.argmin`` of the explicit loop."""
    mean = table["mean_score"]
    return int(np.nanargmax(mean) if table["scoring"] in GREATER_IS_BETTER else np.nanargmin(mean))
