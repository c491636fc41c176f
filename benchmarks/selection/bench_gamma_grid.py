"""A bandwidth x alpha grid in two passes, against scikit-learn's GridSearchCV.

Run from the repository root (needs ../shared/datasets):

    python benchmarks/selection/bench_gamma_grid.py gridsearch --datasets adult letter cpusmall
    python benchmarks/selection/bench_gamma_grid.py passes --dataset kddcup99 --gammas 4

``gridsearch``: on each dataset's training split, the same 8 gammas (auto x 2^k,
k = -5 ... 2, ``auto`` resolved once by :func:`rfstream.kernels.auto_gamma` on the
standardized training rows) x 5 alphas at D = 1000, 5-fold CV:

* scikit-learn: ``GridSearchCV(Pipeline([StandardScaler(), RBFSampler(1000,
  random_state=0), RidgeClassifier() or Ridge()]), cv=5, n_jobs=2)``, refit on the
  training rows, numpy arrays in memory;
* rfstream: ``Standardizer -> RandomFourierFeatures(1000, gamma=[8 gammas]) ->
  StreamingRidgeClassifier / StreamingRidge(alpha=[5 alphas], cv=5)`` with the
  estimators' default ``calibrate="auto"`` (the calibration pass: ``--calibrate no`` leaves it out)
  on the dask arrays of the converted Zarr, dask's threads (2 cores): one Gram pass and
  one scoring pass ("rfstream"); the same with ``select="evidence"``: one Gram pass
  ("rfstream-evidence").

Each side runs in its own process; its wall time and the peak resident memory of its
process tree (joblib's workers included), sampled every 50 ms, are measured from
outside.  Test error: error rate, or RMSE for cpusmall.  The spread of GridSearchCV's
test error over 4 seeds of RBFSampler at its chosen (gamma, alpha) is given too.

``passes``: G gammas in one ``rfstream fit`` against G fits of one gamma each (same
alphas), on the dataset's training Zarr under threads (D = 500, alphas 0.1, 1, 10): fit
time (the fastest of 3 alternating rounds) and the bytes each process read
(``/proc/self/io`` rchar: the compressed Zarr chunks, once per pass).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from rfstream.bench.scripts import cache_dir, write_json

ALPHAS = [0.01, 0.1, 1.0, 10.0, 100.0]
SIDES = ("rfstream", "rfstream-evidence", "sklearn")
FACTORS = [2.0**k for k in range(-5, 3)]
TASKS = {"adult": "classification", "letter": "classification", "cpusmall": "regression",
         "kddcup99": "classification", "magic_gamma": "classification"}


def _data(name, workdir):
    from rfstream.datasets import registry

    return registry.train_test(name, workdir)


def _gammas(X):
    import dask

    from rfstream.kernels import auto_gamma
    from rfstream.preprocess import Standardizer

    with dask.config.set(scheduler="threads"):
        auto = auto_gamma(Standardizer().fit(X).transform(X), "gaussian", random_state=0)
    return [auto * f for f in FACTORS]


def _error(task, y, pred):
    y, pred = np.asarray(y), np.asarray(pred)
    return float(np.mean(y != pred)) if task == "classification" else float(np.sqrt(np.mean((y - pred) ** 2)))


def side_sklearn(name, workdir, gammas):
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    X, X_test, y, y_test = (np.asarray(a) for a in _data(name, workdir))
    task = TASKS[name]
    est = RidgeClassifier() if task == "classification" else Ridge()
    pipe = Pipeline([("scale", StandardScaler()), ("rff", RBFSampler(n_components=1000, random_state=0)),
                     ("ridge", est)])
    search = GridSearchCV(pipe, {"rff__gamma": gammas, "ridge__alpha": ALPHAS}, cv=5, n_jobs=2)
    search.fit(X, y)
    best = search.best_params_
    errors = [_error(task, y_test, search.predict(X_test))]
    for seed in (1, 2, 3):  # the spread over RBFSampler's seeds at the chosen parameters
        pipe.set_params(rff__random_state=seed, rff__gamma=best["rff__gamma"], ridge__alpha=best["ridge__alpha"])
        errors.append(_error(task, y_test, pipe.fit(X, y).predict(X_test)))
    return {"gamma": best["rff__gamma"], "alpha": best["ridge__alpha"], "test_error": errors[0],
            "seed_std": float(np.std(errors)), "seed_errors": errors}


def side_rfstream(name, workdir, gammas, select="cv", calibrate="auto"):
    import dask
    from sklearn.pipeline import make_pipeline

    from rfstream import RandomFourierFeatures, StreamingRidge, StreamingRidgeClassifier
    from rfstream.preprocess import Standardizer

    X, X_test, y, y_test = _data(name, workdir)
    task = TASKS[name]
    ridge = (StreamingRidgeClassifier if task == "classification" else StreamingRidge)(
        alpha=ALPHAS, cv=5, select=select, calibrate=calibrate)
    model = make_pipeline(Standardizer(), RandomFourierFeatures(1000, gamma=gammas, random_state=0), ridge)
    with dask.config.set(scheduler="threads"):
        model.fit(X, y)
        pred = model.predict(X_test).compute()
    return {"gamma": model[-1].gamma_, "alpha": model[-1].alpha_, "test_error": _error(task, y_test, pred),
            "passes": model[-1].n_iter_}


def measure(argv):
    """``(seconds, peak bytes of the process tree, last stdout line as JSON)``."""
    from rfstream.bench.measures import TreePeakRSS

    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreePeakRSS(proc.pid, interval=0.05) as peaks:
        out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    peak = peaks.tree
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{err[-2000:]}")
    return seconds, peak, json.loads(out.strip().splitlines()[-1])


def gridsearch(args):
    rows = []
    for name in args.datasets:
        X = _data(name, args.workdir)[0]
        gammas = _gammas(X)
        row = {"dataset": name, "rows": int(X.shape[0]), "gammas": gammas}
        for side in SIDES:
            argv = [sys.executable, os.path.abspath(__file__), "_side", side, name, args.workdir, json.dumps(gammas),
                    args.calibrate]
            seconds, peak, result = measure(argv)
            row[side] = {"seconds": round(seconds, 1), "peak_gib": round(peak / 2**30, 2), **result}
            print(json.dumps({"dataset": name, "side": side, **row[side]}), flush=True)
        rows.append(row)
    if args.json:
        write_json(args.json, rows)
    print("\n| dataset | rows | side | seconds | peak GiB | gamma (x auto) | alpha | test error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        auto = r["gammas"][FACTORS.index(1.0)]
        for side in SIDES:
            s = r[side]
            spread = f" (seed std {s['seed_std']:.4f})" if "seed_std" in s else ""
            print(f"| {r['dataset']} | {r['rows']} | {side} | {s['seconds']} | {s['peak_gib']} | "
                  f"{s['gamma'] / auto:g} | {s['alpha']:g} | {s['test_error']:.4f}{spread} |")
        for side in SIDES[:2]:
            t, m = (r[side]["seconds"] / r["sklearn"]["seconds"], r[side]["peak_gib"] / r["sklearn"]["peak_gib"])
            print(f"| {r['dataset']} | | {side} / sklearn | {t:.2f}x | {m:.2f}x | | | |")


def one_fit(name, workdir, gammas):
    """One rfstream fit of a gamma list (or one gamma) on the training Zarr; its rchar."""
    import dask

    from rfstream import pipeline
    from rfstream.datasets import registry

    data = registry.prepare(name, workdir, test=False)[0]
    before = _rchar()
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        model, _ = pipeline.fit_dataset(data, n_components=500, gamma=gammas if len(gammas) > 1 else gammas[0],
                                        alpha=[0.1, 1.0, 10.0], random_state=0)
    return {"seconds": time.perf_counter() - t0, "read_bytes": _rchar() - before,
            "gamma": model.named_steps["solver"].gamma_ if len(gammas) > 1 else gammas[0],
            "best_score": model.named_steps["solver"].best_score_}


def _rchar():
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


def passes(args):
    X = _data(args.dataset, args.workdir)[0]
    auto = _gammas(X)[FACTORS.index(1.0)]
    gammas = [auto * 2.0**k for k in range(-(args.gammas // 2), args.gammas - args.gammas // 2)]
    runs = {"grid": [gammas]} | {f"gamma {g:.4g}": [[g]] for g in gammas}
    results = {}
    for repeat in range(args.repeats):  # alternating rounds; each run's fastest round is kept
        for label, (grid,) in runs.items():
            argv = [sys.executable, os.path.abspath(__file__), "_fit", args.dataset, args.workdir, json.dumps(grid)]
            seconds, peak, result = measure(argv)
            row = {**result, "process_seconds": round(seconds, 1), "peak_gib": round(peak / 2**30, 2)}
            print(json.dumps({"round": repeat, label: row}), flush=True)
            if label not in results or row["seconds"] < results[label]["seconds"]:
                results[label] = row
    single = [v for k, v in results.items() if k != "grid"]
    grid = results["grid"]
    print("\n| run | fit seconds | bytes read | best CV error |")
    print("|---|---|---|---|")
    print(f"| {len(gammas)} gammas, one fit | {grid['seconds']:.1f} | {grid['read_bytes'] / 2**20:.0f} MiB | "
          f"{grid['best_score']:.5f} |")
    print(f"| {len(gammas)} fits of one gamma | {sum(s['seconds'] for s in single):.1f} | "
          f"{sum(s['read_bytes'] for s in single) / 2**20:.0f} MiB | {min(s['best_score'] for s in single):.5f} |")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_side":
        side, name, workdir, gammas = sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
        calibrate = {"auto": "auto", "yes": True, "no": False}[sys.argv[6]]
        result = (side_sklearn(name, workdir, gammas) if side == "sklearn" else
                  side_rfstream(name, workdir, gammas, "evidence" if side == "rfstream-evidence" else "cv", calibrate))
        print(json.dumps(result))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_fit":
        print(json.dumps(one_fit(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gridsearch", help="against GridSearchCV")
    g.add_argument("--datasets", nargs="+", default=["adult", "letter", "cpusmall"])
    g.add_argument("--workdir", default=str(cache_dir()))
    g.add_argument("--json", default=None)
    g.add_argument("--calibrate", choices=("auto", "yes", "no"), default="auto",
                   help="rfstream's calibrate= (default: the estimators' default, 'auto')")
    q = sub.add_parser("passes", help="G gammas in one fit against G fits")
    q.add_argument("--dataset", default="kddcup99")
    q.add_argument("--gammas", type=int, default=4)
    q.add_argument("--repeats", type=int, default=3)
    q.add_argument("--workdir", default=str(cache_dir()))
    args = p.parse_args()
    {"gridsearch": gridsearch, "passes": passes}[args.command](args)


if __name__ == "__main__":
    main()
