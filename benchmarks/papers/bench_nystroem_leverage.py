"""Nystroem landmarks: ridge-leverage sampling against uniform sampling (docs/nystroem.md).

For each dataset, ``m`` and seed, ``NystroemFeatures(m, landmarks=L)`` is fitted on the
standardized training rows for ``L`` = "uniform" and "leverage" (the same seed), and
measured by

* the kernel-approximation error ``||K - ZZ'||_F / ||K||_F`` on 2000 test rows
  (:func:`rfstream.metrics.kernel_approximation_error`; the same rows for both methods of
  a seed, a new draw per seed);
* the test error rate of ``StreamingRidgeClassifier(alpha)`` fitted on the features.

Gaussian kernel, ``gamma`` from :func:`rfstream.kernels.auto_gamma` on the training rows.
Training sets larger than ``--max-train`` rows (ijcnn1's 49,990) are subsampled once
(fixed rows, the same for every seed); test sets larger than ``--max-test`` rows (ijcnn1's
91,701) likewise.  Mean +- standard deviation over the seeds, and the paired difference
(leverage - uniform) +- its standard error.  Run from the repository root:

    python benchmarks/papers/bench_nystroem_leverage.py              # the docs' table; ~15 min on 2 cores
    python benchmarks/papers/bench_nystroem_leverage.py --datasets magic_gamma --sizes 100 --seeds 3

Datasets come from ../shared/datasets through :func:`rfstream.datasets.registry.train_test`,
converted once into ``$RFSTREAM_BENCH_CACHE`` (default /tmp/rfstream-bench).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import dask
import numpy as np

from rfstream import Standardizer, StreamingRidgeClassifier
from rfstream.bench.scripts import cache_dir, write_json
from rfstream.cluster import compute
from rfstream.datadriven import NystroemFeatures
from rfstream.datasets.registry import train_test
from rfstream.kernels import auto_gamma
from rfstream.metrics import kernel_approximation_error
from rfstream.random import sample_row_indices

CACHE = cache_dir()
DATASETS = ("magic_gamma", "letter", "ijcnn1", "covtype_sample")
METHODS = ("uniform", "leverage")


def load(name, max_train, max_test):
    """Standardized numpy ``X, Xt, y, yt`` and the auto gamma; larger sets subsampled once (seed 0)."""
    arrays = [np.asarray(a) for a in compute(*train_test(name, CACHE))]
    X, Xt, y, yt = arrays
    keep = sample_row_indices(X.shape[0], max_train, 0)
    keep_t = sample_row_indices(Xt.shape[0], max_test, 1)
    X, y, Xt, yt = X[keep], y[keep], Xt[keep_t], yt[keep_t]
    scaler = Standardizer().fit(X)
    X, Xt = scaler.transform(X), scaler.transform(Xt)
    return X, Xt, y, yt, auto_gamma(X, random_state=0)


def one_fit(X, Xt, y, yt, gamma, m, method, seed, alpha):
    """``(kernel error, test error, seconds to fit the map)`` of one map and its ridge classifier."""
    t0 = time.perf_counter()
    nys = NystroemFeatures(m, gamma=gamma, landmarks=method, random_state=seed).fit(X)
    seconds = time.perf_counter() - t0
    kerr = kernel_approximation_error(Xt, nys, n_samples=2000, random_state=1000 + seed)
    clf = StreamingRidgeClassifier(alpha=alpha).fit(nys.transform(X), y)
    terr = float(np.mean(clf.predict(nys.transform(Xt)) != yt))
    return kerr, terr, seconds


def summarize(values):
    """``mean +- std`` (ddof 1) of a list."""
    a = np.asarray(values, dtype=np.float64)
    return f"{a.mean():.4f} +- {a.std(ddof=1) if a.size > 1 else 0.0:.4f}"


def paired(lev, uni):
    """``mean +- standard error`` of the per-seed differences leverage - uniform."""
    d = np.asarray(lev) - np.asarray(uni)
    se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else 0.0
    return f"{d.mean():+.4f} +- {se:.4f}"


def table(results):
    """The markdown table of docs/nystroem.md."""
    lines = ["| dataset (n train, d, gamma) | m | kernel error: uniform | leverage | difference (paired) "
             "| test error: uniform | leverage | difference (paired) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, entry in results.items():
        head = f"{name} ({entry['n_train']}, {entry['d']}, {entry['gamma']:.3g})"
        for m, cell in entry["cells"].items():
            u, lv = cell["uniform"], cell["leverage"]
            lines.append(f"| {head} | {m} | {summarize(u['kernel_error'])} | {summarize(lv['kernel_error'])} "
                         f"| {paired(lv['kernel_error'], u['kernel_error'])} | {summarize(u['test_error'])} "
                         f"| {summarize(lv['test_error'])} | {paired(lv['test_error'], u['test_error'])} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 300, 1000])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=1e-3)
    parser.add_argument("--max-train", type=int, default=20_000)
    parser.add_argument("--max-test", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=CACHE / "nystroem_leverage.json")
    args = parser.parse_args(argv)
    results = {}
    with dask.config.set(scheduler="threads"):
        for name in args.datasets:
            X, Xt, y, yt, gamma = load(name, args.max_train, args.max_test)
            entry = results[name] = {"n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]),
                                     "d": int(X.shape[1]), "gamma": gamma, "alpha": args.alpha, "cells": {}}
            for m in args.sizes:
                cell = entry["cells"][m] = {}
                for method in METHODS:
                    runs = [one_fit(X, Xt, y, yt, gamma, m, method, seed, args.alpha) for seed in range(args.seeds)]
                    cell[method] = {"kernel_error": [r[0] for r in runs], "test_error": [r[1] for r in runs],
                                    "fit_seconds": [r[2] for r in runs]}
                    print(f"{name} m={m} {method}: kernel error {summarize(cell[method]['kernel_error'])}, "
                          f"test error {summarize(cell[method]['test_error'])}, "
                          f"fit {np.mean(cell[method]['fit_seconds']):.2f} s", flush=True)
                write_json(args.out, results)
    print(table(results))


if __name__ == "__main__":
    main()
