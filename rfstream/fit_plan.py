"""A fit's plan, made before its first pass from what needs no data.

:func:`plan_fit` reads a :class:`rfstream.jobs.FitJob` (the model, X's shape, the dataset's
attributes, the connected workers and the client's memory) and says what the fit will do: its
passes in order (:class:`FitPlan`; "at most" or "+ iterations" where only the data tell), the
client's factorizations between them with their time estimated from a rate measured once on
this process (:func:`factorization_rates`), the client's and each worker's peak memory
(:mod:`rfstream.solvers.memory`'s models) and the checkpoint's size (:func:`rfstream.solvers.ridge.gram.checkpoint_nbytes`).
The CLI prints it before the first pass and ``rfstream fit --dry-run`` only prints it.
Narrative: docs/plan.md.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from math import prod

import numpy as np
from sklearn.base import is_classifier

from . import lapack
from .catalog import size_widths
from .cluster import client_cores, on_workers, pass_kind, single_blas_thread, worker_memory
from .features.width import planned_features
from .options import CALIBRATE_MAX_FEATURES
from .param_lists import is_listed
from .sizes import client_limit
from .solvers.memory import (
    client_memory,
    gram_memory,
    planned_folds,
    search_memory,
    use_loo_instead,
    uses_iterations,
)
from .solvers.ridge.cv import SHARED_MIN_ALPHAS, tridiagonal_reduction
from .solvers.ridge.evidence import EVIDENCE_SHARED_MIN_ALPHAS
from .solvers.ridge.gram import checkpoint_nbytes
from .solvers.targets import planned_targets

#: The size D of the factorizations timed once per process (:func:`factorization_rates`).
RATE_SIZE = 512
#: Floating-point operations of one factorization of size D, over D^3: LAPACK's symmetric
#: eigendecomposition with eigenvectors (tridiagonal reduction 4/3, back-transformation 2),
#: the tridiagonal reduction alone (``dsytrd``, 4/3) and the Cholesky factorization (1/3).
FLOPS = {"eigh": 10 / 3, "reduction": 4 / 3, "Cholesky": 1 / 3}
#: What each kind is called in the plan's words (count 1, count > 1).
FACTORIZATION_WORDS = {"eigh": ("eigendecomposition", "eigendecompositions"),
                       "reduction": ("tridiagonal reduction", "tridiagonal reductions"),
                       "Cholesky": ("Cholesky factorization", "Cholesky factorizations")}
#: How the plan names the first look's parts (:func:`rfstream.jobs.first_look`).
FIRST_LOOK_WORDS = {"row sample": "gamma's sample"}

_RATES = {}


def factorization_rates():
    """GFLOP/s of this process's eigendecomposition, tridiagonal reduction and Cholesky factorization
    (:mod:`rfstream.lapack`'s, as the client's solves call them) on one BLAS thread, each the best of
    five at D = :data:`RATE_SIZE` (:data:`FLOPS`), times the client's cores
    (:func:`rfstream.cluster.client_cores`: the search's solves run one per core,
    :func:`rfstream.cluster.client_map`); measured on the first call and kept for the process.  One
    thread's rate is the core's: timed on BLAS's threads, a small factorization on a machine busy with
    other jobs measured 40 times slower from one run to the next (docs/plan.md)."""
    if not _RATES:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((RATE_SIZE, RATE_SIZE))
        gram = a @ a.T + RATE_SIZE * np.eye(RATE_SIZE)
        runs = {"eigh": lambda: lapack.syevr(gram),  # the routines the client's solves call
                "reduction": lambda: tridiagonal_reduction(gram),
                "Cholesky": lambda: lapack.potrf(gram)}
        cores = client_cores()
        with single_blas_thread():
            for kind, run in runs.items():
                best = np.inf
                for _ in range(5):
                    t0 = time.perf_counter()
                    run()
                    best = min(best, time.perf_counter() - t0)
                _RATES[kind] = cores * FLOPS[kind] * RATE_SIZE ** 3 / max(best, 1e-9) / 1e9
    return dict(_RATES)


@dataclass(frozen=True)
class Factorizations:
    """``count`` factorizations of one ``kind`` ("eigh", "reduction" or "Cholesky"), of sizes ``sizes``
    (D of each, listed once per count)."""

    kind: str
    sizes: tuple

    @property
    def count(self):
        return len(self.sizes)

    def flops(self):
        return FLOPS[self.kind] * float(sum(float(d) ** 3 for d in self.sizes))

    def words(self):
        low, high = min(self.sizes), max(self.sizes)
        span = f"D={low:,}" if low == high else f"D={low:,} to {high:,}"
        return f"{self.count:,} {FACTORIZATION_WORDS[self.kind][self.count > 1]} of {span}"


@dataclass
class FitPlan:
    """What a fit will do (:func:`plan_fit`): ``passes``, ``(kind, label)`` in order (the kind
    as :func:`rfstream.cluster.pass_kind` names the pass); ``more``: what adds passes only
    the data tell ("" when ``passes`` is the count), ``at_most`` their bound (None: none
    known); the client's ``factorizations`` and their estimated ``seconds`` at the measured
    ``rates`` (GFLOP/s); peaks and limits in bytes (None: not planned); the checkpoint."""

    rows: int
    passes: list = field(default_factory=list)
    more: str = ""
    at_most: int | None = None
    factorizations: list = field(default_factory=list)
    rates: dict = field(default_factory=dict)
    client_peak: int | None = None
    client_limit: int | None = None
    client_available: int | None = None
    worker_peak: int | None = None
    worker_limit: int | None = None
    worker_threads: int | None = None
    in_process: bool = False
    checkpoint: str | None = None
    checkpoint_bytes: int | None = None

    @property
    def n_passes(self):
        """The number of passes when the plan knows it, else None."""
        return None if self.more else len(self.passes)

    @property
    def seconds(self):
        """The client's factorizations' estimated seconds (None without a measured rate)."""
        if not self.factorizations or not self.rates:
            return None
        return sum(f.flops() / (self.rates[f.kind] * 1e9) for f in self.factorizations)

    def lines(self):
        """The plan in a few lines, as the CLI prints it."""
        count = len(self.passes)
        what = "; ".join(label for _, label in self.passes)
        head = f"{count} pass{'es' if count != 1 else ''}"
        if self.more:
            head += f" {self.more}" if self.at_most is None else f" {self.more} (at most {self.at_most} in all)"
        lines = [f"plan: {head} over {self.rows:,} rows" + (f" ({what})" if what else "")]
        client = []
        if self.factorizations:
            kinds = " and ".join(f.words() for f in self.factorizations)
            seconds = self.seconds
            if seconds is not None:
                main = max(self.factorizations, key=lambda f: f.flops()).kind
                kinds += f" (~{_duration(seconds)} at {self.rates[main]:.3g} GFLOP/s measured: an estimate)"
            client.append(kinds)
        if self.client_peak is not None:
            text = f"peak {_size(self.client_peak)} of {_gib(self.client_limit)}"
            if self.client_available is not None and self.client_peak > self.client_available:
                text += f", more than the {_gib(self.client_available)} free now"
            client.append(text)
        if client:
            lines.append("client: " + "; ".join(client))
        if self.worker_peak is not None:
            where = (f"this process's {self.worker_threads} threads" if self.in_process
                     else f"each worker ({self.worker_threads} threads)")
            lines.append(f"passes: peak {_size(self.worker_peak)} of {_gib(self.worker_limit)} in {where}")
        if self.checkpoint is not None:
            size = "" if self.checkpoint_bytes is None else f"~{_size(self.checkpoint_bytes)} "
            lines.append(f"checkpoint: {size}at {self.checkpoint} (removed once the model is saved)")
        return lines

    def __str__(self):
        return "\n".join(self.lines())

    def as_dict(self):
        """The plan as JSON-ready data (``--dry-run --format json``)."""
        out = asdict(self)
        out["passes"] = [{"kind": kind, "label": label} for kind, label in self.passes]
        out["factorizations"] = [{"kind": f.kind, "count": f.count, "sizes": sorted(set(f.sizes))}
                                 for f in self.factorizations]
        out["n_passes"] = self.n_passes
        out["client_seconds"] = None if self.seconds is None else round(self.seconds, 3)
        out["rates"] = {k: round(v, 2) for k, v in self.rates.items()}
        return out


def _gib(nbytes):
    return f"{nbytes / 2**30:,.1f} GiB"


def _size(nbytes):
    return _gib(nbytes) if nbytes >= 2**30 / 10 else f"{nbytes / 2**20:,.1f} MiB"


def _duration(seconds):
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 1 else "<1 s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


@dataclass
class _SolverPlan:
    passes: list = field(default_factory=list)
    more: str = ""
    at_most: int | None = None
    factorizations: dict = field(default_factory=dict)  # kind -> list of sizes
    client: int | None = None
    workers: int | None = None
    stored: list = field(default_factory=list)


def search_factorizations(route, n_alphas, n_folds, widths, n_gammas, *, searching, calibrating):
    """``{kind: [D, ...]}``: the client's factorizations of a ridge fit by the Gram, as
    :mod:`rfstream.solvers.ridge.estimators` makes them -- K-fold CV ("cv"): per (gamma, size,
    fold) one tridiagonal reduction for :data:`rfstream.solvers.ridge.cv.SHARED_MIN_ALPHAS`
    alphas or more, else one Cholesky per alpha; "loo": one eigh per (gamma, size), which solves
    the fit and serves the calibration; "evidence": one reduction per (gamma, size), which solves
    the fit, for :data:`rfstream.solvers.ridge.evidence.EVIDENCE_SHARED_MIN_ALPHAS` alphas or more,
    else one Cholesky per alpha (with its inverse, counted twice);
    then, where the search leaves no eigenvectors, the calibration's Cholesky and its triangular
    inverse (counted twice; they solve the fit too:
    :func:`rfstream.solvers.ridge.calibration.cholesky_posterior`), or without calibration a
    Cholesky where no basis solves the fit.  A chosen size unknown before the fit counts as the
    largest."""
    out = {"eigh": [], "reduction": [], "Cholesky": []}
    candidates = [w for _ in range(n_gammas) for w in widths]
    shared = n_alphas >= SHARED_MIN_ALPHAS
    basis = None  # what the search leaves for the fit: "eigh", "reduction" or nothing
    if searching and route == "cv":
        for w in candidates:
            if shared:
                out["reduction"] += [w] * n_folds
            else:
                out["Cholesky"] += [w] * (n_folds * n_alphas)
    elif searching and route == "loo":
        out["eigh"] += candidates
        basis = "eigh"
    elif searching and route == "evidence":
        if n_alphas >= EVIDENCE_SHARED_MIN_ALPHAS:
            out["reduction"] += candidates
            basis = "reduction"
        else:
            out["Cholesky"] += [w for w in candidates for _ in range(2 * n_alphas)]
    largest = max(widths)
    if calibrating and basis != "eigh":
        out["Cholesky"] += [largest, largest]
    elif basis is None:
        out["Cholesky"].append(largest)
    return {kind: sizes for kind, sizes in out.items() if sizes}


def _ridge_plan(solver, fmap, n_features, n_targets):
    """The passes, factorizations, peaks and stored partials of a ridge estimator's fit."""
    plan = _SolverPlan()
    width, n_gammas, sparse = planned_features(fmap, n_features) if fmap is not None else (n_features, 1, False)
    if width is None:
        plan.more = f"+ the {type(solver).__name__}'s passes"
        return plan
    if uses_iterations(solver.solver, width, n_gammas, sparse):
        listed = np.ndim(solver.alpha) > 0
        plan.passes.append(("CG statistics", "CG statistics"))
        if solver.solver == "pcg":  # the Nystrom preconditioner's rows
            plan.passes.append(("row sample", "the preconditioner's row sample"))
        plan.more = f"+ 1 per CG iteration{' + CV scoring' if listed else ''}"
        plan.at_most = None if solver.max_iter is None else int(solver.max_iter) + len(plan.passes) + listed
        return plan
    widths = size_widths(fmap, width) or [width]
    n_alphas = int(np.size(solver.alpha))
    evidence = solver.select == "evidence"
    searching = np.ndim(solver.alpha) > 0 or n_gammas > 1 or len(widths) > 1 or evidence
    route, n_folds = "single", 1
    if searching:
        route = "evidence" if evidence else "loo" if isinstance(solver.cv, str) else "cv"
        if route == "cv":
            n_folds = planned_folds(solver.cv)
            if n_folds is None:
                plan.more = "+ the folds' scoring, known from the data"
                n_folds = 5
            elif use_loo_instead(solver.cv, n_gammas, n_folds, width, n_targets, widths):
                route, n_folds = "loo", 1
    grid = [f"{n_folds} folds"] * (n_folds > 1) + [f"{n_gammas} gammas"] * (n_gammas > 1) \
        + [f"{len(widths)} sizes"] * (len(widths) > 1)
    plan.passes.append(("Gram", "Gram" + (", " + " x ".join(grid) if grid else "")))
    candidates = n_gammas * len(widths) * n_alphas
    if searching and route == "loo":
        plan.passes.append(("leave-one-out", f"leave-one-out, {candidates:,} candidates"))
    elif searching and route == "cv" and solver.scoring != "squared_error":
        plan.passes.append(("CV scoring", f"CV scoring, {candidates:,} candidates"))
    calibrating = solver._calibrates(searching, width)
    n_grams = {"cv": n_folds, "loo": 1}.get(route) if searching else None
    if calibrating and solver._platt_from_scoring(n_grams, n_alphas, n_targets, width):
        calibrating = False  # Platt from the scoring pass's held-out decisions: no pass, no factor
    if calibrating:
        plan.passes.append(("calibration", "calibration"))
    plan.factorizations = search_factorizations(route, n_alphas, n_folds, widths, n_gammas, searching=searching,
                                                calibrating=calibrating)
    plan.client = client_memory(n_gammas, n_folds, width, n_targets, widths if len(widths) > 1 else None)[0]
    plan.workers = gram_memory(n_gammas, n_folds, width, n_targets)[0]
    if searching:  # the scoring pass's tasks; the client's solve with the alpha paths
        need, _, plan.client, _ = search_memory(widths, n_gammas, max(n_folds, 1), n_alphas, n_targets)
        plan.workers = max(plan.workers, need)
    plan.stored.append(checkpoint_nbytes(n_gammas, n_folds, width, n_targets))
    return plan


def _map_passes(fmap):
    """``(passes, more)`` of a map's own fit: none for a data-independent map, TEFM's sketch
    and power iterations, else unknown ("+ the map's passes")."""
    if fmap is None or not getattr(fmap, "makes_data_pass", False):
        return [], ""
    name = type(fmap).__name__
    if name == "TEFM":
        power = int(getattr(fmap, "n_power_iter", 0))
        return [("sketch", "TEFM sketch")] + [("power iteration", "TEFM power iteration")] * power, ""
    return [], f"+ the {name} map's passes"


def plan_fit(job, first=()):
    """The :class:`FitPlan` of a :class:`rfstream.jobs.FitJob` before its first pass; ``first``:
    the collections of its first look at the rows (:func:`rfstream.jobs.first_look`)."""
    model, X = job.model, job.X
    steps = dict(getattr(model, "steps", []))
    fmap = steps.get("features")
    solver = None if job.transformer else steps.get("solver")
    n_features = int(X.shape[1])
    plan = FitPlan(rows=int(X.shape[0]))
    kind = pass_kind(first) if first else ""
    if first:
        label = " + ".join(FIRST_LOOK_WORDS.get(k, k) for k in kind.split(" + "))
        plan.passes.append((kind, label))
    map_passes, more = _map_passes(fmap)
    loop = fmap is not None and is_listed(fmap.get_params().get("gamma")) and \
        not getattr(fmap, "shares_draw_across_gamma", False)
    stored, bound = [], None
    if solver is not None and getattr(solver, "solves_by_gram", False):
        n_targets = planned_targets(job.attrs.get("task"), job.attrs.get("classes"), job.y)
        route_map = fmap
        if loop:  # one fit per gamma: each its own map passes and solver passes
            from .selection import gamma_candidates

            route_map = gamma_candidates(fmap)[0]
        ridge = _ridge_plan(solver, route_map, n_features, n_targets)
        repeat = len(gamma_candidates(fmap)) if loop else 1
        plan.passes += (map_passes + ridge.passes) * repeat
        if ridge.at_most is not None and not more:  # iterations: a bound on the solver's passes
            bound = (ridge.at_most - len(ridge.passes)) * repeat
        more = " ".join(m for m in (more, ridge.more) if m)
        if loop and more:
            more = f"{more}, per gamma"
        sizes = {kind: sizes * repeat for kind, sizes in ridge.factorizations.items()}
        plan.factorizations = [Factorizations(kind, tuple(sizes)) for kind, sizes in sizes.items()]
        plan.client_peak, plan.worker_peak = ridge.client, ridge.workers
        stored = ridge.stored * repeat
    elif solver is not None:
        plan.passes += map_passes
        if is_classifier(solver) and "classes" not in kind.split(" + "):  # its own da.unique pass
            plan.passes.append(("classes", "classes"))
        name = type(solver).__name__
        epochs = getattr(solver, "max_iter", None) if hasattr(solver, "n_iter_no_change") else None
        own = (f"+ the {name}'s epochs (at most {epochs} and an evaluation; Newton steps instead where it "
               "chooses Newton)") if epochs else f"+ the {name}'s passes"
        more = " ".join(m for m in (more, own) if m)
    else:
        plan.passes += map_passes
        step = steps.get("solver")
        if step is not None:  # a transformer after the map (kernel PCA): its own passes
            more = " ".join(m for m in (more, f"+ the {type(step).__name__}'s passes") if m)
    if job.holdout is not None:
        plan.passes.append(("metrics", "holdout metrics"))
    plan.more = more
    plan.at_most = None if bound is None else len(plan.passes) + bound
    if plan.factorizations:
        plan.rates = factorization_rates()
    if plan.client_peak is not None:
        import psutil

        plan.client_limit, plan.client_available = client_limit(), int(psutil.virtual_memory().available)
    if plan.worker_peak is not None:
        plan.worker_limit, plan.worker_threads = worker_memory()
        plan.in_process = not on_workers()
    if job.checkpoint is not None:
        plan.checkpoint = str(job.checkpoint)
        plan.checkpoint_bytes = int(sum(stored)) if stored or not more else None
    return plan




