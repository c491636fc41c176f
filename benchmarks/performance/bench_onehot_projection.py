"""The RFF projection of one block of KDD-shaped rows on one thread: dense GEMM vs one-hot split.

    python benchmarks/performance/bench_onehot_projection.py --data /tmp/onehot_x1.zarr

The first ``--rows`` rows of a Zarr dataset made by ``rfstream convert`` (KDD99: 118 columns, 80
of them one-hot), standardized with the one-hot columns passed through as the fit does, then
projected ``--sub-block`` rows at a time, as a fused pass makes them, by
:func:`rfstream.features.fourier.project_with_offset` (``[x, 1] @ [W; b]``, one GEMM) and by
:func:`rfstream.features.onehot.project_split` (the one-hot columns as sums of rows of ``W``),
alternated ``--repeats`` times; CPU seconds of each (the median), and of the cosines after them.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--rows", type=int, default=65536)
    p.add_argument("--n-components", type=int, default=2000)
    p.add_argument("--sub-block", type=int, nargs="+", default=[4096, 525],
                   help="rows per call (4096: the Gram pass's; 525: a CV scoring pass's at D=2000)")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from rfstream import io
    from rfstream.features import RandomFourierFeatures
    from rfstream.features.fourier import kept_weights, project_with_offset, stacked_weights
    from rfstream.features.onehot import project_split, split_weights
    from rfstream.preprocess import Standardizer

    X, _ = io.open_dataset(args.data)
    onehot = io.onehot_columns(args.data)
    X = X[: args.rows]
    Xs = Standardizer(passthrough=onehot or None).fit(X).transform(X)
    rff = RandomFourierFeatures(args.n_components, gamma="auto", random_state=0).fit(Xs)
    x = np.ascontiguousarray(Xs.compute(), dtype=np.float32)
    W, b = rff.random_weights_, rff.random_offset_
    columns = rff._binary_columns_
    print(f"{x.shape[0]} rows x {x.shape[1]} columns, {len(columns)} of them 0/1 one-hot; D={W.shape[1]}")

    def dense(xs, out):
        return project_with_offset(xs, W, b, out=out, Wb=stacked_weights(W, b))

    def split(xs, out):
        return project_split(xs, W, b, columns, out=out, split=kept_weights(split_weights, W, b, columns))

    for rows in args.sub_block:
        out = np.empty((rows, W.shape[1]), dtype=W.dtype)
        bounds = [(s, min(s + rows, x.shape[0])) for s in range(0, x.shape[0], rows)]
        seconds = {"dense": [], "one-hot split": [], "cosines": []}
        with threadpool_limits(1):
            for _ in range(args.repeats):
                for name, fn in (("dense", dense), ("one-hot split", split)):
                    t0 = time.process_time()
                    for s, e in bounds:
                        fn(x[s:e], out[: e - s])
                    seconds[name].append(time.process_time() - t0)
                t0 = time.process_time()
                for s, e in bounds:
                    np.cos(out[: e - s], out=out[: e - s])
                seconds["cosines"].append(time.process_time() - t0)
        med = {k: float(np.median(v)) for k, v in seconds.items()}
        d, o, c = med["dense"], med["one-hot split"], med["cosines"]
        gap = np.abs(split(x[:rows], None) - dense(x[:rows], None)).max()
        print(f"sub-blocks of {rows} rows: projection dense {d:.3f} s, one-hot split {o:.3f} s "
              f"({d / o:.2f}x); cosines {c:.3f} s; features {d + c:.3f} s -> {o + c:.3f} s "
              f"({(d + c) / (o + c):.2f}x); largest |difference| of the projections {gap:.1e}")


if __name__ == "__main__":
    main()
