"""Benchmark: fused RFF + Gram pass vs the machine's GEMM, and rfstream vs scikit-learn.

Run from the repository root (needs ../shared/datasets, about 10 minutes on 2 cores):

    python benchmarks/bench_fused_pass.py --json docs/bench_kdd99.json

Same as ``rfstream bench``; see rfstream/bench.py for what is measured.
"""
import argparse
import sys

from rfstream.bench import add_arguments, main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    main(parser.parse_args(sys.argv[1:]))
