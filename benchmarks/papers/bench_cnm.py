"""Benchmarks of Compact Nonlinear Maps and circulant maps (Yu et al. 2015).

Run from the repository root (needs ../shared/datasets); JSON and PNG go to docs/cnm/:

    python benchmarks/papers/bench_cnm.py figure1 --dataset letter    # Figure 1: accuracy vs k
    python benchmarks/papers/bench_cnm.py figure1 --dataset magic_gamma
    python benchmarks/papers/bench_cnm.py kerapp --dataset letter --k 16 32   # (re)run CNM-kerapp only
    python benchmarks/papers/bench_cnm.py circulant                   # Table 2 pattern at k = d, 2d
    python benchmarks/papers/bench_cnm.py speed                       # circulant vs dense transform
    python benchmarks/papers/bench_cnm.py plot                        # redraw the PNGs from the JSON
    python benchmarks/papers/bench_cnm.py tables                      # markdown tables for docs/cnm.md

Protocol: each dataset is converted to Zarr once (cache in /tmp/rfstream-bench),
split 75/25 with :func:`rfstream.train_test_split` (seed 0), standardized with
the training moments; ``gamma="auto"`` (the paper's Section 7 rule).  Two
linear classifiers on a map: (1) scikit-learn's multinomial
``LogisticRegression`` (lbfgs, C = 100, 300 iterations) on the in-memory
features: a converged baseline for linear / RFF / CNM-kerapp /
circulant-random, also refitted on the CNM features ("accuracy_refit");  (2)
the same Pegasos training as CNM with the map frozen
(``CompactNonlinearMap(theta_step=0)``, "rff_pegasos"), so that RFF and CNM
differ only in whether Theta is learned.  CNM-classification predicts with
its own Pegasos ``w``.  (The paper uses a linear SVM; LinearSVC, C = 10, took
1-2 minutes per fit on letter with 256+ features on this shared machine and
was less accurate than the logistic regression (0.926 vs 0.943 at k = 256);
rfstream's ridge classifier was far weaker on 26-class letter (0.70 vs 0.85
at k = 64), which would have flattered CNM.)  The CNMs read the training rows as dask arrays (row chunks of
4096): every outer iteration gathers its sampled rows chunk by chunk.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from cnm_data import C_LOGISTIC, linear_accuracy, load, write
from cnm_figures import DATASETS, OUT, plot, tables

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ Figure 1
def figure1(args):
    from rfstream import CompactNonlinearMap, RandomFourierFeatures

    Xtr, Xte, ytr, yte, (Xd, yd) = load(args.dataset)
    res = {"dataset": args.dataset, "n_train": len(ytr), "n_test": len(yte), "d": Xtr.shape[1],
           "seeds": args.seeds, "C_logistic": C_LOGISTIC, "runs": []}
    res["linear"] = linear_accuracy(Xtr, ytr, Xte, yte)
    print("linear", res["linear"], flush=True)
    for seed in range(args.seeds):
        for k in args.rff_k:
            rff = RandomFourierFeatures(k, gamma="auto", random_state=seed).fit(Xtr)
            acc = linear_accuracy(rff.transform(Xtr), ytr, rff.transform(Xte), yte)
            res["runs"].append({"method": "rff", "k": k, "seed": seed, "accuracy": acc})
            print("rff", k, seed, acc, flush=True)
            write(f"figure1_{args.dataset}.json", res)
            if k <= args.pegasos_max_k:
                peg = CompactNonlinearMap(k, theta_step=0.0, random_state=seed).fit(Xd, yd)
                acc = float(peg.score(Xte, yte))
                res["runs"].append({"method": "rff_pegasos", "k": k, "seed": seed, "accuracy": acc})
                print("rff_pegasos", k, seed, acc, flush=True)
        for k in args.cnm_k:
            t0 = time.perf_counter()
            cnm = CompactNonlinearMap(k, random_state=seed).fit(Xd, yd)
            sec = time.perf_counter() - t0
            run = {"method": "cnm", "k": k, "seed": seed, "accuracy": float(cnm.score(Xte, yte)),
                   "accuracy_refit": linear_accuracy(cnm.transform(Xtr), ytr, cnm.transform(Xte), yte),
                   "fit_seconds": sec, "best_iter": cnm.best_iter_, "n_iter": cnm.n_iter_,
                   "validation_path": cnm.validation_path_, "gamma": cnm.gamma_}
            res["runs"].append(run)
            print("cnm", k, seed, run["accuracy"], run["accuracy_refit"], f"{sec:.0f}s", flush=True)
            write(f"figure1_{args.dataset}.json", res)
        if seed < args.kerapp_seeds:
            _kerapp_runs(res, args.kerapp_k, seed, args.kerapp_iter, Xtr, Xte, ytr, yte, Xd)
        write(f"figure1_{args.dataset}.json", res)
    plot(args)


def _kerapp_runs(res, ks, seed, max_iter, Xtr, Xte, ytr, yte, Xd):
    from rfstream import CompactNonlinearMap

    for k in ks:
        t0 = time.perf_counter()
        cnm = CompactNonlinearMap(k, objective="kernel", max_iter=max_iter, random_state=seed).fit(Xd)
        sec = time.perf_counter() - t0
        acc = linear_accuracy(cnm.transform(Xtr), ytr, cnm.transform(Xte), yte)
        res["runs"].append({"method": "cnm_kerapp", "k": k, "seed": seed, "accuracy": acc,
                            "fit_seconds": sec, "validation_mse_path": cnm.validation_path_})
        print("kerapp", k, seed, acc, f"{sec:.0f}s", flush=True)


def kerapp(args):
    """Add CNM-kerapp runs to an existing figure1 JSON (figure1 --kerapp-seeds 0 skips them)."""
    path = OUT / f"figure1_{args.dataset}.json"
    res = json.loads(path.read_text())
    Xtr, Xte, ytr, yte, (Xd, _) = load(args.dataset)
    res["runs"] = [r for r in res["runs"] if not (r["method"] == "cnm_kerapp" and r["k"] in args.k)]
    _kerapp_runs(res, args.k, 0, args.kerapp_iter, Xtr, Xte, ytr, yte, Xd)
    write(path.name, res)
    plot(args)


# ------------------------------------------------------------------ Table 2
def circulant(args):
    from rfstream import CirculantFeatures, CompactNonlinearMap, RandomFourierFeatures

    res = {"seeds": args.seeds, "C_logistic": C_LOGISTIC, "runs": []}
    for name in ("letter", "magic_gamma"):
        Xtr, Xte, ytr, yte, (Xd, yd) = load(name)
        d = Xtr.shape[1]
        for mult in (1, 2):
            k = mult * d
            for seed in range(args.seeds):
                row = {"dataset": name, "k": k, "d": d, "seed": seed}
                rff = RandomFourierFeatures(k, gamma="auto", random_state=seed).fit(Xtr)
                row["rff"] = linear_accuracy(rff.transform(Xtr), ytr, rff.transform(Xte), yte)
                circ = CirculantFeatures(k, gamma="auto", random_state=seed).fit(Xtr)
                row["circulant_random"] = linear_accuracy(circ.transform(Xtr), ytr,
                                                         circ.transform(Xte), yte)
                # the same Pegasos training with r fixed (theta_step=0) and with r learned
                fixed = CompactNonlinearMap(k, structure="circulant", theta_step=0.0,
                                            random_state=seed).fit(Xd, yd)
                opt = CompactNonlinearMap(k, structure="circulant", random_state=seed).fit(Xd, yd)
                row["circulant_random_pegasos"] = float(fixed.score(Xte, yte))
                row["circulant_optimized"] = float(opt.score(Xte, yte))
                row["circulant_optimized_refit"] = linear_accuracy(opt.transform(Xtr), ytr,
                                                                  opt.transform(Xte), yte)
                res["runs"].append(row)
                print(row, flush=True)
        write("table2_circulant.json", res)


# ------------------------------------------------------------------ bandwidth
def _auto_gamma(X, seed):
    """The value ``gamma="auto"`` resolves to in a map fitted with ``random_state=seed``."""
    from rfstream.kernels import auto_gamma

    (child,) = np.random.default_rng(seed).spawn(1)
    return auto_gamma(X, "gaussian", random_state=child)


def gamma_grid(args):
    """CNM (k = 16, 32) and RFF + logistic at ``gamma = scale x auto`` for each scale.

    Both methods get the same float gamma per (scale, seed); at scale 1 this is
    exactly ``gamma="auto"`` (same rows sampled, same frequencies drawn), and
    scale 4 is the paper's literal Section 7 rule ``gamma = 2 / sigma^2`` read
    with the kernel ``exp(-gamma ||x - y||^2)``.  Runs are appended to
    ``docs/cnm/gamma_<dataset>.json`` (a rerun of the same key replaces it).
    """
    from rfstream import CompactNonlinearMap, RandomFourierFeatures

    path = OUT / f"gamma_{args.dataset}.json"
    res = json.loads(path.read_text()) if path.exists() else {"dataset": args.dataset, "runs": []}
    Xtr, Xte, ytr, yte, (Xd, yd) = load(args.dataset)
    res.update(n_train=len(ytr), n_test=len(yte), d=Xtr.shape[1], C_logistic=C_LOGISTIC)

    def add(run):
        key = ("method", "k", "seed", "scale", "multiclass", "max_iter", "alpha")
        res["runs"] = [r for r in res["runs"] if any(r.get(c) != run.get(c) for c in key)]
        res["runs"].append(run)
        print(run["method"], run["k"], run["seed"], run["scale"], run.get("multiclass", ""),
              run["accuracy"], run.get("accuracy_refit", ""),
              f"{run.get('fit_seconds', 0):.0f}s", flush=True)
        write(path.name, res)

    for scale in args.scales:
        for seed in args.seed_list:
            gamma = scale * _auto_gamma(Xtr, seed)
            base = {"seed": seed, "scale": scale, "gamma": gamma}
            for k in args.rff_k:
                rff = RandomFourierFeatures(k, gamma=gamma, random_state=seed).fit(Xtr)
                acc = linear_accuracy(rff.transform(Xtr), ytr, rff.transform(Xte), yte)
                add({"method": "rff", "k": k, "accuracy": acc, **base})
            for k in args.cnm_k:
                for mc in args.multiclass:
                    t0 = time.perf_counter()
                    cnm = CompactNonlinearMap(k, gamma=gamma, multiclass=mc, max_iter=args.max_iter,
                                              n_iter_no_change=args.n_iter_no_change,
                                              alpha=args.alpha, random_state=seed).fit(Xd, yd)
                    sec = time.perf_counter() - t0
                    add({"method": "cnm", "k": k, "multiclass": mc, "max_iter": args.max_iter,
                         "alpha": args.alpha, **base,
                         "accuracy": float(cnm.score(Xte, yte)),
                         "accuracy_refit": linear_accuracy(cnm.transform(Xtr), ytr,
                                                           cnm.transform(Xte), yte),
                         "fit_seconds": sec, "best_iter": cnm.best_iter_, "n_iter": cnm.n_iter_,
                         "validation_path": cnm.validation_path_})


# ------------------------------------------------------------------ capacity probe
def probe(args):
    """Capacity of the model family: the same ``Z(x) = sqrt(2/k) cos(Theta' x + b)`` + softmax,
    trained jointly by Adam (lr ``--lr``, ``--steps`` mini-batches of 500, no early stopping).

    Not CNM's algorithm: a reference for how far *any* optimizer of this model
    takes a given ``k``.  Starts from the same random Fourier map as CNM (same
    gamma); the gradient of the map is CNM's own :func:`map_gradient`.  Reports
    the final training and test accuracy (no selection on the test rows).
    """
    from rfstream.datadriven.cnm_sgd import features, map_gradient
    from rfstream.kernels import sample_frequencies
    from rfstream.solvers.losses import multinomial

    path = OUT / f"probe_{args.dataset}.json"
    res = json.loads(path.read_text()) if path.exists() else {"dataset": args.dataset, "runs": []}
    Xtr, Xte, ytr, yte, _ = load(args.dataset)
    classes = np.unique(ytr)
    yi, yti = np.searchsorted(classes, ytr), np.searchsorted(classes, yte)
    d, K = Xtr.shape[1], classes.size
    for scale in args.scales:
        for seed in args.seed_list:
            for k in args.k:
                gamma = scale * _auto_gamma(Xtr, seed)
                rng = np.random.default_rng(seed)
                P = {"theta": sample_frequencies("gaussian", gamma, (d, k), rng),
                     "offset": rng.uniform(0, 2 * np.pi, k), "W": np.zeros((K, k)), "c": np.zeros(K)}
                m1 = {n: np.zeros_like(v) for n, v in P.items()}
                m2 = {n: np.zeros_like(v) for n, v in P.items()}
                t0 = time.perf_counter()
                for t in range(1, args.steps + 1):
                    idx = rng.integers(0, len(yi), 500)
                    x = Xtr[idx]
                    Z, u = features(x, P, k)
                    _, G = multinomial(Z @ P["W"].T + P["c"], yi[idx])
                    G /= len(idx)
                    grad = map_gradient(x, P, k, u, G @ P["W"])
                    grad["W"], grad["c"] = G.T @ Z, G.sum(axis=0)
                    for n in P:
                        m1[n] = 0.9 * m1[n] + 0.1 * grad[n]
                        m2[n] = 0.999 * m2[n] + 0.001 * grad[n] ** 2
                        P[n] -= args.lr * (m1[n] / (1 - 0.9**t)) / (np.sqrt(m2[n] / (1 - 0.999**t)) + 1e-8)
                sec = time.perf_counter() - t0
                acc = [float(np.mean(np.argmax(features(X, P, k)[0] @ P["W"].T + P["c"], 1) == y))
                       for X, y in ((Xtr, yi), (Xte, yti))]
                run = {"k": k, "seed": seed, "scale": scale, "gamma": gamma, "steps": args.steps,
                       "lr": args.lr, "train_accuracy": acc[0], "accuracy": acc[1], "seconds": sec}
                res["runs"] = [r for r in res["runs"] if any(
                    r[c] != run[c] for c in ("k", "seed", "scale", "steps", "lr"))] + [run]
                print(run, flush=True)
                write(path.name, res)


# ------------------------------------------------------------------ speed
def speed(args):
    """Transform time of ``rows`` rows, dense RFF vs circulant, at k = d and 4 d.

    Timed with one BLAS/FFT thread (how a dask task runs it: rfstream.cluster
    limits BLAS to one thread per task) and with the library defaults (BLAS on
    every core, scipy.fft single-threaded).  The minimum over ``repeats`` runs
    is the figure of merit (the machine is shared; the median is kept too).
    """
    from threadpoolctl import threadpool_limits

    from rfstream import CirculantFeatures, RandomFourierFeatures

    rng = np.random.default_rng(0)
    res = {"rows": args.rows, "dtype": "float32", "repeats": args.repeats, "runs": []}
    for d in args.dims:
        X = rng.normal(size=(args.rows, d)).astype(np.float32)
        for mult, threads in ((1, 1), (4, 1), (1, None), (4, None)):
            k = mult * d
            row = {"d": d, "k": k, "threads": threads or "default"}
            with threadpool_limits(threads):
                for name, cls in (("dense", RandomFourierFeatures), ("circulant", CirculantFeatures)):
                    fm = cls(k, gamma=1.0 / d, random_state=0).fit(X[:2])
                    fm.transform(X[:64])  # warm-up (FFT plans, BLAS threads)
                    times = []
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        fm.transform(X)
                        times.append(time.perf_counter() - t0)
                    nbytes = sum(v.nbytes for key, v in vars(fm).items()
                                 if key.endswith("_") and isinstance(v, np.ndarray))
                    row[name] = {"seconds": float(np.min(times)), "median": float(np.median(times)),
                                 "param_bytes": int(nbytes)}
            row["speedup"] = row["dense"]["seconds"] / row["circulant"]["seconds"]
            res["runs"].append(row)
            print(row, flush=True)
    write("speed.json", res)
    plot(args)



def schedule(args):
    """Theta-step schedules: test error of the constant step and of c / (1 + t / t0)."""
    from rfstream import CompactNonlinearMap

    res = {"k": args.k, "max_iter": args.max_iter, "train_rows": args.train_rows, "runs": []}
    settings = [("constant", None, None)] + [("decay", c, t0) for c, t0 in
                                              zip(args.c, args.t0, strict=True)]
    for name in args.datasets:
        Xtr, Xte, ytr, yte, _ = load(name)
        if args.train_rows and Xtr.shape[0] > args.train_rows:  # a fixed subsample, seed 0
            keep = np.sort(np.random.default_rng(0).choice(Xtr.shape[0], args.train_rows, replace=False))
            Xtr, ytr = Xtr[keep], ytr[keep]
        for sched, c, t0 in settings:
            for seed in args.seed_list:
                kw = {} if sched == "constant" else {"theta_schedule": "decay", "theta_step": c,
                                                     "theta_t0": t0}
                t_start = time.perf_counter()
                cnm = CompactNonlinearMap(args.k, max_iter=args.max_iter, random_state=seed, **kw)
                err = 1.0 - float(cnm.fit(Xtr, ytr).score(Xte, yte))
                run = {"dataset": name, "schedule": sched, "c": c, "t0": t0, "seed": seed,
                       "error": err, "fit_seconds": time.perf_counter() - t_start,
                       "best_iter": cnm.best_iter_}
                res["runs"].append(run)
                print(run, flush=True)
                write(args.out, res)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("figure1")
    p.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--rff-k", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256, 512])
    p.add_argument("--cnm-k", type=int, nargs="+", default=[8, 16, 32, 64])
    p.add_argument("--kerapp-k", type=int, nargs="+", default=[8, 16, 32, 64])
    p.add_argument("--kerapp-seeds", type=int, default=1)
    p.add_argument("--pegasos-max-k", type=int, default=64)
    p.add_argument("--kerapp-iter", type=int, default=10)
    p.set_defaults(fn=figure1)
    p = sub.add_parser("kerapp")
    p.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    p.add_argument("--k", type=int, nargs="+", default=[16, 32])
    p.add_argument("--kerapp-iter", type=int, default=10)
    p.set_defaults(fn=kerapp)
    p = sub.add_parser("gamma")
    p.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    p.add_argument("--scales", type=float, nargs="+", default=[4.0, 2.0, 1.0])
    p.add_argument("--seed-list", type=int, nargs="+", default=[0, 1])
    p.add_argument("--rff-k", type=int, nargs="*", default=[16, 32, 128, 256])
    p.add_argument("--cnm-k", type=int, nargs="*", default=[16, 32])
    p.add_argument("--multiclass", nargs="+", default=["ovr"],
                   choices=["ovr", "multinomial", "crammer-singer"])
    p.add_argument("--max-iter", type=int, default=30)
    p.add_argument("--n-iter-no-change", type=int, default=10)
    p.add_argument("--alpha", type=float, default=1e-4)
    p.set_defaults(fn=gamma_grid)
    p = sub.add_parser("probe")
    p.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    p.add_argument("--scales", type=float, nargs="+", default=[1.0, 4.0])
    p.add_argument("--seed-list", type=int, nargs="+", default=[0, 1])
    p.add_argument("--k", type=int, nargs="+", default=[16, 32])
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--lr", type=float, default=0.005)
    p.set_defaults(fn=probe)
    p = sub.add_parser("circulant")
    p.add_argument("--seeds", type=int, default=2)
    p.set_defaults(fn=circulant)
    p = sub.add_parser("speed")
    p.add_argument("--dims", type=int, nargs="+", default=[256, 1024, 2048, 4096])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    p.set_defaults(fn=speed)
    p = sub.add_parser("schedule")
    p.add_argument("--datasets", nargs="+", default=["letter", "magic_gamma", "ijcnn1"])
    p.add_argument("--seed-list", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--max-iter", type=int, default=200)
    p.add_argument("--train-rows", type=int, default=0, help="subsample the training set (0: all)")
    p.add_argument("--c", type=float, nargs="*", default=[0.2, 0.5, 1.0])
    p.add_argument("--t0", type=float, nargs="*", default=[2000.0, 1000.0, 500.0])
    p.add_argument("--out", default="schedule.json", help="file name under docs/cnm")
    p.set_defaults(fn=schedule)
    p = sub.add_parser("plot")
    p.set_defaults(fn=plot)
    p = sub.add_parser("tables")
    p.set_defaults(fn=tables)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import dask

    dask.config.set(scheduler="threads")
    main()
