"""Benchmark: rfstream's passes on the GPU it finds, against that device's own GEMM rate.

Run from the repository root on a machine with an NVIDIA GPU and ``pip install -e ".[cuda]"``:

    python benchmarks/performance/bench_gpu.py                       # (a) only: synthetic rows
    python benchmarks/performance/bench_gpu.py --kdd KDD.zarr --fashion FASHION.zarr --fashion-test T.zarr

It prints one JSON document; without a CUDA device it says so and exits 1 (no figure is made
up).  The parts (issue "GPU workers", docs/gpu.md):

(a) the Gram pass of random Fourier features (features made and ``Z'[Z, Y, 1]`` summed in
    sub-blocks, rows already on the device) at KDD99 x10's shape (4,940,210 x 118, D = 2,000)
    and Fashion-MNIST's (60,000 x 784, D = 16,384), in FP32 and TF32, beside the device's GEMM
    rate for the same product shapes (the floor: ``2 n D^2`` flops at that rate);
(b) with ``--kdd`` (a Zarr dataset, e.g. ``bench_kdd_full.py``'s conversion): the fit at D = 2,000,
    4 alphas, 5-fold CV, end to end with ``device="cuda"``, beside one pass that only reads the rows
    (the I/O floor);
(c) with ``--fashion`` and ``--fashion-test``: D = 16,384 with ``cv="loo"``: time, peak device
    memory and test accuracy; (d) the largest D of ``--max-d`` the device's memory takes, and its
    accuracy.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def _timed(fn, repeat=3):
    """The best of ``repeat`` wall times of ``fn()`` (its result synchronized on the device)."""
    import cupy

    best = float("inf")
    for _ in range(repeat):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def gram_pass(n, d, D, precision, sub_block=8192):
    """Seconds of the Gram pass over ``n`` device rows of ``d`` columns at ``D`` features, and of the
    same products alone (the GEMM floor), in ``precision``."""
    import cupy
    import numpy as np

    from rfstream.devices import products_in
    from rfstream.features import RandomFourierFeatures
    from rfstream.solvers.ridge.on_device import fold_products

    rows = min(n, 262_144)  # one task's rows, repeated to n: the device holds them once
    x = cupy.random.standard_normal((rows, d), dtype=cupy.float32)
    Y = np.random.default_rng(0).normal(size=(rows, 1))
    features = RandomFourierFeatures(D, gamma=1.0 / d, random_state=0).fit(np.zeros((1, d)))._device_features()
    repeats = -(-n // rows)

    def one_pass():
        with products_in(precision, cupy):
            for _ in range(repeats):
                fold_products(cupy, x, Y, None, features, np.dtype(np.float32), sub_block)

    z = cupy.random.standard_normal((sub_block, D + 2), dtype=cupy.float32)

    def gemm_only():
        with products_in(precision, cupy):
            for _ in range(-(-n // sub_block)):
                z[:, :D].T @ z

    return _timed(one_pass, 2), _timed(gemm_only, 2), 2.0 * n * D * (D + 2)


def part_a():
    out = {}
    for name, (n, d, D) in {"kdd99x10_D2000": (4_940_210, 118, 2_000),
                            "fashion_D16384": (60_000, 784, 16_384)}.items():
        for precision in ("fp32", "tf32"):
            seconds, floor, flops = gram_pass(n, d, D, precision)
            out[f"{name}_{precision}"] = {"pass_s": round(seconds, 3), "gemm_floor_s": round(floor, 3),
                                          "share_of_gemm_rate": round(floor / seconds, 3),
                                          "pass_tflops": round(flops / seconds / 1e12, 2)}
    return out


def part_b(kdd):
    import dask.array as da

    from rfstream.cluster import connect, compute
    from rfstream.jobs import open_data
    from rfstream.pipeline import fit_dataset
    from rfstream.devices import on_device

    with connect("cluster", device="cuda"):
        X = open_data(kdd)[0]
        t0 = time.perf_counter()
        compute(da.sum(on_device(X, "cuda"), axis=0))  # the rows read and moved: the I/O floor
        floor = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, meta = fit_dataset(kdd, device="cuda", n_components=2000, alpha=[0.01, 0.1, 1.0, 10.0], cv=5,
                              progress="never")
        fit = time.perf_counter() - t0
    return {"read_pass_s": round(floor, 2), "fit_s": round(fit, 2), "fit_over_floor": round(fit / floor, 2),
            "passes": meta.get("passes")}


def part_cd(train, test, sizes):
    import cupy

    from rfstream.cluster import connect
    from rfstream.pipeline import evaluate_dataset, fit_dataset

    out = {}
    with connect("cluster", device="cuda"):
        for D in sizes:
            cupy.get_default_memory_pool().free_all_blocks()
            t0 = time.perf_counter()
            try:
                model, meta = fit_dataset(train, device="cuda", n_components=D, cv="loo",
                                          alpha=[1e-3, 1e-2, 1e-1, 1.0], progress="never")
            except (MemoryError, cupy.cuda.memory.OutOfMemoryError) as exc:
                out[f"D{D}"] = {"refused": f"{type(exc).__name__}"}
                break
            seconds = time.perf_counter() - t0
            scored = evaluate_dataset(model, meta, test, device="cuda")
            out[f"D{D}"] = {"fit_s": round(seconds, 2), "accuracy": round(1 - scored["error_rate"], 4),
                            "peak_device_bytes": int(cupy.get_default_memory_pool().total_bytes())}
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kdd", help="a Zarr dataset for part (b)")
    parser.add_argument("--fashion", help="Fashion-MNIST's training Zarr dataset for parts (c) and (d)")
    parser.add_argument("--fashion-test", help="its test set")
    parser.add_argument("--max-d", default="16384,32768,65536", help="the sizes of part (d)")
    args = parser.parse_args(argv)
    from rfstream.devices import cuda_available

    found, why = cuda_available()
    if not found:
        print(json.dumps({"device": None, "why": f"no CUDA device: {why}"}))
        return 1
    import cupy

    report = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "a_gram_pass": part_a()}
    if args.kdd:
        report["b_kdd_fit"] = part_b(args.kdd)
    if args.fashion and args.fashion_test:
        report["cd_fashion_loo"] = part_cd(args.fashion, args.fashion_test,
                                           [int(v) for v in args.max_d.split(",")])
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
