"""Choosing the model: the evidence against 5-fold CV, interval coverage, calibrated probabilities.

Run from the repository root (needs ../shared/datasets):

    python benchmarks/selection/bench_selection.py --datasets cpusmall adult letter magic_gamma ijcnn1 covtype_sample

On each dataset's training split (the registry's test file, or its held-out rows),
``Standardizer -> RandomFourierFeatures(D, gamma=[auto x 2^-5 ... 2^2]) ->
StreamingRidge / StreamingRidgeClassifier(alpha=[0.01, 0.1, 1, 10, 100])`` is fitted
twice, ``select="cv"`` (5 folds; error rate for classifiers) and ``select="evidence"``,
with ``calibrate=True``, under dask's threads.  Reported per dataset and route: the
chosen (gamma / auto, alpha), the test error (error rate; RMSE for regression), the fit
seconds; for regression the empirical coverage and mean width of 90% intervals on the
test rows; for classification the log-loss of ``predict_proba`` (Platt scaling on the CV
pass's out-of-fold decision values, the evidence's on leave-one-out ones) against scikit-learn's
``CalibratedClassifierCV(RidgeClassifier(alpha), cv=5)`` on the same features (the CV
route's gamma and alpha), fitted in memory on the training rows.

The rule the judgement uses (written before running): the evidence's choice is
acceptable when its test error is within 2% relative (regression) or 0.5 points
(classification) of CV's choice.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from rfstream.bench.scripts import cache_dir, write_json

ALPHAS = [0.01, 0.1, 1.0, 10.0, 100.0]
FACTORS = [2.0**k for k in range(-5, 3)]


def run(name, workdir, n_components, proba_rows):
    import dask
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import RidgeClassifier
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline

    from rfstream import RandomFourierFeatures, StreamingRidge, StreamingRidgeClassifier
    from rfstream.datasets import registry
    from rfstream.kernels import auto_gamma
    from rfstream.preprocess import Standardizer

    X, Xt, y, yt = registry.train_test(name, workdir)
    task = registry.get(name).task
    regression = task == "regression"
    out = {"dataset": name, "rows": int(X.shape[0]), "test_rows": int(Xt.shape[0]), "D": n_components}
    with dask.config.set(scheduler="threads"):
        auto = auto_gamma(Standardizer().fit(X).transform(X), "gaussian", random_state=0)
        yt_np = np.asarray(yt.compute())
        for select in ("cv", "evidence"):
            solver = (StreamingRidge if regression else StreamingRidgeClassifier)(
                alpha=ALPHAS, cv=5, select=select, calibrate=True)
            model = make_pipeline(Standardizer(), RandomFourierFeatures(
                n_components, gamma=[auto * f for f in FACTORS], random_state=0), solver)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # choices on a grid's edge
                model.fit(X, y)
            seconds = time.perf_counter() - t0
            ridge = model[-1]
            pred = np.asarray(model.predict(Xt).compute())
            row = {"gamma_x_auto": ridge.gamma_ / auto, "alpha": ridge.alpha_, "seconds": round(seconds, 1)}
            if regression:
                row["test_error"] = float(np.sqrt(np.mean((pred - yt_np) ** 2)))
                Zt = model[:-1].transform(Xt)
                lo, hi = (np.asarray(a) for a in dask.compute(*ridge.predict_interval(Zt, level=0.9)))
                row["coverage_90"] = float(np.mean((yt_np >= lo) & (yt_np <= hi)))
                row["mean_width_90"] = float(np.mean(hi - lo))
            else:
                row["test_error"] = float(np.mean(pred != yt_np))
                proba = np.asarray(model.predict_proba(Xt).compute())
                row["log_loss"] = float(log_loss(yt_np, proba, labels=ridge.classes_))
                if select == "cv":
                    Z = np.asarray(model[:-1].transform(X[:proba_rows]).compute())
                    ref = CalibratedClassifierCV(RidgeClassifier(alpha=ridge.alpha_), cv=5).fit(
                        Z, np.asarray(y[:proba_rows].compute()))
                    Zt = np.asarray(model[:-1].transform(Xt).compute())
                    row["sklearn_calibrated_log_loss"] = float(log_loss(yt_np, ref.predict_proba(Zt),
                                                                        labels=ridge.classes_))
                    row["sklearn_rows"] = int(Z.shape[0])
            out[select] = row
            print(json.dumps({"dataset": name, select: row}), flush=True)
    cv, ev = out["cv"]["test_error"], out["evidence"]["test_error"]
    out["evidence_within_rule"] = bool(ev <= cv * 1.02 if regression else ev <= cv + 0.005)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["cpusmall", "adult", "letter", "magic_gamma", "ijcnn1",
                                                    "covtype_sample"])
    p.add_argument("--n-components", type=int, default=1000)
    p.add_argument("--proba-rows", type=int, default=200_000,
                   help="training rows scikit-learn's CalibratedClassifierCV gets in memory")
    p.add_argument("--workdir", default=str(cache_dir()))
    p.add_argument("--json", default=None)
    args = p.parse_args()
    rows = [run(name, args.workdir, args.n_components, args.proba_rows) for name in args.datasets]
    if args.json:
        write_json(args.json, rows)
    print("\n| dataset | route | gamma (x auto) | alpha | test error | fit s | 90% coverage / log-loss |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        for select in ("cv", "evidence"):
            s = r[select]
            extra = (f"{s['coverage_90']:.3f} (width {s['mean_width_90']:.3g})" if "coverage_90" in s
                     else f"{s['log_loss']:.4f}" + (f" (sklearn {s['sklearn_calibrated_log_loss']:.4f})"
                                                    if "sklearn_calibrated_log_loss" in s else ""))
            print(f"| {r['dataset']} | {select} | {s['gamma_x_auto']:g} | {s['alpha']:g} | "
                  f"{s['test_error']:.4f} | {s['seconds']} | {extra} |")


if __name__ == "__main__":
    main()
