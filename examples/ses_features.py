"""SES (Chang et al. 2017): shrinkage weights on random Fourier features vs MC, QMC and BQ.

    python examples/ses_features.py --datasets ../shared/datasets

Fits each map on the MAGIC training split (a Zarr dataset read lazily; SES
gathers only the sampled rows), prints the kernel approximation error
||K - K~||_F / ||K||_F on 1000 held-out rows for M = 16 .. 128 frequencies, and
the weights SES learned.  Runs in well under a minute.
"""
import argparse

import dask
import numpy as np

from rfstream import SESFeatures, Standardizer
from rfstream.datasets import train_test
from rfstream.kernels import auto_gamma
from rfstream.metrics import kernel_approximation_error
from rfstream.random import sample_rows

METHODS = {
    "MC": {"weights": "uniform"},
    "QMC": {"weights": "uniform", "sampler": "qmc"},
    "BQ": {"weights": "bq", "sampler": "qmc"},
    "SES": {"weights": "ses"},
    "SES-QMC": {"weights": "ses", "sampler": "qmc"},
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=None, help="real datasets folder (default: $RFSTREAM_DATASETS, "
                   "else ../shared/datasets beside the repository)")
    p.add_argument("--workdir", default="runs/ses")
    args = p.parse_args()
    dask.config.set(scheduler="threads")
    Xtr, Xte, _, _ = train_test("magic_gamma", args.workdir, args.datasets, test_size=0.2)
    std = Standardizer().fit(Xtr)
    Xtr, Xte = std.transform(Xtr), std.transform(Xte)
    gamma = auto_gamma(Xtr, "gaussian", random_state=0)
    test = sample_rows(Xte, 1000, 0)
    ms = (16, 32, 64, 128)
    print(f"gamma = {gamma:.4f}; held-out kernel error, mean of 2 seeds")
    print("method    " + " ".join(f"M={m:<6d}" for m in ms))
    for name, kw in METHODS.items():
        errs = [np.mean([kernel_approximation_error(
            test, SESFeatures(m, gamma=gamma, random_state=s, **kw).fit(Xtr), n_samples=1000)
            for s in range(2)]) for m in ms]
        print(f"{name:9s} " + " ".join(f"{e:8.4f}" for e in errs))
    ses = SESFeatures(32, gamma=gamma, random_state=0).fit(Xtr)
    print(f"\nSES, M=32: lambda_beta={ses.reg_}, sum of weights={ses.weights_.sum():.3f}, "
          f"{ses.n_negative_} negative weights before the beta >= 0 constraint")
    print("M * weights:", np.round(32 * np.sort(ses.weights_), 2))


if __name__ == "__main__":
    main()
