"""Random binning features (Rahimi & Recht 2007, Section 4): kernel accuracy, hashing, KDD99, memorization.

    python benchmarks/papers/bench_binning.py kernel        # docs/binning/kernel_approximation.json, figure
    python benchmarks/papers/bench_binning.py collisions    # docs/binning/collisions.json
    python benchmarks/papers/bench_binning.py kdd           # docs/binning/kdd99.json
    python benchmarks/papers/bench_binning.py memorization  # docs/binning/memorization_ijcnn1.json, figure
    python benchmarks/papers/bench_binning.py fourier_wide  # docs/binning/memorization_ijcnn1_fourier_wide.json

Datasets come from rfstream.datasets.registry (../shared/datasets or RFSTREAM_DATASETS)
and are converted to Zarr under --workdir once.  Everything runs on the threaded scheduler with
--threads threads; times are wall-clock seconds of ``fit`` on a shared machine.
The out-of-core memory runs use benchmarks/performance/out_of_core.py (see docs/binning.md).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import dask
import numpy as np

OUT = Path("docs/binning")


def _dump(name, result):
    from rfstream.bench.scripts import write_json

    write_json(OUT / name, result, indent=2)
    print(json.dumps(result, indent=2))


def _standardized_sample(workdir, n):
    """n rows of ijcnn1 (LIBSVM, 22 columns), standardized."""
    from rfstream.datasets import prepare
    from rfstream.io import open_dataset
    from rfstream.preprocess import Standardizer

    X, _ = open_dataset(prepare("ijcnn1", workdir, test=False)[0])
    X = X[:n].compute().astype(np.float64)
    return Standardizer().fit_transform(X)


def kernel(args):
    """sklearn-style errors of z(x)'z(y) against laplacian_kernel, vs the number of grids."""
    from sklearn.metrics.pairwise import laplacian_kernel

    from rfstream import RandomBinningFeatures, RandomFourierFeatures
    from rfstream.kernels import auto_gamma

    X = _standardized_sample(args.workdir, 500)
    g0 = auto_gamma(X, "laplacian", random_state=0)
    rows = []
    for mult in (0.5, 1.0, 2.0):
        gamma = g0 * mult
        K = laplacian_kernel(X, gamma=gamma)
        for P in (10, 30, 100, 300, 1000):
            for seed in range(args.seeds):
                for name, m in (
                    ("binning", RandomBinningFeatures(P, n_bins=4096, gamma=gamma, random_state=seed)),
                    ("fourier", RandomFourierFeatures(P, kernel="laplacian", gamma=gamma, random_state=seed)),
                ):
                    Z = m.fit_transform(X)
                    approx = (Z @ Z.T).toarray() if hasattr(Z, "toarray") else Z.astype(np.float64) @ Z.T
                    err = K - approx
                    rows.append({"method": name, "gamma": gamma, "gamma_over_auto": mult, "P_or_D": P,
                                 "seed": seed, "mean_bias": float(err.mean()),
                                 "max_error": float(np.abs(err).max()),
                                 "mean_error": float(np.abs(err).mean()), "mean_kernel": float(K.mean())})
    _dump("kernel_approximation.json", {"data": "ijcnn1 train, first 500 rows, standardized",
                                        "n_bins": 4096, "auto_gamma": g0, "rows": rows})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, key in zip(axes, ("mean_bias", "max_error", "mean_error")):
        for name, style in (("binning", "-o"), ("fourier", "--s")):
            for mult in (0.5, 1.0, 2.0):
                sel = [r for r in rows if r["method"] == name and r["gamma_over_auto"] == mult]
                Ps = sorted({r["P_or_D"] for r in sel})
                vals = [np.mean([abs(r[key]) if key == "mean_bias" else r[key] for r in sel if r["P_or_D"] == P])
                        for P in Ps]
                ax.loglog(Ps, vals, style, label=f"{name}, gamma={mult}x auto", markersize=3)
        ax.set_xlabel("grids P (binning) / features D (Fourier)")
        ax.set_title(key.replace("_", " ") + (" (|.|)" if key == "mean_bias" else ""))
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(OUT / "kernel_approximation.png", dpi=120)


def collisions(args):
    """Hashing: how often distinct bins share a column, and how many bins are occupied."""
    from rfstream import RandomBinningFeatures
    from rfstream.kernels import auto_gamma

    X = _standardized_sample(args.workdir, 4000)
    g0 = auto_gamma(X, "laplacian", random_state=0)
    out = []
    for mult in (1.0, 2.0, 4.0):
        for B in (64, 256, 1024, 4096):
            m = RandomBinningFeatures(20, n_bins=B, gamma=g0 * mult, random_state=0).fit(X)
            keys = m.bin_keys(X)
            cols = keys % np.uint64(B)
            distinct_pairs = shared = 0
            occupied = []
            for p in range(keys.shape[1]):
                uk, counts = np.unique(keys[:, p], return_counts=True)
                occupied.append(uk.size)
                # pairs of rows in different bins that land in the same column
                same_key = float(np.sum(counts.astype(np.float64) ** 2))
                _, ccounts = np.unique(cols[:, p], return_counts=True)
                same_col = float(np.sum(ccounts.astype(np.float64) ** 2))
                n = keys.shape[0]
                distinct_pairs += n * n - same_key
                shared += same_col - same_key
            out.append({"gamma_over_auto": mult, "n_bins": B,
                        "occupied_bins_per_grid": float(np.mean(occupied)),
                        "collision_rate": shared / distinct_pairs, "expected_1_over_n_bins": 1.0 / B})
    _dump("collisions.json", {"data": "ijcnn1 train, first 4000 rows, standardized", "grids": 20,
                              "auto_gamma": g0, "rows": out})


def kdd(args):
    """KDD99: train on the 10% file, test on "corrected" (normal vs attack)."""
    from rfstream.datasets import prepare
    from rfstream.pipeline import evaluate_dataset, fit_dataset

    tr, te = prepare("kddcup99", args.workdir)
    runs = [("binning", {"n_grids": 10, "n_bins": 64}), ("binning", {"n_grids": 30, "n_bins": 64}),
            ("rff", {"n_components": 500})]
    rows = []
    for features, params in runs:
        model, meta = fit_dataset(tr, features=features, alpha=1.0, random_state=0, **params)
        res = evaluate_dataset(model, meta, te)
        solver = model.named_steps["solver"]
        rows.append({"features": features, **params, "gamma": float(model.named_steps["features"].gamma_),
                     "solver": "cg" if solver.n_iter_ > 1 else "gram", "data_passes": solver.n_iter_,
                     "fit_seconds": meta["fit_seconds"], "test_error": res["value"]})
        print(rows[-1], file=sys.stderr)
    _dump("kdd99.json", {"train": "kddcup.data_10_percent (494,021 rows)", "test": "corrected (311,029 rows)",
                         "task": "normal vs attack", "alpha": 1.0, "gamma": "auto", "threads": args.threads,
                         "rows": rows})


def _ijcnn1(args):
    from rfstream.datasets import train_test
    from rfstream.kernels import auto_gamma
    from rfstream.preprocess import Standardizer

    Xa, Xb, ya, yb = train_test("ijcnn1", args.workdir)
    Xa, ya, Xb, yb = (a.compute() for a in (Xa, ya, Xb, yb))
    st = Standardizer().fit(Xa)
    Xa, Xb = st.transform(Xa), st.transform(Xb)
    g0 = {k: auto_gamma(Xa, k, random_state=0) for k in ("laplacian", "gaussian")}
    return Xa, ya, Xb, yb, g0


def _fit_and_score(configs, Xa, ya, Xb, yb):
    from rfstream import StreamingRidgeClassifier

    rows = []
    for name, size, mult, make in configs:
        t0 = time.perf_counter()
        feats = make().fit(Xa)
        solver = StreamingRidgeClassifier(alpha=1.0).fit(feats.transform(Xa), ya)
        fit_s = time.perf_counter() - t0
        err = float(np.mean(solver.predict(feats.transform(Xb)) != yb))
        rows.append({"method": name, "P_or_D": size, "gamma_over_auto": mult, "fit_seconds": round(fit_s, 2),
                     "test_error": err, "data_passes": solver.n_iter_})
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def _fourier(kern, D, mult, g0):
    from rfstream.features import RandomFourierFeatures

    return (f"fourier-{kern}", D, mult,
            lambda: RandomFourierFeatures(D, kernel=kern, gamma=g0[kern] * mult, random_state=0))


def fourier_wide(args):
    """ijcnn1: wider Fourier features (D = 5000), to reach the binning fit times."""
    Xa, ya, Xb, yb, g0 = _ijcnn1(args)
    rows = _fit_and_score([_fourier("laplacian", 5000, mult, g0) for mult in (1.0, 2.0)], Xa, ya, Xb, yb)
    _dump("memorization_ijcnn1_fourier_wide.json", {"train": "ijcnn1.trn", "test": "ijcnn1.tst", "alpha": 1.0,
                                                     "auto_gamma": g0, "threads": args.threads, "rows": rows})


def memorization(args):
    """ijcnn1: test error against fit time for binning (CG) and Fourier features (Gram)."""
    from rfstream.features import RandomBinningFeatures

    Xa, ya, Xb, yb, g0 = _ijcnn1(args)
    configs = []
    for mult in (1.0, 2.0):
        for P in (25, 50, 100, 200):
            configs.append(("binning", P, mult, lambda P=P, mult=mult: RandomBinningFeatures(
                P, n_bins=4096, gamma=g0["laplacian"] * mult, random_state=0)))
        for kern in ("laplacian", "gaussian"):
            configs.extend(_fourier(kern, D, mult, g0) for D in (500, 1000, 2000, 3000))
    rows = _fit_and_score(configs, Xa, ya, Xb, yb)
    _dump("memorization_ijcnn1.json", {"train": "ijcnn1.trn (49,990 rows, 22 columns)",
                                       "test": "ijcnn1.tst (91,701 rows)", "alpha": 1.0,
                                       "n_bins": 4096, "auto_gamma": g0, "threads": args.threads,
                                       "rows": rows})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, marker in (("binning", "o"), ("fourier-laplacian", "s"), ("fourier-gaussian", "^")):
        for mult, ls in ((1.0, "-"), (2.0, "--")):
            sel = sorted((r for r in rows if r["method"] == name and r["gamma_over_auto"] == mult),
                         key=lambda r: r["P_or_D"])
            ax.plot([r["fit_seconds"] for r in sel], [100 * r["test_error"] for r in sel], ls + marker,
                    label=f"{name}, gamma {mult:g}x auto")
    ax.set_xlabel("fit seconds (features + ridge)")
    ax.set_ylabel("test error (%)")
    ax.set_title("ijcnn1: binning (P = 25..200) vs Fourier (D = 500..3000)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "memorization_ijcnn1.png", dpi=120)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["kernel", "collisions", "kdd", "memorization", "fourier_wide"])
    p.add_argument("--workdir", default="runs/binning")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args(argv)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    with dask.config.set(scheduler="threads", num_workers=args.threads):
        globals()[args.what](args)


if __name__ == "__main__":
    main()
