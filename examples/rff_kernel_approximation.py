"""Random Fourier features (Rahimi & Recht 2007): kernel approximation error against D.

    python examples/rff_kernel_approximation.py --datasets ../shared/datasets

For each kernel and sampler, ||K - Z Z'||_F / ||K||_F on 1000 sampled rows of
standardized MAGIC data, D from 64 to 4096.
"""
import argparse

import dask

from rfstream import RandomFourierFeatures, Standardizer, io
from rfstream.datasets import prepare
from rfstream.metrics import kernel_approximation_error


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=None, help="real datasets folder (default: $RFSTREAM_DATASETS, "
                   "else ../shared/datasets beside the repository)")
    p.add_argument("--workdir", default="runs/rff_approx")
    args = p.parse_args()
    X, _ = io.open_dataset(prepare("magic_gamma", args.workdir, args.datasets)[0])
    dask.config.set(scheduler="threads")
    Xs = Standardizer().fit(X).transform(X)
    print("kernel     sampler     " + " ".join(f"D={D:<6d}" for D in (64, 256, 1024, 4096)))
    for kernel in ("gaussian", "laplacian", "cauchy"):
        for sampler in ("mc", "qmc") + (("orthogonal",) if kernel == "gaussian" else ()):
            errs = []
            for D in (64, 256, 1024, 4096):
                rff = RandomFourierFeatures(D, kernel=kernel, gamma="auto", sampler=sampler, random_state=0).fit(Xs)
                errs.append(kernel_approximation_error(Xs, rff, n_samples=1000))
            print(f"{kernel:10s} {sampler:11s} " + " ".join(f"{e:8.4f}" for e in errs))


if __name__ == "__main__":
    main()
