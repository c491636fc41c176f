"""Benchmark: fused RFF + Gram pass vs the machine's GEMM, rfstream vs scikit-learn / dask-ml, scaling.

Run from the repository root (needs ../shared/datasets; about an hour on a loaded 2-core machine):

    python benchmarks/performance/bench_fused_pass.py --datasets ../shared/datasets --out docs/benchmarks

Same as ``rfstream bench``; see rfstream/bench.py for what is measured and
docs/BENCHMARKS.md for the results.  ``--parts fused|e2e|scaling`` measures
only some parts and keeps the others from the existing bench.json.
"""
import argparse
import sys

from rfstream.bench import add_arguments, main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    main(parser.parse_args(sys.argv[1:]))
