"""Random binning features (Rahimi & Recht 2007, Algorithm 2) on the shipped MAGIC data.

    python examples/binning_features.py

Converts the MAGIC gamma telescope CSV shipped with rfstream to Zarr, then on
dask arrays (lazy, block by block): standardize, map with random binning
features (sparse CSR blocks), and fit ridge two ways -- the Gram pass for a
moderate width, conjugate gradients on the implicit normal equations for a wide
hashed space -- next to Fourier features and the rff+binning hybrid.
"""
import argparse
import time

import dask

from rfstream import (
    FourierBinningFeatures,
    RandomBinningFeatures,
    RandomFourierFeatures,
    Standardizer,
    StreamingRidgeClassifier,
)
from rfstream.cluster import compute
from rfstream.datasets import train_test


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="runs/binning_example")
    args = p.parse_args()
    Xtr, Xte, ytr, yte = train_test("magic_demo", args.workdir, rows_per_chunk=4096, test_size=0.3)
    scaler = Standardizer().fit(Xtr)
    # 19,020 rows: keep the standardized blocks in memory, so that each CG pass only
    # recomputes the (cheap) binning features of each block
    Xtr, Xte, ytr, yte = dask.persist(scaler.transform(Xtr), scaler.transform(Xte), ytr, yte)

    maps = [
        ("binning P=30 x 64 bins (Gram)", RandomBinningFeatures(30, n_bins=64, gamma="auto", random_state=0), "gram"),
        ("binning P=50 x 1024 bins (CG)", RandomBinningFeatures(50, n_bins=1024, gamma="auto", random_state=0), "cg"),
        ("Fourier, Laplacian, D=1000", RandomFourierFeatures(1000, kernel="laplacian", gamma="auto", random_state=0),
         "gram"),
        ("rff+binning 300 + 20 x 64", FourierBinningFeatures(300, n_grids=20, n_bins=64, gamma="auto", random_state=0),
         "gram"),
    ]
    print(f"{'features':34s} {'width':>8s} {'fit s':>6s} {'test error':>10s}")
    for name, fmap, solver in maps:
        t0 = time.perf_counter()
        fmap.fit(Xtr)
        Ztr = fmap.transform(Xtr)  # lazy: a dask array of CSR blocks for the binning maps
        clf = StreamingRidgeClassifier(alpha=1.0, solver=solver).fit(Ztr, ytr)
        seconds = time.perf_counter() - t0
        error = compute((clf.predict(fmap.transform(Xte)) != yte).mean())
        print(f"{name:34s} {Ztr.shape[1]:8d} {seconds:6.1f} {float(error):10.4f}")


if __name__ == "__main__":
    with dask.config.set(scheduler="threads"):
        main()
