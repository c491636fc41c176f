"""The client's peak memory in a search's solve, measured, against the plan's model.

Fits a (gamma x size x alpha) grid on the shipped MAGIC data on dask's threads, traces every
allocation with ``tracemalloc`` (numpy's arrays included), and reports the peak of the traced
memory while the ridge solver searches (its partials, each size's slices, the folds' sums and
one fold's factorization held at once) beside :func:`rfstream.solvers.memory.client_memory`.
The scoring and calibration passes are left out (``scoring="squared_error"``,
``calibrate=False``) so that no pass's tasks run inside the measured span.

    python benchmarks/selection/plan_client_memory.py --sizes 250,500,1000 --gammas 3
"""
from __future__ import annotations

import argparse
import json
import tempfile
import tracemalloc
from pathlib import Path

import dask


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250,500,1000", help="n_components list")
    parser.add_argument("--gammas", type=int, default=3, help="gammas of the grid (auto*2^k around auto)")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)

    from rfstream import pipeline
    from rfstream.datasets import registry
    from rfstream.solvers import memory
    from rfstream.solvers.ridge.estimators import RidgeSearchMixin

    sizes = [int(s) for s in args.sizes.split(",")]
    gammas = [f"auto*{2.0 ** (k - args.gammas // 2):g}" for k in range(args.gammas)]
    alphas = [0.01, 0.1, 1.0, 10.0, 100.0]
    peaks = []
    search = RidgeSearchMixin._search

    def traced(self, *a, **k):  # the solve: from the partials returned to the choice
        tracemalloc.reset_peak()
        try:
            return search(self, *a, **k)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])

    RidgeSearchMixin._search = traced
    with tempfile.TemporaryDirectory() as tmp, dask.config.set(scheduler="threads"):
        data, _ = registry.prepare("magic_demo", Path(tmp), rows_per_chunk=4096)
        tracemalloc.start()
        pipeline.fit_dataset(data, n_components=sizes, gamma=gammas, alpha=alphas, cv=args.folds,
                             scoring="squared_error", calibrate=False, report=False)
        tracemalloc.stop()
    widths = sizes  # random Fourier features: one column per component
    model, _ = memory.client_memory(len(gammas), args.folds, max(widths), 1, widths if len(widths) > 1 else None)
    old = memory.gram_memory(len(gammas), args.folds, max(widths), 1)[3] + 8 * 4 * max(widths) ** 2
    print(json.dumps({"sizes": sizes, "gammas": gammas, "folds": args.folds, "alphas": len(alphas),
                      "measured_peak_MiB": round(max(peaks) / 2**20, 1),
                      "model_MiB": round(model / 2**20, 1),
                      "previous_model_MiB": round(old / 2**20, 1)}, indent=2))


if __name__ == "__main__":
    main()
