"""TEFM-G and TEFM-S (Chen et al. 2015) against plain random Fourier features on cpusmall.

    python examples/tefm_cpusmall.py --datasets ../shared/datasets

Converts cpusmall (LIBSVM, regression) to Zarr, splits it 75/25, and fits
standardizer -> feature map -> ridge (alpha by 5-fold CV) for RFF with l and
4 l features and for TEFM-G / TEFM-S with l features (d = 4 l random features
underneath).  Prints the relative test RMSE, the fit time and the kernel
approximation error of each map, then folds TEFM's Q into the ridge weights
(:func:`rfstream.datadriven.fold_projection`) and checks that the folded model,
which predicts from the d random features alone, gives the same predictions.
"""
import argparse
import time

import dask
import numpy as np
from sklearn.pipeline import Pipeline

from rfstream import TEFM, RandomFourierFeatures, Standardizer, StreamingRidge
from rfstream.datadriven import fold_projection
from rfstream.datasets import train_test
from rfstream.metrics import kernel_approximation_error, relative_rmse


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=None, help="real datasets folder (default: $RFSTREAM_DATASETS, "
                   "else ../shared/datasets beside the repository)")
    p.add_argument("--workdir", default="runs/tefm_cpusmall")
    p.add_argument("--l", type=int, default=100, help="TEFM output features")
    args = p.parse_args()
    dask.config.set(scheduler="threads")
    Xtr, Xte, ytr, yte = train_test("cpusmall", args.workdir, args.datasets)  # 75/25, seed 0
    Xtr, Xte, ytr, yte = (a.persist() for a in (Xtr, Xte, ytr, yte))
    l = args.l
    maps = {
        f"RFF {l}": RandomFourierFeatures(l, gamma="auto", random_state=0),
        f"RFF {4 * l}": RandomFourierFeatures(4 * l, gamma="auto", random_state=0),
        f"TEFM-G {l}": TEFM(l, method="gaussian", gamma="auto", random_state=0),
        f"TEFM-S {l}": TEFM(l, method="srht", gamma="auto", random_state=0),
    }
    print(f"{'features':12s} {'rel. RMSE':>9s} {'fit s':>6s} {'kernel err':>10s}")
    for name, fmap in maps.items():
        model = Pipeline([("std", Standardizer()), ("features", fmap),
                          ("solver", StreamingRidge(alpha=[1e-4, 1e-3, 1e-2, 0.1, 1.0], cv=5))])
        t0 = time.perf_counter()
        model.fit(Xtr, ytr)
        seconds = time.perf_counter() - t0
        rmse = relative_rmse(yte, model.predict(Xte))
        Xs = model.named_steps["std"].transform(Xtr)
        kerr = kernel_approximation_error(Xs, model.named_steps["features"], n_samples=1000)
        print(f"{name:12s} {rmse:9.4f} {seconds:6.1f} {kerr:10.4f}")
    folded = fold_projection(model)  # the last model: TEFM-S
    same = np.allclose(np.asarray(folded.predict(Xte)), np.asarray(model.predict(Xte)),
                       rtol=1e-3, atol=1e-3 * float(np.abs(np.asarray(yte)).max()))
    print(f"folded TEFM-S model (RFF {4 * l} + Q w) predicts the same: {same}")


if __name__ == "__main__":
    main()
