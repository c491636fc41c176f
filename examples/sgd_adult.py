"""Streaming SGD vs Newton passes on Adult: the same regularized risk, two solvers.

    python examples/sgd_adult.py --datasets ../shared/datasets

Converts Adult to Zarr once (4 chunks of 8192 rows), then fits standardizer ->
300 Gaussian random Fourier features -> StreamingSGDClassifier (log loss,
lambda = 1e-4) with the streaming SGD steps (parameter averaging, 5 epochs) and
with ``solver="newton"`` (one gradient + Hessian pass per step), and prints
the exact objective reached, the passes over the data, the test error and the
time.  About 30 seconds on 2 cores.  docs/sgd.md has the full benchmark.
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
    p.add_argument("--workdir", default="runs/sgd_adult")
    args = p.parse_args()
    train, test = prepare("adult", args.workdir, args.datasets, rows_per_chunk=8192)
    X, y = io.open_dataset(train)
    Xt, yt = io.open_dataset(test)
    passthrough = onehot_columns(io.dataset_info(train)["attrs"])
    dask.config.set(scheduler="threads")
    print(f"{'solver':8s} {'objective':>10s} {'passes':>7s} {'test error':>10s} {'fit (s)':>8s}")
    for solver, max_iter in (("sgd", 5), ("newton", 20)):
        model = make_model(
            "classification", solver="sgd", passthrough=passthrough,
            feature_params={"n_components": 300, "gamma": "auto", "random_state": 0},
            solver_params={"loss": "log_loss", "alpha": 1e-4, "solver": solver, "max_iter": max_iter},
        )
        t0 = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - t0
        est = model.named_steps["solver"]
        error = error_rate(yt, model.predict(Xt))  # one reduction; no label column on the client
        print(f"{solver:8s} {est.objective_:10.6f} {len(est.objective_path_):7d} {100 * error:9.2f}% "
              f"{seconds:8.1f}")


if __name__ == "__main__":
    main()
