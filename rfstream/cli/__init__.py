"""The ``rfstream`` command line: convert | fit | predict | evaluate | info | demo | bench.

Argument parsing only: the options of ``fit`` come from one table
(:mod:`rfstream.cli.options`), each subcommand is a thin function in
:mod:`rfstream.cli.commands` over :mod:`rfstream.pipeline`.  Every subcommand
that computes takes ``--scheduler`` (an address, ``threads``, or nothing for an
embedded LocalCluster; also ``$RFSTREAM_SCHEDULER``) and ``--quiet``.  User
errors print one line, ``rfstream: error: ...``, and exit with code 2; set
``RFSTREAM_DEBUG=1`` to see the traceback instead.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..bench import add_arguments as add_bench_arguments
from ..cluster import connect, set_progress
from ..io.location import as_storage_error
from ..pipeline import FEATURES, SOLVERS, TASKS
from . import commands
from .options import UserError, add_fit_options

__all__ = ["UserError", "build_parser", "main"]

EXIT_USER_ERROR = 2
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, FileExistsError, NotADirectoryError,
               IsADirectoryError, PermissionError)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2) instead of the usage block."""

    def error(self, message):
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _label_column(text):
    if text in ("first", "last", "none"):
        return None if text == "none" else text
    try:
        return int(text)
    except ValueError:
        return text


def _storage_options(text):
    try:
        options = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--storage-options must be a JSON object; {exc}") from None
    if not isinstance(options, dict):
        raise argparse.ArgumentTypeError(f"--storage-options must be a JSON object; got {text!r}")
    return options


LOCATION_HELP = "a local path or a URL (s3://, gs://, abfs://, memory://, file://"


def _data_options(p, labels=True):
    """Where the data are: the filesystem's options and the arrays' names."""
    p.add_argument("--storage-options", type=_storage_options, default=None, metavar="JSON",
                   help='options of every URL\'s filesystem, e.g. \'{"endpoint_url": '
                        '"http://127.0.0.1:9000"}\' (default: the filesystem\'s environment, '
                        "e.g. AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
    p.add_argument("--x-array", default="X", help="name of the features array in the Zarr group (default: X)")
    if labels:
        p.add_argument("--y-array", default="y", help="name of the labels array (default: y)")


def _common(p, compute=True):
    p.add_argument("--quiet", action="store_true", help="no progress bars or summaries")
    if compute:
        p.add_argument("--scheduler", default=None,
                       help="scheduler address (tcp://host:8786), 'threads', or leave out for an "
                            "embedded local cluster (also $RFSTREAM_SCHEDULER)")


def _model_and_data(p, data_help):
    p.add_argument("model", help=f"model directory (rfstream fit --out): {LOCATION_HELP}, https://)")
    p.add_argument("data", help=data_help)


def build_parser():
    parser = _Parser(prog="rfstream", description="Kernel machines with random features on Dask.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("convert", help="CSV / LIBSVM / Parquet / npy / npz -> Zarr dataset")
    p.add_argument("src", help="source: a CSV (plain or compressed), LIBSVM, Parquet, .npy or .npz file, "
                               "or a directory or glob of CSV/LIBSVM/Parquet files (converted by Dask "
                               "tasks, one per file or row group; one gzip file is one stream, one task); "
                               f"{LOCATION_HELP}, https://)")
    p.add_argument("dst", help=f"Zarr dataset to write: {LOCATION_HELP})")
    p.add_argument("--label-column", type=_label_column, default="last",
                   help="'last' (default), 'first', a 0-based index, a header name, or 'none'")
    p.add_argument("--positive", default=None, help="binary task: this label vs the rest")
    p.add_argument("--rows-per-chunk", type=int, default=65536, help="rows per Zarr chunk (default: 65536)")
    p.add_argument("--header", choices=["auto", "yes", "no"], default="auto", help="(default: auto)")
    p.add_argument("--task", choices=["auto", "classification", "regression"], default="auto",
                   help="(default: auto)")
    p.add_argument("--like", default=None, help="encode with the schema of this training dataset")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--storage-options", type=_storage_options, default=None, metavar="JSON",
                   help="options of every URL's filesystem (see rfstream fit --help)")
    _common(p)
    p.set_defaults(func=commands.cmd_convert, uses_cluster=False)  # a cluster only for many files

    p = sub.add_parser("fit", help="fit a model on a Zarr dataset")
    p.add_argument("data", help=f"Zarr dataset with labels (rfstream convert, or any Zarr v2/v3 group): "
                                f"{LOCATION_HELP}, https://)")
    p.add_argument("--out", required=True, help=f"model directory to write: {LOCATION_HELP})")
    p.add_argument("--features", choices=sorted(FEATURES), default="rff", help="feature map (default: rff)")
    p.add_argument("--solver", choices=sorted(SOLVERS), default="ridge", help="solver (default: ridge)")
    add_fit_options(p)
    p.add_argument("--no-standardize", action="store_true", help="do not standardize the columns first")
    p.add_argument("--task", choices=list(TASKS), default=None,
                   help="override the dataset's task (default: its attributes, else y's dtype: "
                        "integers are classes, floats regression)")
    p.add_argument("--overwrite", action="store_true")
    _data_options(p)
    _common(p)
    p.set_defaults(func=commands.cmd_fit, uses_cluster=True)

    p = sub.add_parser("predict", help="predict a Zarr dataset, write a Zarr of predictions")
    _model_and_data(p, "Zarr dataset with the training data's columns")
    p.add_argument("--out", required=True, help=f"Zarr group to write, array y_pred: {LOCATION_HELP})")
    p.add_argument("--overwrite", action="store_true")
    _data_options(p, labels=False)
    _common(p)
    p.set_defaults(func=commands.cmd_predict, uses_cluster=True)

    p = sub.add_parser("evaluate", help="error rate or relative RMSE of a model on a dataset")
    _model_and_data(p, "Zarr dataset with labels")
    p.add_argument("--out", default=None,
                   help="JSON file for the metrics (default: MODEL/metrics-<DATA name>.json)")
    _data_options(p)
    _common(p)
    p.set_defaults(func=commands.cmd_evaluate, uses_cluster=True)

    p = sub.add_parser("info", help="describe a dataset or a model")
    p.add_argument("path", help=f"a Zarr dataset, a model directory or a predictions group: {LOCATION_HELP}, https://)")
    _data_options(p)
    _common(p, compute=False)
    p.set_defaults(func=commands.cmd_info, uses_cluster=False)

    p = sub.add_parser("demo", help="convert, fit and evaluate on the shipped MAGIC dataset")
    p.add_argument("--n-components", type=int, default=500, help="(default: 500)")
    p.add_argument("--random-state", type=int, default=0, help="(default: 0)")
    p.add_argument("--workdir", default=None, help="keep the dataset and model here")
    _common(p)
    p.set_defaults(func=commands.cmd_demo, uses_cluster=True)

    p = sub.add_parser("bench", help="throughput of the fused feature + Gram pass, and vs scikit-learn")
    add_bench_arguments(p)
    _common(p)
    p.set_defaults(func=commands.cmd_bench, uses_cluster=False)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    set_progress(not args.quiet)
    try:
        if args.uses_cluster:
            with connect(args.scheduler):
                args.func(args)
        else:
            args.func(args)
    except Exception as exc:
        if not isinstance(exc, USER_ERRORS):  # a store's failure deep in a task or a library
            exc = as_storage_error(exc, "storage", "failed")
        if exc is None or os.environ.get("RFSTREAM_DEBUG"):
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"rfstream: error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("rfstream: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
