"""EERF on Adult: 100 Gaussian random features chosen by their score against the labels.

    python examples/eerf_adult.py --datasets ../shared/datasets

Converts Adult (train adult.data, test adult.test) to Zarr once, then fits
standardizer -> feature map -> ridge classifier (alpha by 5-fold CV) on dask
arrays with plain random Fourier features and with EERF (Shahrampour et al.
2018, Algorithm 1: 2000 candidates scored on 5% of the rows, the 100 best
kept), and prints the test error and the time to fit the map (EERF's
pre-processing) and the whole model.  About 30 seconds on 2 cores.
"""
import argparse
import time

import dask

from rfstream import io
from rfstream.datasets import prepare
from rfstream.io import onehot_columns
from rfstream.metrics import error_rate
from rfstream.pipeline import make_model


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=None, help="real datasets folder (default: $RFSTREAM_DATASETS, "
                   "else ../shared/datasets beside the repository)")
    p.add_argument("--workdir", default="runs/eerf_adult")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    train, test = prepare("adult", args.workdir, args.datasets, rows_per_chunk=8192)
    X, y = io.open_dataset(train)
    Xt, yt = io.open_dataset(test)
    passthrough = onehot_columns(io.dataset_info(train)["attrs"])
    dask.config.set(scheduler="threads")
    options = {
        "rff": {},
        "eerf": {"n_candidates": 2000, "subsample": 0.05},
    }
    print(f"{'features':10s} {'test error':>10s} {'map fit (s)':>12s} {'model fit (s)':>14s}")
    for name, extra in options.items():
        model = make_model(
            "classification", features=name, passthrough=passthrough,
            feature_params={"n_components": 100, "gamma": "auto", "random_state": args.seed, **extra},
            solver_params={"alpha": [0.01, 0.1, 1.0, 10.0, 100.0]},
        )
        # the pipeline's steps fitted one by one, to time the map's fit (EERF: one score pass)
        std, fmap, solver = (step for _, step in model.steps)
        t0 = time.perf_counter()
        Xs = std.fit(X).transform(X)
        t1 = time.perf_counter()
        Z = fmap.fit(Xs, y).transform(Xs)
        t_map = time.perf_counter() - t1
        solver.fit(Z, y)
        t_model = time.perf_counter() - t0
        error = error_rate(yt, model.predict(Xt))  # one reduction; no label column on the client
        print(f"{name:10s} {100 * error:9.2f}% {t_map:12.2f} {t_model:14.2f}")


if __name__ == "__main__":
    main()
