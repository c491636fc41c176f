"""Peak memory of one task of the PCG statistics pass (rfstream.solvers.ridge.cg.stats_chunk) and
of the float64 phase of its product pass (rfstream.solvers.ridge.cg.product_chunk with a float64
V) on one sub-block of float32 features, summed in float64 by column slices (now) against
one float64 copy of the whole sub-block (before; STATS_COLUMNS = D reproduces it).

    python benchmarks/solvers/bench_stats_memory.py --rows 4096 --features 8192 50000

Peak = the largest traced allocation above the input block (tracemalloc sees numpy's
buffers), in MiB, the thread's reused float64 work memory included (released before each
call); the input block itself is listed apart.
"""
import argparse
import json
import tracemalloc

import numpy as np

from rfstream.reductions import Layout
from rfstream.solvers import cg, cg_stats
from rfstream.solvers.passes import RowSpec


def peak_above_input(z, y, columns, chunk="stats"):
    """MiB allocated at the peak of one ``chunk`` call ("stats", or "products" with a float64
    V of one column) with ``columns`` per slice."""
    D = z.shape[1]
    if chunk == "stats":
        layout = cg_stats.stats_layout(D, 1)
        spec = RowSpec(layout=layout, targets=lambda v: v[:, None]).for_rows(y=y)
        fn = cg_stats.stats_chunk
    else:
        layout = Layout(p=(D,))
        spec = cg.ProductSpec(layout=layout, V=np.ones((D, 1))).for_rows(y=y)
        fn = cg.product_chunk
    out = np.zeros(layout.size)
    saved, cg_stats.STATS_COLUMNS = cg_stats.STATS_COLUMNS, columns
    cg_stats.release_work_arrays()
    try:
        tracemalloc.start()
        tracemalloc.reset_peak()
        fn(z, y, offset=0, spec=spec, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        cg_stats.STATS_COLUMNS = saved
    return peak / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096, help="rows of the sub-block (the passes' 4096)")
    parser.add_argument("--features", type=int, nargs="+", default=[8192, 50000], help="D values")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for D in args.features:
        z = rng.standard_normal((args.rows, D), dtype=np.float32)
        y = rng.standard_normal(args.rows)
        rows.append({"D": D, "input_MiB": round(z.nbytes / 2**20, 1),
                     "slices_MiB": round(peak_above_input(z, y, cg_stats.STATS_COLUMNS), 1),
                     "whole_block_MiB": round(peak_above_input(z, y, D), 1),
                     "products_slices_MiB": round(peak_above_input(z, y, cg_stats.STATS_COLUMNS, "products"), 1),
                     "products_whole_block_MiB": round(peak_above_input(z, y, D, "products"), 1)})
        print(json.dumps(rows[-1]), flush=True)
        del z


if __name__ == "__main__":
    main()
