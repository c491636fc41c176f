"""Benchmarks of Compact Nonlinear Maps and circulant maps (Yu et al. 2015).

Run from the repository root (needs ../shared/datasets); JSON and PNG go to docs/cnm/:

    python benchmarks/papers/bench_cnm.py figure1 --dataset letter    # Figure 1: accuracy vs k
    python benchmarks/papers/bench_cnm.py figure1 --dataset magic_gamma
    python benchmarks/papers/bench_cnm.py kerapp --dataset letter --k 16 32   # (re)run CNM-kerapp only
    python benchmarks/papers/bench_cnm.py circulant                   # Table 2 pattern at k = d, 2d
    python benchmarks/papers/bench_cnm.py speed                       # circulant vs dense transform
    python benchmarks/papers/bench_cnm.py plot                        # redraw the PNGs from the JSON
    python benchmarks/papers/bench_cnm.py tables                      # markdown tables for docs/cnm.md
    python benchmarks/papers/bench_cnm.py schedule                    # constant vs decaying Theta-step
    python benchmarks/papers/bench_cnm.py claim --dataset covtype_sample   # Figure 1's claim, defaults

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

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "cnm"
DATASETS = ("letter", "magic_gamma")  # entries of rfstream.datasets.registry
C_LOGISTIC, MAX_ITER_LOGISTIC = 100.0, 300


# ------------------------------------------------------------------ data
def load(name):
    """Standardized train/test numpy arrays and dask training arrays of a dataset."""
    import dask.array as da

    from rfstream import Standardizer
    from rfstream.bench.scripts import cache_dir
    from rfstream.datasets import train_test
    from rfstream.datasets.registry import get

    split = {} if get(name).test else {"test_size": 0.25}  # ijcnn1 ships its test file
    Xtr, Xte, ytr, yte = train_test(name, cache_dir(), rows_per_chunk=4096, **split)
    st = Standardizer().fit(Xtr)
    Xtr, Xte = st.transform(Xtr).compute(), st.transform(Xte).compute()
    ytr, yte = ytr.compute(), yte.compute()
    dask_train = (da.from_array(Xtr, chunks=(4096, -1)), da.from_array(ytr, chunks=4096))
    return Xtr, Xte, ytr, yte, dask_train


def linear_accuracy(Ztr, ytr, Zte, yte):
    """Test accuracy of a converged linear classifier on given features (see module doc)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = LogisticRegression(C=C_LOGISTIC, max_iter=MAX_ITER_LOGISTIC).fit(Ztr, ytr)
    return float(clf.score(Zte, yte))


def write(name, data):
    """``data`` as JSON in docs/cnm/``name``."""
    from rfstream.bench.scripts import write_json

    print("wrote", write_json(OUT / name, data))



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
    from rfstream.solvers.sgd.losses import multinomial

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
    from rfstream.bench.measures import wall_seconds

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
                    times = [wall_seconds(lambda fm=fm, X=X: fm.transform(X)) for _ in range(args.repeats)]
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
    """Theta-step schedules: test error (or, with ``--objective kernel``, the test rows' kernel
    MSE) of the constant step and of c / (1 + t / t0), every other parameter at its default."""
    from rfstream import CompactNonlinearMap
    from rfstream.datadriven.cnm_sgd import kernel_objective

    kernel = args.objective == "kernel"
    res = {"k": args.k, "max_iter": args.max_iter, "train_rows": args.train_rows,
           "objective": args.objective, "runs": []}
    settings = [("constant", c, None) for c in args.constant] + [
        ("decay", c, t0) for c, t0 in zip(args.c, args.t0, strict=True)]
    for name in args.datasets:
        Xtr, Xte, ytr, yte, _ = load(name)
        if args.train_rows and Xtr.shape[0] > args.train_rows:  # a fixed subsample, seed 0
            keep = np.sort(np.random.default_rng(0).choice(Xtr.shape[0], args.train_rows, replace=False))
            Xtr, ytr = Xtr[keep], ytr[keep]
        for sched, c, t0 in settings:
            for seed in args.seed_list:
                kw = {"theta_schedule": sched, "theta_step": c}  # explicit: not the default of the day
                if sched == "decay":
                    kw["theta_t0"] = t0
                t_start = time.perf_counter()
                cnm = CompactNonlinearMap(args.k, objective=args.objective, max_iter=args.max_iter,
                                          random_state=seed, **kw)
                if kernel:  # Section 5: eq. 10 over the pairs of 1000 test rows
                    cnm.fit(Xtr)
                    x = Xte[:1000].astype(np.float64)
                    err = float(kernel_objective(x, cnm._params(), args.k, "gaussian", cnm.gamma_)[0])
                else:
                    err = 1.0 - float(cnm.fit(Xtr, ytr).score(Xte, yte))
                run = {"dataset": name, "schedule": sched, "c": c, "t0": t0, "seed": seed,
                       "mse" if kernel else "error": err,
                       "fit_seconds": time.perf_counter() - t_start, "best_iter": cnm.best_iter_}
                res["runs"].append(run)
                print(run, flush=True)
                write(args.out, res)


def claim(args):
    """Figure 1's claim at the current defaults on another dataset: CNM (own ``w`` and a logistic
    regression refitted on its features) against RFF + logistic regression at more features."""
    from rfstream import CompactNonlinearMap, RandomFourierFeatures

    Xtr, Xte, ytr, yte, _ = load(args.dataset)
    res = {"dataset": args.dataset, "n_train": len(ytr), "n_test": len(yte), "d": Xtr.shape[1],
           "C_logistic": C_LOGISTIC, "runs": []}
    res["linear"] = linear_accuracy(Xtr, ytr, Xte, yte)
    print("linear", res["linear"], flush=True)
    out = f"claim_{args.dataset}.json"
    variants = [("cnm", {})] + ([("cnm_constant", {"theta_schedule": "constant"})]
                                if args.also_constant else [])
    for seed in args.seed_list:
        for k in args.rff_k:
            rff = RandomFourierFeatures(k, gamma="auto", random_state=seed).fit(Xtr)
            acc = linear_accuracy(rff.transform(Xtr), ytr, rff.transform(Xte), yte)
            res["runs"].append({"method": "rff", "k": k, "seed": seed, "accuracy": acc})
            print("rff", k, seed, acc, flush=True)
        for method, kw in variants:
            for k in args.cnm_k:
                t0 = time.perf_counter()
                cnm = CompactNonlinearMap(k, random_state=seed, **kw).fit(Xtr, ytr)
                run = {"method": method, "k": k, "seed": seed, "accuracy": float(cnm.score(Xte, yte)),
                       "accuracy_refit": linear_accuracy(cnm.transform(Xtr), ytr, cnm.transform(Xte), yte),
                       "fit_seconds": time.perf_counter() - t0, "best_iter": cnm.best_iter_,
                       "n_iter": cnm.n_iter_, "params": cnm.get_params()}
                res["runs"].append(run)
                print(method, k, seed, run["accuracy"], run["accuracy_refit"], flush=True)
                write(out, res)
        write(out, res)


# ------------------------------------------------------------------ figures and tables
def _finish(ax, xlabel, ylabel):
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _save(fig, name):
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(OUT / name, dpi=110)
    plt.close(fig)
    print("wrote", OUT / name)


def plot(args=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = [OUT / f"figure1_{n}.json" for n in DATASETS if (OUT / f"figure1_{n}.json").exists()]
    if files:
        fig, axes = plt.subplots(1, len(files), figsize=(5.5 * len(files), 4), squeeze=False)
        for ax, path in zip(axes[0], files):
            res = json.loads(path.read_text())
            ax.axhline(res["linear"], color="gray", ls="--", label="Linear (logistic on x)")
            for method, label, key in (("rff", "RFFM + logistic", "accuracy"),
                                       ("rff_pegasos", "RFFM + Pegasos (CNM, Theta frozen)", "accuracy"),
                                       ("cnm_kerapp", "CNM-kerapp + logistic", "accuracy"),
                                       ("cnm", "CNM-classification", "accuracy"),
                                       ("cnm", "CNM features + logistic", "accuracy_refit")):
                runs = [r for r in res["runs"] if r["method"] == method]
                ks = sorted({r["k"] for r in runs})
                if not ks:
                    continue
                mean = [np.mean([r[key] for r in runs if r["k"] == k]) for k in ks]
                ax.plot(ks, mean, marker="o", label=label,
                        ls=":" if key == "accuracy_refit" or method == "rff_pegasos" else "-")
            ax.set_title(f"{res['dataset']} (n_train={res['n_train']}, d={res['d']})")
            _finish(ax, "k (number of features)", "test accuracy")
        _save(fig, "figure1_accuracy_vs_k.png")
    _plot_gamma(plt)
    if (OUT / "speed.json").exists():
        res = json.loads((OUT / "speed.json").read_text())
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for mult, ls in ((1, "-"), (4, "--")):
            runs = [r for r in res["runs"] if r["k"] == mult * r["d"] and r["threads"] == 1]
            dims = [r["d"] for r in runs]
            for name in ("dense", "circulant"):
                ax.plot(dims, [r[name]["seconds"] for r in runs], marker="o", ls=ls,
                        label=f"{name}, k={mult}d")
        ax.set_yscale("log")
        _finish(ax, "d (input dimension)", f"transform seconds ({res['rows']} rows, 1 thread)")
        _save(fig, "speed.png")


def _variant(run):
    """(multiclass, max_iter, alpha) of a CNM run of the bandwidth grid."""
    return run["multiclass"], run.get("max_iter", 30), run.get("alpha", 1e-4)


def _variant_label(v):
    mc, it, alpha = v
    return mc + ("" if it == 30 else f", {it} it") + ("" if alpha == 1e-4 else f", alpha {alpha:g}")


def _grid(runs, method, k, scale, variant=None, key="accuracy"):
    """Mean, std and count of ``key`` over the seeds of one cell of the bandwidth grid."""
    sel = [r[key] if key != "validation" else max(r["validation_path"]) for r in runs
           if r["method"] == method and r["k"] == k and r["scale"] == scale
           and (method == "rff" or _variant(r) == variant)]
    return (float(np.mean(sel)), float(np.std(sel)), len(sel)) if sel else None


def _plot_gamma(plt):
    """Accuracy against gamma / auto: RFF at k and 8 k, CNM at k (docs/cnm/gamma_accuracy.png)."""
    files = [OUT / f"gamma_{n}.json" for n in DATASETS if (OUT / f"gamma_{n}.json").exists()]
    if not files:
        return
    fig, axes = plt.subplots(1, len(files), figsize=(6 * len(files), 4.2), squeeze=False)
    for ax, path in zip(axes[0], files):
        runs = json.loads(path.read_text())["runs"]
        scales = sorted({r["scale"] for r in runs})
        present = {_variant(r) for r in runs if r["method"] == "cnm"}
        # the default, and the best variants measured (the tables have all of them)
        variants = [v for v in (("ovr", 30, 1e-4), ("crammer-singer", 30, 1e-4),
                                ("crammer-singer", 200, 1e-4), ("crammer-singer", 200, 1e-5),
                                ("ovr", 200, 1e-4)) if v in present]
        lines = [("rff", k, None) for k in sorted({r["k"] for r in runs if r["method"] == "rff"})]
        lines += [("cnm", k, v) for v in variants
                  for k in sorted({r["k"] for r in runs if r["method"] == "cnm"})]
        for i, (method, k, v) in enumerate(lines):
            cells = [(s, _grid(runs, method, k, s, v)) for s in scales]
            xs, ys = [s for s, c in cells if c], [c[0] for s, c in cells if c]
            if method == "rff":
                label, style = f"RFF-{k} + logistic", {"ls": "--", "color": str(0.75 - 0.15 * i)}
            else:
                label = f"CNM-{k} {_variant_label(v)}"
                style = {"ls": "-" if k == 16 else ":", "color": f"C{variants.index(v)}"}
            ax.plot(xs, ys, marker="o", label=label, **style)
        ax.axvline(4.0, color="k", lw=0.5)
        ax.set_title(f"{path.stem[6:]} (vertical line: Section 7 read literally)")
        _finish(ax, "gamma / auto_gamma", "test accuracy")
        ax.legend(fontsize=6, ncol=2)
    _save(fig, "gamma_accuracy.png")


def _gamma_tables(name):
    """Tables of the bandwidth grid: accuracy per scale, and the k vs 8 k comparison."""
    path = OUT / f"gamma_{name}.json"
    if not path.exists():
        return
    runs = json.loads(path.read_text())["runs"]

    def cell(v):
        return f"{v[0]:.3f} +- {v[1]:.3f}" if v else "-"

    scales = sorted({r["scale"] for r in runs}, reverse=True)
    variants = sorted({_variant(r) for r in runs if r["method"] == "cnm"},
                      key=lambda v: (v[1], -v[2], ["ovr", "crammer-singer", "multinomial"].index(v[0])))
    rff_k = sorted({r["k"] for r in runs if r["method"] == "rff"})
    cnm_k = sorted({r["k"] for r in runs if r["method"] == "cnm"})
    seeds = sorted({r["seed"] for r in runs})
    print(f"\n{name}: test accuracy at gamma = scale x auto, mean +- std over seeds {seeds}\n")
    print("| scale | " + " | ".join(f"RFF-{k}" for k in rff_k) + " |")
    print("|---" * (len(rff_k) + 1) + "|")
    for s in scales:
        print(f"| {s:g} | " + " | ".join(cell(_grid(runs, "rff", k, s)) for k in rff_k) + " |")
    print("\n| CNM variant | k | " + " | ".join(f"scale {s:g}" for s in scales) + " |")
    print("|---" * (len(scales) + 2) + "|")
    for v in variants:
        for k in cnm_k:
            print(f"| {_variant_label(v)} | {k} | " + " | ".join(
                cell(_grid(runs, "cnm", k, s, v)) for s in scales) + " |")
    print("\nheld-out accuracy (CNM's own validation rows, best over the path)\n")
    print("| CNM variant | k | " + " | ".join(f"scale {s:g}" for s in scales) + " |")
    print("|---" * (len(scales) + 2) + "|")
    for v in variants:
        for k in cnm_k:
            print(f"| {_variant_label(v)} | {k} | " + " | ".join(
                cell(_grid(runs, "cnm", k, s, v, "validation")) for s in scales) + " |")
    print(f"\n{name}: CNM at k against RFF at 8 k at the same gamma (difference in points)\n")
    print("| CNM variant | " + " | ".join(
        f"{k} vs {8 * k} @ {s:g}" for s in scales for k in cnm_k) + " |")
    print("|---" * (len(scales) * len(cnm_k) + 1) + "|")
    print("| RFF-8k | " + " | ".join(
        cell(_grid(runs, "rff", 8 * k, s))[:5] for s in scales for k in cnm_k) + " |")
    for v in variants:
        cells = []
        for s in scales:
            for k in cnm_k:
                c, base = _grid(runs, "cnm", k, s, v), _grid(runs, "rff", 8 * k, s)
                cells.append(f"{c[0]:.3f} ({100 * (c[0] - base[0]):+.1f})" if c and base else "-")
        print(f"| {_variant_label(v)} | " + " | ".join(cells) + " |")
    print(f"\n{name}: each method at its best scale (by test accuracy)\n")
    for k in cnm_k:
        best_rff = max(((_grid(runs, "rff", 8 * k, s) or (-1,))[0], s) for s in scales)
        for v in variants:
            best = max(((_grid(runs, "cnm", k, s, v) or (-1,))[0], s) for s in scales)
            if best[0] >= 0 and best_rff[0] >= 0:
                print(f"- CNM-{k} {_variant_label(v)}: {best[0]:.3f} at scale {best[1]:g}; "
                      f"RFF-{8 * k}: {best_rff[0]:.3f} at scale {best_rff[1]:g} "
                      f"({100 * (best[0] - best_rff[0]):+.1f} points)")


def _schedule_table(path):
    """Mean +- std (ddof 1) per setting and dataset, and the rule of docs/cnm.md ("The default
    schedule, decided again"): is the constant better than the decay by more than one standard
    error of the difference (and, for the test error, by more than 0.25 points)?"""
    res = json.loads(path.read_text())
    key = "mse" if res.get("objective") == "kernel" else "error"
    scale, unit, floor = (1.0, "kernel MSE", 0.0) if key == "mse" else (100.0, "test error %", 0.25)
    runs = [{**r, "c": 0.2} if r["c"] is None else r for r in res["runs"]]  # schedule.json: the
    names = list(dict.fromkeys(r["dataset"] for r in runs))                 # default 0.2 unnamed
    settings = list(dict.fromkeys((r["schedule"], r["c"], r["t0"]) for r in runs))

    def values(name, setting):
        return scale * np.array([r[key] for r in runs if r["dataset"] == name
                                 and (r["schedule"], r["c"], r["t0"]) == setting])

    print(f"\n{path.name} ({unit}, k = {res['k']}, max_iter = {res['max_iter']})\n")
    print("| setting | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for st in settings:
        label = f"constant {st[1]:g}" if st[0] == "constant" else f"decay c = {st[1]:g}, t0 = {st[2]:g}"
        cells = []
        for name in names:
            v = values(name, st)
            fmt = ".3g" if key == "mse" else ".2f"
            cells.append(f"{v.mean():{fmt}} ± {v.std(ddof=1):{fmt}} (n = {v.size})" if v.size > 1 else "-")
        print(f"| {label} | " + " | ".join(cells) + " |")
    const = [st for st in settings if st[0] == "constant"]
    decay = [st for st in settings if st[0] == "decay"]
    if len(const) == 1 and len(decay) == 1:
        for name in names:
            a, b = values(name, const[0]), values(name, decay[0])
            if a.size < 2 or b.size < 2:
                continue
            diff, se = b.mean() - a.mean(), np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
            better = diff > se and diff > floor
            print(f"{name}: decay - constant = {diff:+.3g} (standard error {se:.2g}): "
                  f"{'the constant is better by the rule' if better else 'not a win for the constant'}")


def _claim_table(path):
    res = json.loads(path.read_text())
    runs = res["runs"]
    print(f"\n{path.name}: n_train {res['n_train']}, n_test {res['n_test']}, d {res['d']}, "
          f"linear {res['linear']:.3f}\n")
    print("| method | k | test accuracy (seeds) | mean | refit logistic mean |")
    print("|---|---|---|---|---|")
    for method in dict.fromkeys(r["method"] for r in runs):
        for k in sorted({r["k"] for r in runs if r["method"] == method}):
            sel = [r for r in runs if r["method"] == method and r["k"] == k]
            accs = ", ".join(f"{r['accuracy']:.3f}" for r in sel)
            refit = (f"{np.mean([r['accuracy_refit'] for r in sel]):.3f}"
                     if "accuracy_refit" in sel[0] else "-")
            print(f"| {method} | {k} | {accs} | {np.mean([r['accuracy'] for r in sel]):.3f} | {refit} |")


def tables(args=None):
    """Markdown tables of the results (pasted into docs/cnm.md)."""
    def mean(values):
        return f"{np.mean(values):.3f}" if values else "-"

    for name in DATASETS:
        _gamma_tables(name)

    for name in DATASETS:
        path = OUT / f"figure1_{name}.json"
        if not path.exists():
            continue
        res = json.loads(path.read_text())
        runs = res["runs"]
        ks = sorted({r["k"] for r in runs})
        cols = [("rff", "accuracy", "RFF + logistic"), ("rff_pegasos", "accuracy", "RFF + Pegasos"),
                ("cnm_kerapp", "accuracy", "CNM-kerapp + logistic"),
                ("cnm", "accuracy", "CNM-classification"), ("cnm", "accuracy_refit", "CNM + logistic")]
        print(f"\n{name}: linear {res['linear']:.3f}, seeds {res['seeds']}\n")
        print("| k | " + " | ".join(c[2] for c in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for k in ks:
            cells = [mean([r[key] for r in runs if r["method"] == m and r["k"] == k]) for m, key, _ in cols]
            print(f"| {k} | " + " | ".join(cells) + " |")
    path = OUT / "table2_circulant.json"
    if path.exists():
        runs = json.loads(path.read_text())["runs"]
        keys = ["rff", "circulant_random", "circulant_random_pegasos", "circulant_optimized",
                "circulant_optimized_refit"]
        print("\n| dataset (k) | " + " | ".join(keys) + " |")
        print("|---" * (len(keys) + 1) + "|")
        for name in DATASETS:
            for k in sorted({r["k"] for r in runs if r["dataset"] == name}):
                sel = [r for r in runs if r["dataset"] == name and r["k"] == k]
                cells = [f"{np.mean([r[c] for r in sel]):.3f} +- {np.std([r[c] for r in sel]):.3f}"
                         for c in keys]
                print(f"| {name} ({k}) | " + " | ".join(cells) + " |")
    for path in sorted(OUT.glob("schedule*.json")):
        _schedule_table(path)
    for path in sorted(OUT.glob("claim_*.json")):
        _claim_table(path)
    path = OUT / "speed.json"
    if path.exists():
        res = json.loads(path.read_text())
        print("\n| d | k | threads | dense s | circulant s | speedup | dense params (bytes) | circulant params (bytes) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in res["runs"]:
            print(f"| {r['d']} | {r['k']} | {r['threads']} | {r['dense']['seconds']:.3f} | "
                  f"{r['circulant']['seconds']:.3f} | {r['speedup']:.2f} | "
                  f"{r['dense']['param_bytes']:,} | {r['circulant']['param_bytes']:,} |")


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
    p.add_argument("--objective", choices=["classification", "kernel"], default="classification")
    p.add_argument("--constant", type=float, nargs="*", default=[0.2], help="constant steps")
    p.add_argument("--c", type=float, nargs="*", default=[0.2, 0.5, 1.0])
    p.add_argument("--t0", type=float, nargs="*", default=[2000.0, 1000.0, 500.0])
    p.add_argument("--out", default="schedule.json", help="file name under docs/cnm")
    p.set_defaults(fn=schedule)
    p = sub.add_parser("claim")
    p.add_argument("--dataset", default="covtype_sample", help="a classification dataset of the registry")
    p.add_argument("--seed-list", type=int, nargs="+", default=[0, 1])
    p.add_argument("--rff-k", type=int, nargs="*", default=[16, 32, 64, 128, 256, 512])
    p.add_argument("--cnm-k", type=int, nargs="*", default=[16, 32])
    p.add_argument("--also-constant", action="store_true", help="CNM with theta_schedule='constant' too")
    p.set_defaults(fn=claim)
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
