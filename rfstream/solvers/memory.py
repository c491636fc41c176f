"""What ridge's solvers hold in memory, and the refusals made before the first pass.

The Gram solver holds G x K x D^2 float64 per task's partial, "pcg" D x r on the client, "cg"
D x P for its P systems; :func:`check_ridge_memory` applies these models to an estimator's
parameters and planned width so that :func:`rfstream.pipeline.check_model` can refuse a fit
before any pass.  The models against measured peaks: docs/wide.md; the narrative:
docs/design-notes.md, "Solvers' shared modules".
"""
from __future__ import annotations

from numbers import Integral

import numpy as np

from ..cluster import worker_memory
from ..options import ParameterError
from ..sizes import client_limit
from .ridge.gram import SUB_BLOCK
from .ridge.nystrom_pcg import ROWS_PER_RANK

#: solver="auto" switches from the D x D Gram pass to conjugate gradients for sparse
#: features wider than this (a float64 Gram of 4096 x 4096 is 128 MiB per partial);
#: dense features keep the one-pass Gram (CG costs a pass per iteration).
CG_MIN_FEATURES = 4096

#: D x P float64 arrays the client holds at the peak of a CG solve of P systems
#: (:func:`cg_memory`).
CG_CLIENT_COPIES = 12

PCG_HINT = "{solver='pcg' (CLI)}, whose memory is D x {pcg_rank}"
LOO_HINT = "{cv='loo' (CLI)}, which needs one Gram"


def gram_memory(n_groups, n_folds, n_features, n_targets):
    """``(need, limit, threads, partial)``: the bytes a worker needs for the Gram pass's
    partials (G x K x D^2 float64 each; about ``threads + 2`` of them at once: one per
    running task plus the two being added in the tree reduction) and each running task's
    float32 buffers (a :data:`rfstream.solvers.ridge.gram.SUB_BLOCK`-row sub-block of
    ``[Z, Y, 1]`` and its SYRK), the smallest worker's memory limit and threads
    (:func:`rfstream.cluster.worker_memory`), and one partial's bytes."""
    G, K, D, T = n_groups, n_folds, n_features, n_targets
    partial = 8 * G * K * (D * D + D * (T + 1) + T * T + 2)
    buffers = 4 * (SUB_BLOCK + D + T + 1) * (D + T + 1)
    limit, threads = worker_memory()
    return partial * (threads + 2) + buffers * threads, limit, threads, partial


def client_memory(n_groups, n_folds, n_features, n_targets, widths=None):
    """``(need, limit)``: the client's bytes for the solve, all held at its peak -- the reduced
    partials (:func:`gram_memory`'s, at the largest width D); with a list of sizes ``widths``
    each size's sliced K x w^2 partials (:func:`rfstream.solvers.ridge.gram.expand_sizes`);
    for K folds each candidate's sum over the folds, w^2 per (gamma, size), and one fold's
    working arrays, 6 D^2 (its training Gram, its centred copy, its factor or eigenvectors,
    LAPACK's workspace, the held-out moments and their outer products; measured with
    ``benchmarks/selection/plan_client_memory.py``, docs/plan.md); for
    leave-one-out the eigenvectors of every candidate and one D^2 more
    (:func:`rfstream.solvers.ridge.loo.loo_basis`) -- and :func:`client_limit`."""
    D, G, K = n_features, n_groups, n_folds
    widths = list(widths or [D])
    squares = sum(w * w for w in widths)  # one candidate of each size, per gamma
    sliced = 8 * G * K * squares if len(widths) > 1 else 0
    extra = 8 * (G * squares + 6 * D * D) if K > 1 else 8 * (G * squares + D * D)
    return gram_memory(G, K, D, n_targets)[3] + sliced + extra, client_limit()


def gram_fits(n_groups, n_folds, n_features, n_targets, widths=None):
    """Whether the Gram pass's partials fit the workers and the solve the client."""
    need, limit, _, _ = gram_memory(n_groups, n_folds, n_features, n_targets)
    client, client_max = client_memory(n_groups, n_folds, n_features, n_targets, widths)
    return need <= limit and client <= client_max


def check_gram_memory(n_groups, n_folds, n_features, n_targets, widths=None):
    """Refuse a Gram pass whose partials cannot fit a worker or whose solve cannot fit
    the client (:func:`gram_memory`, :func:`client_memory`; ``widths``: a list of sizes),
    naming the sizes, what to lower and the solver to use instead."""
    if gram_fits(n_groups, n_folds, n_features, n_targets, widths):
        return
    need, limit, threads, partial = gram_memory(n_groups, n_folds, n_features, n_targets)
    client, client_max = client_memory(n_groups, n_folds, n_features, n_targets, widths)
    G, K, D = n_groups, n_folds, n_features
    grid = f"{G} gammas x " if G > 1 else ""
    *others, last = ["the number of gammas"] * (G > 1) + ["{cv}"] * (K > 1) + ["{n_components}"]
    lower = f"{', '.join(others)} or {last}" if others else last
    where = (f"about {need / 2**30:.1f} GiB per worker with {threads} threads, over its "
             f"{limit / 2**30:.1f} GiB" if need > limit else
             f"and the client's solve {client / 2**30:.1f} GiB, over its {client_max / 2**30:.1f} GiB")
    raise ParameterError(
        f"the Gram pass needs {grid}{K} fold(s) x D^2 (D={D}) float64 partials: "
        f"{partial / 2**30:.2f} GiB per task, {where}; lower {lower}"
        + (f", or use {LOO_HINT}" if K > 1 and gram_fits(G, 1, D, n_targets, widths) else "")
        + (f", or use {PCG_HINT}" if G == 1 else "")
        + " (or machines with more memory).", n_components=None, cv=None, pcg_rank=None, solver=None
    )


def pcg_memory(n_features, rank, n_targets):
    """``(need, limit)``: the client's bytes for "pcg" -- the sampled rows' features (m =
    ``ROWS_PER_RANK`` r rows of D, counted as float64: float32 features take half), the
    float64 factor ``U`` (D x r), the m x m eigenproblem and the CG arrays of its
    ``n_targets`` systems (:func:`cg_memory`'s :data:`CG_CLIENT_COPIES` D x T) -- and
    :func:`client_limit`."""
    D, r, m = n_features, rank, ROWS_PER_RANK * rank
    return 8 * (D * (m + r) + 2 * m * m + CG_CLIENT_COPIES * D * n_targets), client_limit()


def check_pcg_memory(n_features, rank, n_targets):
    """Refuse a preconditioner that cannot fit the client, naming the memory needed and
    what to lower."""
    need, limit = pcg_memory(n_features, rank, n_targets)
    if need > limit:
        raise ParameterError("{solver=} with {pcg_rank=} at " f"D={n_features} needs about "
                             f"{need / 2**30:.1f} GiB on the client, over its {limit / 2**30:.1f} GiB; "
                             "lower {pcg_rank} (or {n_components}).", pcg_rank=rank, solver="pcg",
                             n_components=None)


def planned_folds(cv):
    """The folds an int / None / "loo" ``cv`` (or a splitter with ``get_n_splits()``, or a
    list of splits) gives the Gram pass: K, 1 for "loo", or None when only the data tell."""
    if cv is None or isinstance(cv, Integral):
        return 5 if cv is None else int(cv)
    if isinstance(cv, str):
        return 1
    if hasattr(cv, "get_n_splits"):
        try:
            return int(cv.get_n_splits())
        except (TypeError, ValueError):  # a splitter that needs the data (groups) to count
            return None
    return len(cv) if hasattr(cv, "__len__") else None


def use_loo_instead(cv, n_groups, n_folds, n_features, n_targets, widths=None):
    """Whether an int ``cv`` (or None) falls back to exact leave-one-out: its K per-fold
    Grams do not fit while one Gram does (the estimators warn when they do it)."""
    an_int = cv is None or isinstance(cv, Integral)
    return bool(an_int and n_folds > 1 and not gram_fits(n_groups, n_folds, n_features, n_targets, widths)
                and gram_fits(n_groups, 1, n_features, n_targets, widths))


def uses_iterations(solver, n_features, n_groups=1, sparse=False):
    """Whether a ridge ``solver`` ("auto", "gram", "cg", "pcg") solves by CG passes rather
    than the Gram pass: "cg" and "pcg", and "auto" on sparse features of one gamma wider
    than :data:`CG_MIN_FEATURES`."""
    return solver in ("cg", "pcg") or (solver == "auto" and sparse and n_groups == 1
                                       and n_features > CG_MIN_FEATURES)


def cg_memory(n_features, n_systems):
    """``(need, limit, client, client_max)``: the bytes of the D x P systems that "cg" and
    "pcg" solve together (:mod:`rfstream.solvers.ridge.cg`): a worker holds each product pass's
    float64 partial, D x P, once per running task plus the two being added in the tree
    reduction, and the client about twelve D x P float64 arrays at its peak (the iterates,
    residuals, directions, preconditioned residuals, right-hand sides, means and diagonals,
    and inside a product the directions' copy, the reduced partial and the terms added to
    it, :func:`rfstream.solvers.ridge.cg.solve_systems`: :data:`CG_CLIENT_COPIES`)."""
    partial = 8 * n_features * n_systems
    limit, threads = worker_memory()
    return partial * (threads + 2), limit, CG_CLIENT_COPIES * partial, client_limit()


def check_cg_memory(solver, n_features, n_systems):
    """Refuse ``n_systems`` CG systems (targets x alphas x (folds + 1),
    :func:`iterative_systems`) whose D x P arrays cannot fit the workers or the client
    (:func:`cg_memory`), naming the sizes and what to lower."""
    need, limit, client, client_max = cg_memory(n_features, n_systems)
    if need <= limit and client <= client_max:
        return
    where = (f"{need / 2**30:.1f} GiB per worker, over its {limit / 2**30:.1f} GiB" if need > limit else
             f"{client / 2**30:.1f} GiB on the client, over its {client_max / 2**30:.1f} GiB")
    raise ParameterError("{solver=} solves " f"{n_systems} systems together (targets x alphas x "
                         f"(folds + 1)) of D={n_features}: about {where}; lower the number of alphas, "
                         "{cv} or {n_components} (or machines with more memory).", solver=solver, cv=None,
                         n_components=None)


def search_memory(widths, n_groups, n_folds, n_alphas, n_targets):
    """``(need, limit, client, client_max)``: the bytes of a search's alpha path and scoring
    pass, over ``widths`` (the D of each listed ``n_components`` size, prefix maps sliced
    from the largest Gram, :func:`rfstream.solvers.ridge.gram.expand_sizes`) per gamma of
    ``n_groups``, ``n_folds`` K and ``n_alphas`` A: the client holds each candidate's K x D x
    A T float64 path beside all that its solve holds (:func:`client_memory`: the partials,
    each size's slices, the folds' sums); each running task of the scoring pass holds the
    paths and a sub-block's K x (candidates x A x T) float64 predictions."""
    G, K, A, T = n_groups, n_folds, n_alphas, n_targets
    paths = 8 * G * K * A * T * sum(widths)
    solve = client_memory(G, K, max(widths), T, widths if len(widths) > 1 else None)[0]
    predictions = 8 * SUB_BLOCK * K * G * len(widths) * A * T
    limit, threads = worker_memory()
    return threads * (paths + predictions), limit, paths + solve, client_limit()


def check_search_memory(widths, n_groups, n_folds, n_alphas, n_targets):
    """Refuse a search whose candidates (alphas x sizes x gammas) cannot be held
    (:func:`search_memory`), naming the sizes and what to lower."""
    need, limit, client, client_max = search_memory(widths, n_groups, n_folds, n_alphas, n_targets)
    if need <= limit and client <= client_max:
        return
    where = (f"{need / 2**30:,.1f} GiB per worker, over its {limit / 2**30:.1f} GiB" if need > limit else
             f"{client / 2**30:,.1f} GiB on the client, over its {client_max / 2**30:.1f} GiB")
    lower = ["the number of gammas"] * (n_groups > 1) + ["of {n_components} sizes (or the largest)"] \
        + ["{cv}"] * (n_folds > 1) + ["the number of alphas"]
    raise ParameterError(f"the search over {n_alphas:,} alphas x {len(widths):,} sizes x {n_groups} gamma(s) "
                         f"x {n_folds} fold(s) (D up to {max(widths):,}) needs about {where}; lower "
                         + ", ".join(lower[:-1]) + " or " + lower[-1] + " (or machines with more memory).",
                         alpha=None, n_components=None, cv=None)


def check_ridge_memory(ridge, n_features, n_targets, *, n_groups=1, sparse=False, widths=None):
    """Refuse what a ridge estimator's fit on ``n_features`` columns (per gamma of
    ``n_groups``) and ``n_targets`` targets cannot hold, as its own fit would just before
    its passes: "pcg"'s preconditioner on the client, the Gram pass's partials and solve
    for "gram" (and "auto" on dense or narrow features), with the folds its ``cv`` and
    ``alpha`` give (leave-one-out where an int ``cv``'s folds fall back to it), and the
    search's paths and scoring pass over every alpha and size of ``widths`` (the width of
    each listed ``n_components``, :func:`check_search_memory`); "cg" and "pcg" the D x P
    arrays of their systems (:func:`check_cg_memory`; P = T for one alpha).  A ``cv`` whose
    folds only the data tell is left to the fit."""
    if ridge.solver == "pcg":
        check_pcg_memory(n_features, min(ridge.pcg_rank, n_features), n_targets * iterative_systems(ridge))
    if uses_iterations(ridge.solver, n_features, n_groups, sparse):
        check_cg_memory(ridge.solver, n_features, n_targets * iterative_systems(ridge))
        return
    widths = list(widths or [n_features])
    searching = np.ndim(ridge.alpha) > 0 or n_groups > 1 or len(widths) > 1 or ridge.select == "evidence"
    n_folds = planned_folds(ridge.cv) if searching and ridge.select != "evidence" else 1
    if n_folds is None:
        return
    if searching and use_loo_instead(ridge.cv, n_groups, n_folds, n_features, n_targets, widths):
        n_folds = 1
    check_gram_memory(n_groups, n_folds, n_features, n_targets)  # the partials: their refusal names the way out
    if searching:  # the whole solve (each size's slices too), naming the counts of alphas and sizes
        check_search_memory(widths, n_groups, max(n_folds, 1), int(np.size(ridge.alpha)), n_targets)


def iterative_systems(ridge):
    """The systems per target that "cg" and "pcg" solve together: one, or for a list of A
    alphas (K + 1) A, K the folds of ``cv`` (:mod:`rfstream.solvers.ridge.cg_search`; 5 when only
    the data tell)."""
    if np.ndim(ridge.alpha) == 0:
        return 1
    folds = planned_folds(ridge.cv)
    return (5 if folds is None else folds + 1) * np.size(ridge.alpha)


#: Copies of the D x T model an iterative pass holds at once (the iterate, its average or
#: search direction, the gradient and a product: SGD, Newton, CG).
MODEL_COPIES = 4


def check_pass_memory(n_features, n_targets, *, sparse=False, itemsize=4):
    """Refuse features too wide for any pass that makes them inside its tasks, whatever the
    solver (SGD and Newton included): each task holds one sub-block of dense features
    (:data:`rfstream.features.fused.FUSED_SUB_BLOCK` rows x D, float32; sparse features hold
    their non-zeros only, a few per row) and the model's :data:`MODEL_COPIES` D x T float64
    copies, against half a worker's memory limit; the client holds the copies too.
    ``n_components=10**8`` is refused here, before a pass."""
    from ..features.fused import FUSED_SUB_BLOCK

    D, T = int(n_features), max(int(n_targets), 1)
    model = 8 * MODEL_COPIES * D * T
    task = (0 if sparse else FUSED_SUB_BLOCK * D * itemsize) + model
    limit, _ = worker_memory()
    if task > limit // 2 or model > client_limit():
        raise ParameterError(f"features of width D={D:,} need {task / 2**30:,.1f} GiB in each task (a "
                             f"{FUSED_SUB_BLOCK}-row block of dense features and the D x {T} model) and "
                             f"{model / 2**30:,.1f} GiB on the client; a worker has {limit / 2**30:.1f} GiB. "
                             "Lower {n_components}.", n_components=None)
