"""KernelPCA over random features against scikit-learn's exact kernel PCA.

Run from the repository root (needs ../shared/datasets):

    python benchmarks/solvers/bench_kpca.py --datasets magic_gamma letter --out docs/kpca/bench_kpca.json

Per dataset, on its training split (the registry's test file, or its held-out rows),
standardized by :class:`rfstream.Standardizer` fitted on those rows: gamma =
``rfstream.kernels.auto_gamma`` of the standardized rows; a subsample of ``--rows``
(3000) rows drawn with seed 0; ``sklearn.decomposition.KernelPCA(kernel="rbf", gamma)``
fitted on it (the exact m x m centred kernel matrix).  rfstream's
``KernelPCA(10, features=RandomFourierFeatures(D=4000, gamma))`` is fitted three ways
under dask's threads: the Gram method on the same subsample (only the random-feature
error separates it from sklearn), then the Gram and the randomized method on every
training row (the random-feature and the sampling error).  Reported per fit: the
canonical correlations between the two top-10 score subspaces on the subsample rows
(cosines of the principal angles, QR of the centred scores then the singular values
of Q1'Q2, largest first), each component's |correlation| with sklearn's component of the same rank,
the ratios of the leading eigenvalues to sklearn's ``eigenvalues_ / m`` (sklearn's are
of the m x m centred kernel matrix; divided by m they estimate the covariance's),
the passes and the seconds (fit only; sklearn's fit beside them).  sklearn's 11th
eigenvalue is recorded too: the gap after the 10th decides how stable the last
direction of the top-10 subspace is.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from rfstream.bench.scripts import cache_dir, write_json


def canonical_correlations(A, B):
    """Cosines of the principal angles between the column spaces of the centred A and B."""
    qa, _ = np.linalg.qr(A - A.mean(axis=0))
    qb, _ = np.linalg.qr(B - B.mean(axis=0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def matched_correlations(A, B):
    """|corr| of each column of A with the column of B of the same rank."""
    return np.array([abs(np.corrcoef(a, b)[0, 1]) for a, b in zip(A.T, B.T)])


def timed_fit(model, X):
    from rfstream.cluster import run_context

    with run_context(progress="never") as run:
        t0 = time.perf_counter()
        model.fit(X)
        return time.perf_counter() - t0, run.passes


def run(name, workdir, n_components, D, rows):
    import dask
    import dask.array as da
    from sklearn.decomposition import KernelPCA as ExactKernelPCA

    from rfstream import KernelPCA, RandomFourierFeatures, Standardizer
    from rfstream.cluster import compute
    from rfstream.datasets import registry
    from rfstream.kernels import auto_gamma

    X = registry.train_test(name, workdir)[0]
    with dask.config.set(scheduler="threads"):
        X = Standardizer().fit(X).transform(X)
        gamma = auto_gamma(X, "gaussian", random_state=0)
        pick = np.sort(np.random.default_rng(0).choice(X.shape[0], size=min(rows, X.shape[0]), replace=False))
        sample = np.asarray(compute(X[pick]))
        m = sample.shape[0]
        t0 = time.perf_counter()
        exact = ExactKernelPCA(n_components + 1, kernel="rbf", gamma=gamma, eigen_solver="dense")
        reference = exact.fit_transform(sample)[:, :n_components]
        exact_seconds = time.perf_counter() - t0
        reference_values = exact.eigenvalues_[:n_components] / m
        out = {"dataset": name, "rows": int(X.shape[0]), "subsample": m, "D": D, "gamma": gamma,
               "sklearn_seconds": round(exact_seconds, 2),
               "sklearn_eigenvalues_over_m": (exact.eigenvalues_ / m).tolist(),  # one more: the gap after the last
               "fits": []}
        subsample = da.from_array(sample, chunks=1000)  # a dask array: its passes are counted
        for label, data, method in (("gram, subsample", subsample, "gram"), ("gram, all rows", X, "gram"),
                                    ("randomized, all rows", X, "randomized")):
            features = RandomFourierFeatures(D, gamma=gamma, random_state=0, dtype="float64")
            model = KernelPCA(n_components, features=features, method=method)
            seconds, passes = timed_fit(model, data)
            scores = model.transform(sample)
            cc = canonical_correlations(scores, reference)
            out["fits"].append({
                "fit": label, "method": model.method_, "passes": passes, "seconds": round(seconds, 2),
                "canonical_correlations": np.round(cc, 4).tolist(),
                "matched_abs_correlations": np.round(matched_correlations(scores, reference), 4).tolist(),
                "eigenvalue_ratios": np.round(model.explained_variance_ / reference_values, 4).tolist(),
                "explained_variance_ratio_top10": round(float(model.explained_variance_ratio_.sum()), 4),
            })
            print(json.dumps({"dataset": name, **out["fits"][-1]}), flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["magic_gamma", "letter"])
    parser.add_argument("--n-components", type=int, default=10)
    parser.add_argument("--D", type=int, default=4000)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--workdir", type=Path, default=cache_dir())
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    results = [run(name, args.workdir, args.n_components, args.D, args.rows) for name in args.datasets]
    if args.out is not None:
        write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
