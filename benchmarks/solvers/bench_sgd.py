"""Acceptance benchmark of the streaming SGD solvers (issue 6); results in docs/sgd.md.

For each dataset (Adult, KDD99 10% -> corrected), with Gaussian RFF D = 1000
(Standardizer with one-hot pass-through, gamma="auto", seed 0):

1. scikit-learn's exact optimum of the same objective on the in-memory feature
   matrix: LinearSVC(loss="hinge", dual=True) and
   LogisticRegression(solver="liblinear"), C = 1/(alpha n), intercept_scaling 1
   (both regularize the intercept exactly as rfstream does);
2. rfstream's StreamingSGDClassifier on the lazy feature array (features
   computed inside each epoch's tasks), epoch by epoch: exact objective (one
   reduction) and wall time; test error;
3. dask-ml's Incremental(SGDClassifier) on the same lazy features, epoch by
   epoch, its model's objective measured by the same reduction (time for that
   evaluation excluded); test error.

    python benchmarks/solvers/bench_sgd.py --datasets adult kdd --out docs/bench_sgd.json

Everything runs on dask's threaded scheduler (2 cores here).  Objectives
are f = alpha/2 (||w||^2 + b^2) + 1/n sum_i L(y_i, w z_i + b) with y in {-1, +1}.
"""
from __future__ import annotations

import argparse
import gc
import json
import time
import warnings
from pathlib import Path

import dask
import numpy as np

from rfstream import StreamingSGDClassifier, datasets, io
from rfstream.bench.scripts import write_json
from rfstream.cluster import compute
from rfstream.io import onehot_columns
from rfstream.pipeline import make_model

DATASETS = {  # name -> its entry in rfstream.datasets.registry and the lambda of the objective
    "adult": {"entry": "adult", "alpha": 1e-4},
    "kdd": {"entry": "kddcup99", "alpha": 1e-5},
}
LOSSES = {"hinge": "LinearSVC(loss='hinge', dual=True)", "log_loss": "LogisticRegression(solver='liblinear')",
          "squared_hinge": "LinearSVC(loss='squared_hinge', dual=False)"}
LBFGS = "LogisticRegression(solver='lbfgs', fit_intercept=False) on [Z, 1]"


def prepare(name, workdir, fraction=1.0, chunk_rows=None):
    train, test = datasets.prepare(DATASETS[name]["entry"], workdir)
    X, y = io.open_dataset(train)
    if fraction < 1.0:  # rows chosen from (seed, row index); the row order is kept
        from rfstream import train_test_split

        X, _, y, _ = train_test_split(X, y, test_size=1.0 - fraction, random_state=0)
    if chunk_rows:  # smaller row blocks (before the feature map, so it stays fused)
        X, y = X.rechunk({0: chunk_rows}), y.rechunk(chunk_rows)
    Xt, yt = io.open_dataset(test)
    attrs = io.dataset_info(train)["attrs"]
    pre = make_model("classification", passthrough=onehot_columns(attrs),
                     feature_params={"n_components": 1000, "gamma": "auto", "random_state": 0})[:-1]
    pre.fit(X)
    return pre.transform(X), y, pre.transform(Xt), yt


def _evaluator(loss, alpha, Z, y):
    est = StreamingSGDClassifier(loss, alpha=alpha, max_iter=1)
    est.classes_ = np.array([0, 1])
    est.class_weight_ = None
    est.n_features_in_ = Z.shape[1]

    def objective(coef, intercept):
        est.coef_ = np.atleast_2d(coef).astype(np.float64)
        est.intercept_ = np.atleast_1d(intercept).astype(np.float64)
        return est.objective(Z, y)

    return objective


def _test_error(coef, intercept, Zt, yt):
    scores = Zt @ np.ravel(coef).astype(Zt.dtype) + float(np.ravel(intercept)[0])
    return float(compute(((scores > 0).astype(np.int64) != yt).mean()))


def reference(loss, alpha, Z, y, Zt, yt, method="liblinear"):
    """sklearn's optimum of the same objective.  ``method="lbfgs"`` (log loss
    only): LogisticRegression(lbfgs) without intercept on [Z, 1] in float32,
    which regularizes the intercept as liblinear with intercept_scaling=1 does
    (the same objective) but needs no float64 copy and no liblinear problem
    (~12 GB for KDD99's 494,021 x 1000 features)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    ym = compute(y)
    C = 1.0 / (alpha * Z.shape[0])
    if method == "lbfgs":
        if loss != "log_loss":
            raise ValueError(f"--reference lbfgs is for log_loss only; got loss {loss!r}.")
        Zm = np.ones((Z.shape[0], Z.shape[1] + 1), dtype=np.float32)
        Zm[:, :-1] = compute(Z)
        est = LogisticRegression(C=C, solver="lbfgs", fit_intercept=False, tol=1e-10, max_iter=5000)
    else:
        Zm = compute(Z).astype(np.float64)
        if loss == "hinge":
            est = LinearSVC(C=C, loss="hinge", dual=True, tol=1e-5, max_iter=20000)
        elif loss == "squared_hinge":
            est = LinearSVC(C=C, loss="squared_hinge", dual=False, tol=1e-6, max_iter=1000)
        else:
            est = LogisticRegression(C=C, solver="liblinear", tol=1e-6, max_iter=1000)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(Zm, ym)
    seconds = time.perf_counter() - t0
    del Zm
    gc.collect()
    coef, intercept = est.coef_, est.intercept_
    if method == "lbfgs":  # the last weight is that of the constant feature 1
        coef, intercept = coef[:, :-1], coef[:, -1]
    return {"C": C, "seconds": seconds, "coef": coef, "intercept": intercept, "n_iter": np.ravel(est.n_iter_).tolist(),
                "warnings": [str(w.message)[:120] for w in caught]}


def run_newton(loss, alpha, Z, y, max_iter, tol):
    """solver="newton": the exact objective of each pass's accepted point
    (objective_path_) and the wall time at the end of each pass."""
    from rfstream.solvers import sgd_base as sgd_module

    stamps, inner = [], sgd_module.run_pass

    def timed_pass(*args, **kwargs):
        out = inner(*args, **kwargs)
        stamps.append(time.perf_counter())
        return out

    est = StreamingSGDClassifier(loss, alpha=alpha, solver="newton", max_iter=max_iter, tol=tol)
    sgd_module.run_pass = timed_pass
    try:
        t0 = time.perf_counter()
        est.fit(Z, y)
    finally:
        sgd_module.run_pass = inner
    return est, [s - t0 for s in stamps], list(est.objective_path_)


def run_rfstream(loss, alpha, Z, y, epochs, chunks_per_round=None):
    est = StreamingSGDClassifier(loss, alpha=alpha, chunks_per_round=chunks_per_round)
    objective = _evaluator(loss, alpha, Z, y)
    if chunks_per_round is not None:
        return _run_rounds(est, objective, Z, y, epochs)
    times, elapsed = [], 0.0
    for _ in range(epochs):
        t0 = time.perf_counter()
        est.partial_fit(Z, y, classes=[0, 1])
        elapsed += time.perf_counter() - t0
        times.append(elapsed)
    # each pass evaluated its incoming model exactly (objective_path_, for free);
    # with chunks_per_round the rounds see parts only: evaluate after each epoch
    if chunks_per_round is None:
        objs = est.objective_path_[1:] + [objective(est.coef_, est.intercept_)]
    else:
        objs = None
    return est, times, objs


def _run_rounds(est, objective, Z, y, epochs):
    times, objs, elapsed = [], [], 0.0
    for _ in range(epochs):
        t0 = time.perf_counter()
        est.partial_fit(Z, y, classes=[0, 1])
        elapsed += time.perf_counter() - t0
        times.append(elapsed)
        objs.append(objective(est.coef_, est.intercept_))  # an extra pass, not timed
    return est, times, objs


def run_daskml(loss, alpha, Z, y, epochs):
    from dask_ml.wrappers import Incremental
    from sklearn.linear_model import SGDClassifier

    inc = Incremental(SGDClassifier(loss=loss, alpha=alpha, learning_rate="optimal", random_state=0),
                      shuffle_blocks=True, random_state=0)
    objective = _evaluator(loss, alpha, Z, y)
    times, objs, elapsed = [], [], 0.0
    for _ in range(epochs):
        t0 = time.perf_counter()
        inc.partial_fit(Z, y, classes=[0, 1])
        elapsed += time.perf_counter() - t0
        times.append(elapsed)
        m = inc.estimator_
        objs.append(objective(m.coef_, m.intercept_))
    return inc.estimator_, times, objs


def plot(results, out_dir):
    """One panel per (dataset, loss): relative gap to sklearn's optimum against passes over
    the data (an SGD epoch or a Newton pass; times are load-dependent, see the JSON)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k, row in results.items() if "rfstream_newton" in row and "sklearn" in row]
    if not keys:
        return
    cols = min(3, len(keys))
    rows = -(-len(keys) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    for ax, key in zip(axes.ravel(), keys):
        row = results[key]
        for label in ("rfstream_newton", "rfstream", "rfstream_rounds1", "dask_ml"):
            run = row.get(label)
            if not run:
                continue
            gaps = [max(g, 1e-7) for g in run["rel_gap"]]
            if max(gaps) < 1e6:  # dask-ml's squared hinge diverges: left out
                ax.semilogy(range(1, len(gaps) + 1), gaps, marker=".", label=label)
        ax.axhline(0.01, color="gray", lw=0.8, ls="--")
        ax.set_title(key.replace("/alpha", "\nalpha"), fontsize=8)
        ax.set_xlabel("passes over the data")
        ax.set_ylabel("f / f_sklearn - 1")
        ax.legend(fontsize=7)
    fig.tight_layout()
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    fig.savefig(Path(out_dir) / "convergence.png", dpi=90)
    plt.close(fig)


def _time_to(target, times, objs):
    for t, f in zip(times, objs):
        if f <= target:
            return t
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["adult", "kdd"], choices=sorted(DATASETS))
    parser.add_argument("--losses", nargs="+", default=["hinge", "log_loss"], choices=sorted(LOSSES))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--workdir", default="/tmp/rfstream-bench-sgd")
    parser.add_argument("--out", default="docs/bench_sgd.json")
    parser.add_argument("--no-daskml", action="store_true")
    parser.add_argument("--alpha", type=float, default=None, help="override the dataset's lambda")
    parser.add_argument("--chunk-rows", type=int, default=None, help="rechunk the training rows")
    parser.add_argument("--fraction", type=float, default=1.0,
                        help="train on this fraction of the training rows (memory of the sklearn reference)")
    parser.add_argument("--rounds", type=int, nargs="*", default=[],
                        help="also run rfstream with these chunks_per_round")
    parser.add_argument("--solvers", nargs="+", default=["sgd", "newton"], choices=["sgd", "newton"],
                        help="rfstream solvers to run (sgd: parameter averaging, plus --rounds)")
    parser.add_argument("--newton-iter", type=int, default=50, help="solver='newton': max passes")
    parser.add_argument("--newton-tol", type=float, default=1e-3, help="solver='newton': tol")
    parser.add_argument("--plot", default=None, help="only plot the JSON of --out into this folder")
    parser.add_argument("--reference", choices=["liblinear", "lbfgs", "none"], default="liblinear",
                        help="sklearn solver of the reference optimum (lbfgs: log_loss only; none: "
                             "no reference, rfstream's Newton only, gaps are nan)")
    args = parser.parse_args(argv)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    results = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    if args.plot:
        plot(results, args.plot)
        return results
    with dask.config.set(scheduler="threads"):
        for name in args.datasets:
            Z, y, Zt, yt = prepare(name, args.workdir, args.fraction, args.chunk_rows)
            alpha = args.alpha or DATASETS[name]["alpha"]
            for loss in args.losses:
                key = f"{name}/{loss}/alpha{alpha:g}/chunks{Z.numblocks[0]}" + (
                    f"/fraction{args.fraction:g}" if args.fraction < 1 else "")
                print(f"== {key}: n={Z.shape[0]}, chunks={Z.numblocks[0]}, alpha={alpha}", flush=True)
                row = results.get(key, {})
                row.update(n=int(Z.shape[0]), chunks=int(Z.numblocks[0]), alpha=alpha,
                           C=1.0 / (alpha * Z.shape[0]))
                if args.reference == "none":
                    f_opt = float("nan")
                else:
                    ref = reference(loss, alpha, Z, y, Zt, yt, args.reference)
                    f_opt = _evaluator(loss, alpha, Z, y)(ref["coef"], ref["intercept"])
                    row["sklearn"] = {
                        "estimator": LBFGS if args.reference == "lbfgs" else LOSSES[loss],
                        "seconds": round(ref["seconds"], 2), "n_iter": ref["n_iter"], "objective": f_opt,
                        "test_error": _test_error(ref["coef"], ref["intercept"], Zt, yt),
                        "warnings": ref["warnings"]}
                    print(" sklearn", row["sklearn"], flush=True)
                if "newton" in args.solvers:
                    est, times, objs = run_newton(loss, alpha, Z, y, args.newton_iter, args.newton_tol)
                    row["rfstream_newton"] = {"pass_seconds": [round(t, 2) for t in times], "objective": objs,
                                                  "rel_gap": [f / f_opt - 1 for f in objs], "passes": est.n_iter_,
                                                  "estimated_gap": est.gap_ / est.objective_,
                                                  "seconds_to_1pct": _time_to(1.01 * f_opt, times, objs),
                                                  "test_error": _test_error(est.coef_, est.intercept_, Zt, yt)}
                    print(" rfstream_newton", {k2: v for k2, v in row["rfstream_newton"].items()
                                               if k2 != "objective"}, flush=True)
                runs = ([("rfstream", None)] if "sgd" in args.solvers else []) + [
                    (f"rfstream_rounds{k}", k) for k in args.rounds]
                for label, k in runs:
                    est, times, objs = run_rfstream(loss, alpha, Z, y, args.epochs, k)
                    row[label] = {"epoch_seconds": [round(t, 2) for t in times], "objective": objs,
                                      "rel_gap": [f / f_opt - 1 for f in objs],
                                      "seconds_to_1pct": _time_to(1.01 * f_opt, times, objs),
                                      "test_error": _test_error(est.coef_, est.intercept_, Zt, yt)}
                    print(f" {label}", {k2: v for k2, v in row[label].items() if k2 != "objective"}, flush=True)
                if not args.no_daskml:
                    m, times, objs = run_daskml(loss, alpha, Z, y, args.epochs)
                    row["dask_ml"] = {"epoch_seconds": [round(t, 2) for t in times], "objective": objs,
                                          "rel_gap": [f / f_opt - 1 for f in objs],
                                          "seconds_to_1pct": _time_to(1.01 * f_opt, times, objs),
                                          "test_error": _test_error(m.coef_, m.intercept_, Zt, yt)}
                    print(" dask_ml", {k2: v for k2, v in row["dask_ml"].items() if k2 != "objective"}, flush=True)
                results[key] = row
                write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
