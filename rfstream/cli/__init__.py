"""The ``rfstream`` command line: convert | split | fit | predict | transform | evaluate | info | demo | bench.

Argument parsing only: ``fit``'s estimator options are built from :mod:`rfstream.options`
(:mod:`rfstream.cli.options`), every other argument is a row of :mod:`rfstream.cli.arguments`,
and each subcommand is a thin function of :mod:`rfstream.cli.commands`, imported when it runs,
so that ``--help`` imports no estimator.  User errors print one line,
``rfstream: error: ...``, exit code 2 (``RFSTREAM_DEBUG=1``: the traceback); a closed stdout
ends quietly with code 1.  Narrative: docs/design-notes.md.
"""
from __future__ import annotations

import argparse
import difflib
import functools
import os
import sys

from .._version import __version__
from ..bench import add_arguments as add_bench_arguments
from . import arguments as a
from .options import UserError, add_fit_options, cli_message, flag_error, printable
from .resume import Stopped, install_signal_handlers, kept, lost_cluster, restore_signal_handlers

__all__ = ["UserError", "build_parser", "main"]

EXIT_USER_ERROR = 2
EXIT_LOST_CLUSTER = 1
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, FileExistsError, NotADirectoryError,
               IsADirectoryError, PermissionError)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2) instead of the usage block."""

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # argparse's own check, with the flags of the subcommand given for the hints
            chosen = getattr(self, "subcommands", {}).get(getattr(parsed, "command", None))
            (chosen or self).fail(unrecognized(extras, _flags(self) + (_flags(chosen) if chosen else [])))
        return parsed

    def error(self, message):
        if message.startswith("unrecognized arguments:"):
            message = unrecognized(message.split(":", 1)[1].split())
        self.fail(message)

    def fail(self, message):
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


def unrecognized(words, known=()):
    """argparse's "unrecognized arguments" without echoing the words (a value may be a
    secret): how many, the flags among them (not a ``--name=value``), and the flag of
    ``known`` nearest each unknown ``--name``."""
    flags = [w for w in words if w.startswith("--") and "=" not in w]
    hints = dict.fromkeys(filter(None, (nearest_flag(w.split("=", 1)[0], known) for w in words
                                        if w.startswith("--"))))
    return (f"unrecognized arguments: {len(words)} word(s)" + (f", among them {' '.join(flags)}" if flags else "")
            + (f"; did you mean {' and '.join(hints)}?" if hints else ""))


def nearest_flag(flag, known):
    """The flag of ``known`` that ``flag`` was probably meant to be (``_`` for ``-``, a
    typo), or None."""
    dashed = flag.replace("_", "-")
    if dashed in known:
        return dashed
    close = difflib.get_close_matches(dashed, known, n=1, cutoff=0.7)
    return close[0] if close else None


def _flags(parser):
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]


class _Later:
    """``commands.cmd_fit`` and the like: functions that import :mod:`rfstream.cli.commands`
    (and with it the library) when they run, not when the parser is built."""

    def __getattr__(self, name):
        return functools.partial(_run_command, name)


def _run_command(name, args):
    """Run ``commands.<name>``: its warnings printed one line each when it succeeds, and
    none when it fails (its refusal is its one line: an overflow seen on the way is no news)."""
    from . import commands

    with commands._warnings_as_lines(every=False):
        return getattr(commands, name)(args)


def build_parser():
    parser = _Parser(prog="rfstream", description="Kernel machines with random features on Dask.")
    parser.add_argument("--version", action="version", version=f"rfstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parser.subcommands = {}
    commands = _Later()  # each cmd_* imported when it runs

    def command(name, text, func, *tables):
        p = parser.subcommands[name] = sub.add_parser(name, help=text, description=text)
        for rows in tables:
            if callable(rows):  # a function adding its own arguments
                rows(p)
            else:
                a.add_arguments(p, rows)
        p.set_defaults(func=func)
        return p

    command("convert", "CSV / LIBSVM / Parquet / npy / npz -> Zarr dataset", commands.cmd_convert, a.CONVERT)
    command("split", "split a Zarr dataset into a training and a test dataset, row by row from (seed, row)",
            commands.cmd_split, a.SPLIT)
    command("fit", "fit a model on a Zarr dataset", commands.cmd_fit, a.FIT_HEAD, add_fit_options, a.FIT_TAIL)
    command("predict", "predict a Zarr dataset, write a Zarr of predictions (and scores)",
            commands.cmd_predict, a.PREDICT)
    command("transform", "write a transformer's output (a model fitted with --solver none) as a Zarr "
            "dataset", commands.cmd_transform, a.TRANSFORM)
    command("evaluate", "metrics of a model on a labelled dataset: error rate, balanced error, AUC, "
            "log-loss, confusion matrix; or RMSE, relative RMSE, MAE, R^2", commands.cmd_evaluate, a.EVALUATE)
    command("info", "describe a dataset, a model or a predictions group", commands.cmd_info, a.INFO)
    command("demo", "convert, fit and evaluate on the shipped MAGIC dataset", commands.cmd_demo, a.DEMO)
    p = command("bench", "throughput of the fused feature + Gram pass, and vs scikit-learn",
                commands.cmd_bench, add_bench_arguments, a.COMPUTE)
    a.document_defaults(p)
    return parser


def _stdout_closed():
    """Point stdout at /dev/null: the reader went away (``| head``), and the interpreter's
    final flush would fail again (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    from ..cluster import run_context, set_progress

    mode = "never" if args.quiet else getattr(args, "progress", "auto")
    set_progress(mode)
    previous = install_signal_handlers()
    run = None
    try:
        with run_context(mode) as run:  # this command's pass count and checkpoint
            args.func(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, rather than at exit
    except Stopped as stop:
        print(f"rfstream: stopped by {stop}; {kept(run)}", file=sys.stderr, flush=True)
        return stop.exit_code
    except BrokenPipeError:
        _stdout_closed()
        return 1
    except Exception as exc:
        from ..io.location import StorageError, as_storage_error

        catalog = sys.modules.get("rfstream.catalog")  # a NotApplicable was raised by it, once imported

        lost = lost_cluster(exc)
        if lost is not None and not os.environ.get("RFSTREAM_DEBUG"):
            print(f"rfstream: error: {lost}; {kept(run)}", file=sys.stderr)
            return EXIT_LOST_CLUSTER
        if not isinstance(exc, USER_ERRORS):  # a store's failure deep in a task or a library
            exc = as_storage_error(exc, "storage", "failed")
        if exc is None or os.environ.get("RFSTREAM_DEBUG"):
            raise
        if catalog is not None and isinstance(exc, catalog.NotApplicable):
            exc = flag_error(exc)
        message = cli_message(exc) if str(exc) else type(exc).__name__
        # a store's failure may pass and keeps the completed passes (a refused checkpoint says its own fix)
        left = kept(run) if isinstance(exc, (OSError, StorageError)) else "nothing"
        print(f"rfstream: error: {message}" + ("" if left.startswith("nothing") else f"; {left}"), file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:  # a SIGINT before the handlers were installed
        print("rfstream: interrupted", file=sys.stderr)
        return 130
    finally:
        restore_signal_handlers(previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
