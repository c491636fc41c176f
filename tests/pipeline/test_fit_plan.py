"""The plan a fit makes before its first pass (rfstream.fit_plan): its passes are the passes the
fit then makes, its factorizations those the search makes, and a client that cannot hold the
search is refused before any pass, naming what to lower."""
from __future__ import annotations

import numpy as np
import pytest

from rfstream import cluster, io
from rfstream.cluster import connect, run_context
from rfstream.solvers.ridge.cv import SHARED_MIN_ALPHAS
from rfstream.fit_plan import FitPlan, Factorizations, factorization_rates, search_factorizations
from rfstream.jobs import FitJob
from rfstream.options import ParameterError
from rfstream.solvers import memory


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small classification and a small regression dataset (600 rows, 3 columns)."""
    root = tmp_path_factory.mktemp("plan")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    io.write_dataset(root / "c.zarr", X, (X[:, 0] + 0.3 * rng.normal(size=600) > 0).astype(np.int64),
                     rows_per_chunk=200)
    io.write_dataset(root / "r.zarr", X, X[:, 0] - X[:, 1] ** 2, attrs={"task": "regression"}, rows_per_chunk=200)
    return root


def _fit(path, **params):
    """``(plan, meta)`` of a fit on threads, the plan made as the fit makes it."""
    job = FitJob(str(path), **params)
    with connect("threads"), run_context(progress="never"), job.resumable():
        plan = job.plan()
        _, meta = job.fit()
    return plan, meta, job


CASES = {
    "default classifier": ("c.zarr", {"n_components": 20}),
    "classifier, list of alphas": ("c.zarr", {"n_components": 20, "alpha": [0.1, 1, 10]}),
    "regressor, gamma grid and CV": ("r.zarr", {"n_components": 20, "alpha": [0.1, 1],
                                                "gamma": ["auto*0.5", "auto", "auto*2"], "cv": 3}),
    "regressor, sizes and leave-one-out": ("r.zarr", {"n_components": [10, 20], "alpha": [0.1, 1], "cv": "loo"}),
    "evidence": ("r.zarr", {"n_components": 20, "alpha": [0.01, 0.1, 1], "select": "evidence"}),
    "TEFM": ("c.zarr", {"features": "tefm-s", "n_components": 8, "n_random_features": 32}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_plan_counts_the_passes_the_fit_makes(data, case):
    name, params = CASES[case]
    plan, meta, _ = _fit(data / name, **params)
    assert plan.n_passes is not None and plan.n_passes == meta["passes"] == len(plan.passes)
    assert plan.lines()[0].startswith(f"plan: {meta['passes']} pass")


def test_a_resumed_fit_makes_the_passes_the_plan_counts(data, tmp_path):
    params = {"n_components": 20, "alpha": [0.1, 1], "checkpoint": tmp_path / "m.checkpoint"}
    first = FitJob(str(data / "c.zarr"), **params)
    with connect("threads"), run_context(progress="never"), first.resumable():
        first.fit()  # not saved: the checkpoint keeps every pass
    plan, meta, job = _fit(data / "c.zarr", **params)
    assert meta["passes"] == plan.n_passes == meta["passes_reused"] == 4
    assert plan.checkpoint == str(tmp_path / "m.checkpoint") and plan.checkpoint_bytes > 0


def test_the_checkpoint_estimate_is_what_the_checkpoint_holds(data, tmp_path):
    # the plan counts the Gram pass's packed partials, nearly all of a checkpoint at D = 200
    # (the small passes' results, the sample and the manifest are the rest)
    params = {"n_components": 200, "alpha": [0.1, 1], "checkpoint": tmp_path / "m.checkpoint"}
    job = FitJob(str(data / "c.zarr"), **params)
    with connect("threads"), run_context(progress="never"), job.resumable():
        plan = job.plan()
        job.fit()  # not saved: the checkpoint keeps every pass
    written = sum(f.stat().st_size for f in (tmp_path / "m.checkpoint").rglob("*") if f.is_file())
    assert 0.9 * written <= plan.checkpoint_bytes <= 1.1 * written, (written, plan.checkpoint_bytes)


@pytest.mark.filterwarnings("ignore:CG stopped after")
def test_an_unknown_count_is_said_as_such(data):
    plan, meta, _ = _fit(data / "c.zarr", solver="sgd", max_iter=2)
    assert plan.n_passes is None and "epochs (at most 2" in plan.lines()[0]
    assert len(plan.passes) < meta["passes"]
    for solver in ("cg", "pcg"):  # at most every iteration: as many passes as the bound
        plan, meta, _ = _fit(data / "c.zarr", n_components=20, ridge_solver=solver, pcg_rank=8, max_iter=2,
                             tol=1e-12)
        assert plan.n_passes is None and plan.at_most == meta["passes"] and "CG iteration" in plan.lines()[0]


def test_the_search_factorizations_follow_the_solver_rule():
    # 5 alphas (below SHARED_MIN_ALPHAS): a Cholesky per (gamma, size, fold, alpha), then the
    # calibration's Cholesky and its triangular inverse, which solve the chosen candidate too
    found = search_factorizations("cv", 5, 5, [1000, 2000, 4000], 5, searching=True, calibrating=True)
    assert sorted(found["Cholesky"]) == [1000] * 125 + [2000] * 125 + [4000] * 127
    assert set(found) == {"Cholesky"}
    many = search_factorizations("cv", SHARED_MIN_ALPHAS, 5, [100], 2, searching=True, calibrating=False)
    assert many == {"reduction": [100] * 10, "Cholesky": [100]}
    loo = search_factorizations("loo", 3, 1, [10, 20], 1, searching=True, calibrating=True)
    assert loo == {"eigh": [10, 20]}  # the solution and the calibration reuse the chosen basis
    evidence = search_factorizations("evidence", SHARED_MIN_ALPHAS, 1, [10], 3, searching=True, calibrating=True)
    assert evidence == {"reduction": [10] * 3, "Cholesky": [10, 10]}  # the calibration's factor and inverse
    from rfstream.solvers.ridge.evidence import EVIDENCE_SHARED_MIN_ALPHAS as shared_evidence

    few = search_factorizations("evidence", shared_evidence - 1, 1, [10], 2, searching=True, calibrating=False)
    assert few == {"Cholesky": [10] * (2 * 2 * (shared_evidence - 1)) + [10]}  # factor + inverse per alpha, refit
    assert search_factorizations("evidence", shared_evidence, 1, [10], 2, searching=True,
                                 calibrating=False) == {"reduction": [10, 10]}  # the refit from the reduction


def test_the_estimated_time_scales_as_d_cubed():
    rates = factorization_rates()
    assert set(rates) == {"eigh", "reduction", "Cholesky"} and all(r > 0 for r in rates.values())
    small = FitPlan(rows=1, factorizations=[Factorizations("Cholesky", (500,))], rates=rates)
    large = FitPlan(rows=1, factorizations=[Factorizations("Cholesky", (1000,))], rates=rates)
    assert large.seconds == pytest.approx(8 * small.seconds)


README_GRID = {"gamma": ["auto*0.25", "auto*0.5", "auto", "auto*2", "auto*4"], "alpha": [0.01, 0.1, 1, 10, 100],
               "n_components": [1000, 2000, 4000], "cv": 5}


def test_the_readme_grid_is_planned_on_what_the_client_holds(data, monkeypatch):
    """The README's grid holds 5 gammas x 5 folds of D=4,000 partials (3.0 GiB), each size's
    slices of them (3.9 GiB) and the folds' sums on the client.  Each size's slices were left out
    of the client's model, so at 6 GiB the grid ran 5-fold CV and ran out of memory after its
    passes; now its 5 folds are planned over the client's memory, and it takes exact
    leave-one-out from one Gram (as an int cv does when its folds do not fit); at 1 GiB even that
    is refused before any pass, naming what to lower."""
    monkeypatch.setattr(memory, "worker_memory", lambda: (64 * 2**30, 2))
    monkeypatch.setattr(memory, "client_limit", lambda: 6 * 2**30)
    need, _ = memory.client_memory(5, 5, 4000, 1, [1000, 2000, 4000])
    assert need > 6 * 2**30 > memory.gram_memory(5, 5, 4000, 1)[3] + 8 * 4 * 4000**2  # the old model's
    with connect("threads"):
        plan = FitJob(str(data / "c.zarr"), **README_GRID).plan()
    # a classifier's Platt histograms ride on the leave-one-out pass: no calibration pass
    assert [kind for kind, _ in plan.passes] == ["moments + row sample + classes", "Gram", "leave-one-out"]
    assert plan.client_peak <= 6 * 2**30 and plan.factorizations[0].words() == \
        "15 eigendecompositions of D=1,000 to 4,000"
    monkeypatch.setattr(memory, "client_limit", lambda: 2**30)
    with connect("threads"), pytest.raises(ParameterError) as refused:
        FitJob(str(data / "c.zarr"), **README_GRID).plan()
    message = str(refused.value)
    assert "client's solve" in message and "over its 1.0 GiB" in message
    assert "lower the number of gammas, cv or n_components" in message


def test_the_plan_is_said_before_the_first_pass_and_numbers_the_passes(data, capsys, monkeypatch):
    monkeypatch.setattr(cluster, "CLIENT_WORK_INTERVAL", 0.0)
    job = FitJob(str(data / "c.zarr"), n_components=20, alpha=[0.1, 1], gamma=["auto", "auto*2"])
    with connect("threads"), run_context(progress="auto"):  # stderr is no terminal: lines
        _, meta = job.fit()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"rfstream: plan: {meta['passes']} passes over 600 rows (moments + gamma's sample + classes; " \
                     "Gram, 5 folds x 2 gammas; CV scoring, 4 candidates; calibration)"
    assert err[1].startswith("rfstream: client: 22 Cholesky factorizations of D=20")
    passes = [line for line in err if line.startswith("rfstream: pass ")]
    assert passes[1].startswith("rfstream: pass 2 of 4 (Gram, 5 folds x 2 gammas) done in ")
    assert passes[2].startswith("rfstream: pass 3 of 4 (CV scoring, 4 candidates) done in ")
    solving = [line for line in err if line.startswith("rfstream: solving ")]
    assert solving and solving[-1].startswith("rfstream: solving 20 of 20 factorizations of the folds' training "
                                              "Grams (Cholesky, D=20)")
    assert err.index(solving[0]) > err.index(passes[1]) and err.index(solving[-1]) < err.index(passes[2])


def test_nothing_is_said_without_progress(data, capsys):
    job = FitJob(str(data / "c.zarr"), n_components=20, alpha=[0.1, 1])
    with connect("threads"), run_context(progress="never"):
        job.fit()
    assert capsys.readouterr().err == ""
