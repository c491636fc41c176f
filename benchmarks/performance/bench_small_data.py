"""Wall time of ``rfstream fit`` on small data against a scikit-learn script doing the same work.

    python benchmarks/performance/bench_small_data.py --repeats 7 --json runs/small_data.json

Adult (32,561 x 105 after one-hot encoding) and MAGIC (19,020 x 10) are converted once
through :mod:`rfstream.datasets.registry` (what ``rfstream convert`` does with the
registry's options) into ``--workdir``.  Then, per dataset, whole processes are timed
from start to exit (``time.perf_counter`` around ``subprocess.run``), ``--repeats``
times, the sides interleaved and their order rotated every repeat:

* ``rfstream``: the console script, ``rfstream fit DATA --n-components D --gamma G
  --alpha 0.1,1,10 --out DIR --overwrite --quiet``, with no ``--scheduler`` (and no
  ``$RFSTREAM_SCHEDULER``): the small-data rule picks dask's threads;
* ``rfstream-cluster``: the same with ``--scheduler cluster`` (the embedded
  LocalCluster that every fit started before the small-data rule);
* ``sklearn``: ``python benchmarks/performance/bench_small_data.py --sklearn DATA D G DIR``: read X
  and y from the same Zarr dataset, ``StandardScaler -> RBFSampler(n_components=D,
  gamma=G) -> RidgeClassifierCV(alphas=(0.1, 1, 10))``, ``joblib.dump`` of the model.

Both fit the same D random Fourier features of the same Gaussian kernel (G is the
``gamma="auto"`` value rfstream finds for the dataset, computed once before the clock
and given to both) and choose among the same alphas (rfstream by 5-fold CV in its one
pass, scikit-learn by its leave-one-out shortcut).  Reported: min and median wall
seconds per side and their ratios to scikit-learn's.  The machine's load
average is printed with the table: on a shared machine compare ratios within one run.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ALPHAS = (0.1, 1.0, 10.0)
DATASETS = {"adult": "adult", "magic04": "magic_gamma"}  # name shown -> registry entry
SIDES = ("rfstream", "rfstream-cluster", "sklearn")


def sklearn_fit(data, n_components, gamma, out):
    """The scikit-learn side, run in its own process by ``--sklearn``."""
    import joblib
    import numpy as np
    import zarr
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    group = zarr.open_group(str(data), mode="r")
    X, y = np.asarray(group["X"][:]), np.asarray(group["y"][:])
    model = make_pipeline(StandardScaler(), RBFSampler(n_components=n_components, gamma=gamma, random_state=0),
                          RidgeClassifierCV(alphas=ALPHAS))
    model.fit(X, y)
    joblib.dump(model, Path(out) / "model.joblib")


def auto_gamma(data):
    """The gamma ``rfstream fit DATA`` finds with ``gamma="auto"`` (one-hot columns unscaled)."""
    from rfstream.io import dataset_info, onehot_columns, open_dataset
    from rfstream.pipeline import make_model

    X, y = open_dataset(data)
    features = make_model("classification", passthrough=onehot_columns(dataset_info(data)["attrs"]),
                          feature_params={"n_components": 8, "gamma": "auto", "random_state": 0})[:-1]
    with __import__("dask").config.set(scheduler="threads"):
        return float(features.fit(X, y).named_steps["features"].gamma_)


def command(side, data, n_components, gamma, out):
    if side == "sklearn":
        return [sys.executable, str(Path(__file__).resolve()), "--sklearn", str(data), str(n_components),
                repr(gamma), str(out)]
    rfstream = shutil.which("rfstream", path=str(Path(sys.executable).parent)) or "rfstream"
    argv = [rfstream, "fit", str(data), "--n-components", str(n_components), "--gamma", repr(gamma),
            "--alpha", ",".join(map(str, ALPHAS)), "--out", str(out), "--overwrite", "--quiet"]
    return argv + (["--scheduler", "cluster"] if side == "rfstream-cluster" else [])


def wall_seconds(argv):
    # no PYTHONDONTWRITEBYTECODE: both sides start from cached bytecode, as installed packages do
    drop = ("RFSTREAM_SCHEDULER", "RFSTREAM_SMALL_DATA", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stderr}")
    return seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=None, help="the real datasets folder (default: the registry's)")
    p.add_argument("--workdir", default="runs/small_data", help="converted datasets go here")
    p.add_argument("--data", nargs="+", default=list(DATASETS), choices=DATASETS)
    p.add_argument("--n-components", type=int, default=500, help="D (default: 500, the issue's)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    p.add_argument("--json", default=None, help="also write the times here")
    args = p.parse_args()

    from rfstream.datasets import registry

    results, load = {}, os.getloadavg()[0]
    for name in args.data:
        data, _ = registry.prepare(DATASETS[name], args.workdir, args.datasets, test=False)
        gamma = auto_gamma(data)
        times = {side: [] for side in args.sides}
        with tempfile.TemporaryDirectory(prefix="rfstream-small-") as tmp:
            for r in range(-1, args.repeats):  # r = -1: a warm-up round, not counted
                order = args.sides[r % len(args.sides):] + args.sides[:r % len(args.sides)]
                for side in order:
                    out = Path(tmp) / side
                    if side == "sklearn":
                        out.mkdir(exist_ok=True)
                    seconds = wall_seconds(command(side, data, args.n_components, gamma, out))
                    if r >= 0:
                        times[side].append(seconds)
        results[name] = {"gamma": gamma, "n_components": args.n_components, "seconds": times}
        print(f"{name}: gamma {gamma:.4g}, " + ", ".join(
            f"{s} {' '.join(f'{t:.2f}' for t in ts)}" for s, ts in times.items()), flush=True)

    print(f"\nload average {load:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} cores; "
          f"D = {args.n_components}; {args.repeats} interleaved runs per side\n")
    print("| data | side | min s | median s | / sklearn (min) | / sklearn (median) |")
    print("|---|---|---|---|---|---|")
    for name, res in results.items():
        base = res["seconds"].get("sklearn")
        for side, ts in res["seconds"].items():
            ratios = ["", ""]
            if base and side != "sklearn":
                ratios = [f"{min(ts) / min(base):.2f}", f"{statistics.median(ts) / statistics.median(base):.2f}"]
            print(f"| {name} | {side} | {min(ts):.2f} | {statistics.median(ts):.2f} | {' | '.join(ratios)} |")
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, results, indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--sklearn":
        sklearn_fit(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    else:
        main()
