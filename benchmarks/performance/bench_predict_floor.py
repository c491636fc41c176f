"""Prediction and evaluation against the features-only pass (issue 32, item 4).

The floor of any pass that makes a model's features and keeps nothing of size n: read the
rows, standardize, make the features a sub-block at a time (as the fused passes do), and
discard them.  ``rfstream predict`` makes the same features and one small product per row
(D x T, or D x K) and writes the predictions; ``rfstream evaluate`` makes them and sums
the metrics' partials.  This times, in one process on one cluster, interleaved and
repeated:

1. ``features``: the features-only pass of the model's own standardizer and map over the
   dataset's rows (:func:`rfstream.bench.measures.features_only_pass`);
2. ``predict``: :func:`rfstream.pipeline.predict_dataset` (what ``rfstream predict MODEL
   DATA OUT`` runs after it has loaded), writing to ``--workdir``;
3. ``evaluate``: :func:`rfstream.pipeline.evaluate_dataset` (``rfstream evaluate``).

Goal: predict and evaluate each <= 1.2 x the features-only pass (medians).

    python benchmarks/performance/bench_predict_floor.py --model /tmp/kdd_full/x10_model \\
        --data /tmp/kdd_full/x10.zarr --json docs/benchmarks/predict_floor.json

The model and the dataset are any fitted model directory and a dataset with its schema
(``benchmarks/performance/bench_kdd_full.py`` leaves both in its work folder).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a fitted model directory")
    parser.add_argument("--data", required=True, help="a dataset with the model's schema")
    parser.add_argument("--scheduler", default="cluster", help="as rfstream's --scheduler (default: cluster)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None, help="the predictions go here (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="write the results here too")
    args = parser.parse_args()

    from rfstream import pipeline
    from rfstream.bench.measures import features_only_pass, load
    from rfstream.cluster import connect, run_context
    from rfstream.io import open_dataset

    model, meta = pipeline.load_fitted(args.model)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rfstream-predict-floor-"))
    work.mkdir(parents=True, exist_ok=True)
    X = open_dataset(args.data)[0]
    times = {"features": [], "predict": [], "evaluate": []}
    steps = {
        "features": lambda: features_only_pass(model[:-1].transform(open_dataset(args.data)[0])),
        "predict": lambda: pipeline.predict_dataset(args.model, args.data, work / "pred.zarr", overwrite=True),
        "evaluate": lambda: pipeline.evaluate_dataset(model, meta, args.data),
    }
    result = {"model": str(args.model), "data": str(args.data), "rows": int(X.shape[0]),
              "n_features": int(model[:-1].transform(X).shape[1]), "load_at_start": load()}
    with connect(args.scheduler), run_context(progress="never"):
        steps["features"]()  # warm: the workers import what the passes need
        for _ in range(args.repeats):
            for name, step in steps.items():
                t0 = time.perf_counter()
                step()
                times[name].append(round(time.perf_counter() - t0, 2))
                print(name, times[name][-1], flush=True)
    result["seconds"] = times
    medians = {name: float(np.median(t)) for name, t in times.items()}
    result["median_seconds"] = medians
    result["predict_over_features"] = round(medians["predict"] / medians["features"], 2)
    result["evaluate_over_features"] = round(medians["evaluate"] / medians["features"], 2)
    result["load_at_end"] = load()
    print(json.dumps(result, indent=2))
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, result, indent=2)


if __name__ == "__main__":
    main()
