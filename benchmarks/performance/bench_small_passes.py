"""The small passes of a ridge classifier's fit against a pass that only decodes the rows (issue 51).

    python benchmarks/performance/bench_small_passes.py --data /tmp/kdd_x4.zarr --json out.json

On a KDD-shaped Zarr dataset (``rfstream convert`` of copies of KDD99's 10% file, as
``bench_kdd_full.py`` builds it), each pass timed on its own, under dask threads with 1 and 2
workers and on an embedded LocalCluster of 1 and 2 single-threaded worker processes, the
schedulers interleaved ``--repeats`` times (the median kept):

- ``zarr loop``: the Zarr chunks of X read one after the other by zarr, on the client, once;
- ``decode only``: a pass of :func:`rfstream.reductions.sum_rows` whose chunk function returns
  one zero: the Zarr chunks read and decoded by the tasks, nothing done with them;
- ``moments``: a Standardizer's moments (:func:`rfstream.reductions.moments`);
- ``first look``: the fit's first pass (:func:`rfstream.jobs.first_look`): the moments, the rows
  ``gamma="auto"`` samples and the classes;
- ``features only``: the features of every row made and dropped
  (:func:`rfstream.bench.measures.features_only_pass`), RFF of ``--n-components``;
- ``CV scoring``: :func:`rfstream.solvers.ridge.cv.score_pass` of ``--alphas`` candidates and
  5 folds (the weights random: the pass's cost does not depend on them);
- ``calibration``: :func:`rfstream.solvers.ridge.calibration.calibration_pass` of one model.

Each figure in seconds and in MB/s of X's float32 bytes, and the CPU seconds of this process
(the work of the threads scheduler; not the LocalCluster's workers).  ``--dense-too`` also times
each pass that makes features with the map's one-hot columns multiplied as the others, right
after it (:mod:`rfstream.features.onehot`).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np


def _steps(X, y, D, n_alphas, wanted=None, passthrough=None, dense_too=False):
    """``{name: callable}``: each pass of ``wanted`` (None: all), computed when called; the
    map is fitted (two passes, untimed) only for the passes that make features.  The
    Standardizer passes ``passthrough`` (the one-hot columns) through, as the fit does;
    ``dense_too``: each pass that makes features also as "<name> (dense)", right after it, with
    the map's one-hot columns multiplied as other columns (:mod:`rfstream.features.onehot`)."""
    from sklearn.pipeline import make_pipeline

    from rfstream.bench.measures import features_only_pass
    from rfstream.cluster import compute, prefetch, run_context
    from rfstream.features import RandomFourierFeatures
    from rfstream.jobs import first_look
    from rfstream.preprocess import Standardizer
    from rfstream.reductions import moments, sum_rows
    from rfstream.solvers import StreamingRidgeClassifier
    from rfstream.solvers.folds import check_cv
    from rfstream.solvers.ridge.calibration import calibration_pass
    from rfstream.solvers.ridge.cv import score_pass
    from rfstream.solvers.ridge.gram import feature_groups
    from rfstream.solvers.targets import ovr_targets

    model = make_pipeline(Standardizer(passthrough=passthrough), RandomFourierFeatures(n_components=D, gamma="auto", random_state=0),
                          StreamingRidgeClassifier(alpha=[0.01, 0.1, 1, 10][:n_alphas]))
    steps = {
        "decode only": lambda: compute(sum_rows(_nothing, 1, X)),
        "moments": lambda: compute(moments(X)),
        "first look": lambda: first(),
    }

    def first():
        with run_context():
            prefetch(*first_look(model, X, y))

    if wanted is not None and not set(wanted) - set(steps):
        return {k: v for k, v in steps.items() if k in wanted}
    std = Standardizer(passthrough=passthrough).fit(X)
    rff = RandomFourierFeatures(n_components=D, gamma="auto", random_state=0).fit(std.transform(X))
    Z = rff.transform(std.transform(X))
    groups = feature_groups(Z)
    classes = np.array([0, 1])
    cv = check_cv(5, Z, y)
    rng = np.random.default_rng(0)
    W, b = 0.01 * rng.standard_normal((5, D, n_alphas)), rng.standard_normal((5, n_alphas))
    F = np.eye(D) * 0.1
    calib = {"W": W[0, :, :1], "b": b[0, :1], "F": F, "mu": np.zeros(D), "inv_n": 1.0 / X.shape[0],
             "noise": np.ones(1)}

    def target_fn(labels):
        return ovr_targets(labels, classes)

    steps.update({
        "features only": lambda: features_only_pass(Z),
        "CV scoring": lambda: compute(score_pass(groups, y, [W], [b], scoring="error_rate", classes=classes,
                                                 cv=cv, weights=(None, None), seed=0)[0]),
        "calibration": lambda: calibration_pass(groups, 0, y, target_fn, (None, None), calib, classifier=True),
    })
    chosen = {k: v for k, v in steps.items() if wanted is None or k in wanted}
    if not dense_too:
        return chosen

    def dense(step):
        def run():
            onehot, rff._binary_columns_ = rff._binary_columns_, ()
            try:
                return step()
            finally:
                rff._binary_columns_ = onehot
        return run

    both = {}
    for name, step in chosen.items():
        both[name] = step
        if name in ("features only", "CV scoring", "calibration"):
            both[f"{name} (dense)"] = dense(step)
    return both


def _nothing(x, *rows, offset):
    return np.zeros(1)


def zarr_loop(path):
    """Seconds to read every Zarr chunk of X in turn, on one thread, with zarr itself."""
    import zarr

    arr = zarr.open_group(str(path), mode="r")["X"]
    step = arr.chunks[0]
    t0 = time.perf_counter()
    for start in range(0, arr.shape[0], step):
        arr[start:start + step]
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a KDD-shaped Zarr dataset (rfstream convert)")
    p.add_argument("--n-components", type=int, default=2000)
    p.add_argument("--alphas", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--schedulers", nargs="+", default=["threads", "LocalCluster"])
    p.add_argument("--passes", nargs="+", default=None, help="a subset of the passes, by name")
    p.add_argument("--json", default=None)
    p.add_argument("--dense-too", action="store_true",
                   help="each pass that makes features also with the one-hot columns multiplied (dense)")
    args = p.parse_args(argv)

    import dask

    from rfstream import io
    from rfstream.embedded import embedded_config, local_cluster_kwargs

    X, y = io.open_dataset(args.data)
    mb = X.shape[0] * X.shape[1] * 4 / 1e6
    result = {"data": str(args.data), "rows": int(X.shape[0]), "columns": int(X.shape[1]), "x_mb": mb,
              "D": args.n_components, "alphas": args.alphas, "loadavg_start": list(os.getloadavg()),
              "zarr loop s": zarr_loop(args.data), "runs": {}}
    print(f"zarr loop: {result['zarr loop s']:.2f} s, {mb / result['zarr loop s']:.0f} MB/s", flush=True)
    for r in range(args.repeats):
        for kind in args.schedulers:
            for workers in args.workers:
                key = f"{kind} x{workers}"
                if kind == "threads":
                    ctx = dask.config.set(scheduler="threads", num_workers=workers)
                    client = None
                else:
                    from distributed import Client, LocalCluster

                    with dask.config.set(embedded_config()):  # single-threaded workers, as the embedded one's
                        ctx = LocalCluster(**{**local_cluster_kwargs(workers), "threads_per_worker": 1})
                with ctx as cluster:
                    client = Client(cluster) if kind != "threads" else None
                    try:
                        steps = _steps(X, y, args.n_components, args.alphas, args.passes,
                                       io.onehot_columns(args.data) or None, args.dense_too)
                        for name, step in steps.items():
                            t0, c0 = time.perf_counter(), time.process_time()
                            step()
                            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
                            result["runs"].setdefault(key, {}).setdefault(name, []).append(seconds)
                            result.setdefault("cpu_s", {}).setdefault(key, {}).setdefault(name, []).append(cpu)
                            print(f"{key} {name}: {seconds:.2f} s, {mb / seconds:.0f} MB/s, {cpu:.2f} CPU s of this "
                                  "process (threads only)", flush=True)
                    finally:
                        if client is not None:
                            client.close()
    result["median_s"] = {k: {n: float(np.median(v)) for n, v in d.items()} for k, d in result["runs"].items()}
    result["loadavg_end"] = list(os.getloadavg())
    for key, d in result["median_s"].items():
        print(key, {n: f"{s:.2f} s ({mb / s:.0f} MB/s)" for n, s in d.items()})
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, result, indent=2)


if __name__ == "__main__":
    main()
