"""Standardizing or not, and which map to try first for accuracy (docs/accuracy.md).

Run from the repository root (needs ../shared/datasets; scikit-learn's ``load_digits`` ships
with scikit-learn):

    python benchmarks/selection/bench_accuracy.py standardize --json docs/accuracy/standardize.json
    python benchmarks/selection/bench_accuracy.py recipe --json docs/accuracy/recipe.json

``standardize``: on each dataset's registry split (``rfstream.datasets.registry.train_test``:
the provided test files of adult, ijcnn1 and kddcup99, a fixed 75/25 split of the others) and
on ``digits`` (scikit-learn's ``load_digits``, 1,797 8x8 images, pixels 0-16, split 80/20 with
seed 0 by ``rfstream.train_test_split``: 1,420 / 377), ``fit_dataset`` with RFF (D = 1000,
``gamma="auto"``) + ridge, ``alpha`` searched over :data:`ALPHAS` by 5-fold CV, with
``standardize=True`` and ``False``, ``--seeds`` (default 0, 1, 2; kddcup99: seed 0); the test
error (cpusmall: RMSE) of each; and what ``standardize="auto"`` decides from the training rows'
moments and extrema (``Standardizer(auto=True)``), whose test error is that of the setting it
picks (on digits ``auto`` is fitted too, to check that it is the same model).

``recipe``: on each dataset's training split, at most ``--rows`` training rows (a random
subset, seed 0; ``--subset first``: the first rows), the test split whole: the ``--methods``
of :data:`METHODS` (RFF at D = 1000 and 4000, TEFM-S with ``l`` features from ``d = 4 l``,
Nystroem with leverage landmarks at D = 1000 and 4000), each + ridge, ``gamma="auto"``, seed 0,
``alpha`` over :data:`RECIPE_ALPHAS` by 5-fold CV; and the reference, scikit-learn's exact RBF
``SVC`` with the ``gamma`` rfstream chose, on the same standardized rows (at most
``--svc-rows`` of them), ``C`` in 1, 10, 100 chosen on a 20% holdout of those rows. Test
error and fit seconds (wall, this process, dask's threads: a shared machine, see the load
recorded beside them).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from rfstream.bench.scripts import cache_dir, write_json

#: the alpha search of ``standardize`` (docs/accuracy.md's protocol) and of ``recipe`` (wider: the
#: larger maps want smaller alphas)
ALPHAS = [1e-3, 0.01, 0.1, 1.0, 10.0]
RECIPE_ALPHAS = [1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0]
SHARED = ("adult", "magic_gamma", "letter", "ijcnn1", "cpusmall", "covtype_sample", "kddcup99")


def _load():
    return os.getloadavg()


def dataset(name, workdir):
    """``(X, X_test, y, y_test, attrs)``: dask arrays of the registry's split, or digits'."""
    import dask.array as da

    if name == "digits":
        from sklearn.datasets import load_digits

        from rfstream.preprocess import train_test_split

        d = load_digits()
        X, Xt, y, yt = train_test_split(d.data.astype(np.float32), d.target, test_size=0.2, random_state=0)
        attrs = {"task": "classification", "classes": [int(c) for c in np.unique(y)]}
        return (da.from_array(X, chunks=1024), da.from_array(Xt, chunks=1024), da.from_array(y, chunks=1024),
                da.from_array(yt, chunks=1024), attrs)
    from rfstream import io
    from rfstream.datasets import registry

    train, _ = registry.prepare(name, workdir)
    attrs = io.dataset_info(train)["attrs"]
    X, Xt, y, yt = registry.train_test(name, workdir)
    return X, Xt, y, yt, attrs


def error(task, y, pred):
    y, pred = np.asarray(y), np.asarray(pred)
    if task == "classification":
        return 100.0 * float(np.mean(y != pred))
    return float(np.sqrt(np.mean((y.astype(np.float64) - pred) ** 2)))


def fit_score(name, X, Xt, y, yt, attrs, **kw):
    """``(test error, fit seconds, model)`` of one ``fit_dataset`` on the arrays."""
    from rfstream.pipeline import fit_dataset

    t0 = time.perf_counter()
    model, _ = fit_dataset(name, X=X, y=y, attrs=attrs, progress="never", report=False, **kw)
    seconds = time.perf_counter() - t0
    return error(attrs["task"], yt.compute(), model.predict(Xt).compute()), seconds, model


def subset(X, y, rows, how="random"):
    """At most ``rows`` of the training rows: a random subset (seed 0; magic04's file is sorted by
    class), or the first ``rows``."""
    if rows is None or X.shape[0] <= rows:
        return X, y
    if how == "first":
        return X[:rows], y[:rows]
    keep = np.sort(np.random.default_rng(0).choice(X.shape[0], rows, replace=False))
    return X[keep], y[keep]


def cmd_standardize(args):
    import dask

    from rfstream import io
    from rfstream.preprocess import Standardizer

    out = {"command": "standardize", "alphas": ALPHAS, "n_components": 1000, "rows": {}, "load_before": _load()}
    workdir = cache_dir()
    with dask.config.set(scheduler="threads"):
        for name in args.datasets:
            X, Xt, y, yt, attrs = dataset(name, workdir)
            X, y = subset(X, y, args.rows)
            onehot = io.onehot_columns(attrs) or None
            scaler = Standardizer(auto=True, passthrough=onehot).fit(X)
            seeds = [0] if name == "kddcup99" else args.seeds
            row = {"task": attrs["task"], "n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]),
                   "decision": scaler.decision_, "on": [], "off": [], "seconds": {"on": [], "off": []}}
            for seed in seeds:
                for key, value in (("on", True), ("off", False)):
                    err, sec, _ = fit_score(name, X, Xt, y, yt, attrs, standardize=value, n_components=1000,
                                                alpha=ALPHAS, random_state=seed, checkpoint=None)
                    row[key].append(err)
                    row["seconds"][key].append(round(sec, 2))
                if name == "digits":
                    err, _, _ = fit_score(name, X, Xt, y, yt, attrs, standardize="auto", n_components=1000,
                                          alpha=ALPHAS, random_state=seed, checkpoint=None)
                    row.setdefault("auto_fitted", []).append(err)
            row["mean_on"], row["mean_off"] = float(np.mean(row["on"])), float(np.mean(row["off"]))
            row["auto"] = row["mean_off"] if not scaler.applied_ else row["mean_on"]
            out["rows"][name] = row
            print(name, row["decision"], "on", np.round(row["on"], 3), "off", np.round(row["off"], 3), flush=True)
            if args.json:
                write_json(args.json, out)
    out["load_after"] = _load()
    if args.json:
        write_json(args.json, out)


METHODS = {
    "rff-1000": {"features": "rff", "n_components": 1000},
    "rff-4000": {"features": "rff", "n_components": 4000},
    "tefm-s-1000/4000": {"features": "tefm-s", "n_components": 1000, "n_random_features": 4000},
    "tefm-s-2000/8000": {"features": "tefm-s", "n_components": 2000, "n_random_features": 8000},
    "nystroem-lev-1000": {"features": "nystroem", "landmarks": "leverage", "n_components": 1000},
    "nystroem-lev-4000": {"features": "nystroem", "landmarks": "leverage", "n_components": 4000},
}


def svc_reference(X, Xt, y, yt, gamma, rows, seed=0):
    """Exact RBF SVC on at most ``rows`` standardized training rows; C by a 20% holdout."""
    from sklearn.svm import SVC

    X, y = X[:rows], y[:rows]
    cut = int(0.8 * len(y))
    t0 = time.perf_counter()
    scores = {}
    for C in (1.0, 10.0, 100.0):
        scores[C] = np.mean(SVC(C=C, gamma=gamma).fit(X[:cut], y[:cut]).predict(X[cut:]) != y[cut:])
    C = min(scores, key=scores.get)
    pred = SVC(C=C, gamma=gamma).fit(X, y).predict(Xt)
    return 100.0 * float(np.mean(pred != yt)), time.perf_counter() - t0, C, len(y)


def cmd_recipe(args):
    import dask

    from rfstream import io
    from rfstream.preprocess import Standardizer

    out = {"command": "recipe", "alphas": RECIPE_ALPHAS, "rows_cap": args.rows, "svc_rows": args.svc_rows,
           "rows": {}, "load_before": _load()}
    workdir = cache_dir()
    with dask.config.set(scheduler="threads"):
        for name in args.datasets:
            X, Xt, y, yt, attrs = dataset(name, workdir)
            X, y = subset(X, y, args.rows, args.subset)
            row = {"n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]), "methods": {}}
            gamma = None
            for method in args.methods:
                err, sec, model = fit_score(name, X, Xt, y, yt, attrs, alpha=RECIPE_ALPHAS, random_state=0,
                                            checkpoint=None, **METHODS[method])
                fmap = model.named_steps["features"]
                gamma = gamma or float(fmap.gamma_)
                row["methods"][method] = {"error": err, "seconds": round(sec, 2), "gamma": float(fmap.gamma_),
                                          "alpha": float(model.named_steps["solver"].alpha_)}
                print(name, method, round(err, 3), f"{sec:.1f}s", flush=True)
                if args.json:
                    write_json(args.json, {**out, "rows": {**out["rows"], name: row}})
            if args.svc_rows:  # standardized as fit_dataset does: one-hot columns passed through
                scaler = Standardizer(passthrough=io.onehot_columns(attrs) or None).fit(X)
                if gamma is None:  # no method run: gamma="auto" as the fit resolves it (seed 0)
                    from rfstream.features import RandomFourierFeatures

                    auto = RandomFourierFeatures(8, gamma="auto", random_state=0).fit(scaler.transform(X))
                    gamma = float(auto.gamma_)
                Xs, Xts = np.asarray(scaler.transform(X).compute()), np.asarray(scaler.transform(Xt).compute())
                err, sec, C, n = svc_reference(Xs, Xts, np.asarray(y.compute()), np.asarray(yt.compute()), gamma,
                                               args.svc_rows)
                row["svc"] = {"error": err, "seconds": round(sec, 2), "C": C, "rows": n, "gamma": gamma,
                              "seconds_include": "the C holdout's three fits and the refit"}
                print(name, "svc", round(err, 3), f"{sec:.1f}s", f"C={C}", flush=True)
            out["rows"][name] = row
            if args.json:
                write_json(args.json, out)
    out["load_after"] = _load()
    if args.json:
        write_json(args.json, out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("standardize", help="standardize=True against False, and what auto decides")
    p.add_argument("--datasets", nargs="+", default=[*SHARED, "digits"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--rows", type=int, help="at most this many training rows, a random subset (seed 0)")
    p.add_argument("--json")
    p.set_defaults(run=cmd_standardize)
    p = sub.add_parser("recipe", help="maps and sizes against an exact RBF SVC")
    p.add_argument("--datasets", nargs="+", default=["letter", "magic_gamma", "covtype_sample", "adult"])
    p.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--rows", type=int, default=15000, help="most training rows (default 15000)")
    p.add_argument("--subset", choices=("random", "first"), default="random",
                   help="which training rows: a random subset (seed 0) or the first (default random)")
    p.add_argument("--svc-rows", type=int, default=10000, help="most rows of the SVC reference (0: none)")
    p.add_argument("--json")
    p.set_defaults(run=cmd_recipe)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
