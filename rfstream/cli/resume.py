"""What makes ``rfstream fit`` resumable: its checkpoint, its fingerprint, and its signals.

A fit stores every completed pass in a checkpoint (:mod:`rfstream.io.checkpoints`) tied to
the job by :meth:`rfstream.jobs.FitJob.fingerprint`.  SIGTERM and SIGINT raise
:class:`Stopped` in the main thread, and the CLI exits with 128 + the signal's number after
saying how many passes the checkpoint keeps, their bytes and where (:func:`kept`); a scheduler lost during a pass exits with 1
(:func:`lost_cluster`).  Narrative: docs/design-notes.md.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys


CHECKPOINT_SUFFIX = ".checkpoint"


class Stopped(BaseException):
    """The command was asked to stop by a signal (a BaseException, as KeyboardInterrupt:
    no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self):
        return 128 + self.signum


def _raise_stopped(signum, frame):
    raise Stopped(signum)


def install_signal_handlers():
    """SIGTERM and SIGINT raise :class:`Stopped` (only from the main thread, where Python
    runs handlers); returns the previous handlers for :func:`restore_signal_handlers`."""
    return {s: signal.signal(s, _raise_stopped) for s in (signal.SIGTERM, signal.SIGINT)}


def restore_signal_handlers(previous):
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def checkpoint_location(args):
    """``--checkpoint``, else ``OUT.checkpoint`` beside the model; None with ``--no-checkpoint``."""
    if args.no_checkpoint:
        return None
    return args.checkpoint or str(args.out).rstrip("/") + CHECKPOINT_SUFFIX


def kept(run):
    """What a command that ends early leaves: the passes its checkpoint keeps, their bytes
    and where, and how to resume or start over; "nothing was written." when none is kept."""
    checkpoint = None if run is None else run.last_store
    steps = getattr(checkpoint, "steps", None)
    if not steps or getattr(checkpoint, "removed", False):  # an empty checkpoint is removed on the way out
        return "nothing was written."
    from dask.utils import format_bytes

    size = getattr(checkpoint, "nbytes", 0)
    return (f"{len(steps)} completed pass(es)" + (f" ({format_bytes(size)})" if size else "")
            + f" are kept in {checkpoint.location}: run the same command again to resume after them, "
            "or delete it (or rerun with --restart) to start over.")


def lost_cluster(exc):
    """A one-line account of ``exc`` when it means the scheduler (or the cluster) went away
    during a pass, else None."""
    from concurrent.futures import CancelledError

    kinds = (CancelledError,)
    if "distributed" in sys.modules:  # else no scheduler was used (and no import for an error)
        from distributed.comm.core import CommClosedError

        kinds += (CommClosedError,)
    if not isinstance(exc, kinds):
        return None
    return ("lost the connection to the Dask scheduler during a pass "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else 'no message'})")


@contextlib.contextmanager
def quiet_client_logs(scheduler):
    """Only CRITICAL records from distributed's loggers in this process inside the block,
    when ``scheduler`` (``--scheduler``, else ``$RFSTREAM_SCHEDULER``) names a cluster: a
    lost scheduler is reported by each reconnect attempt with its traceback, and the CLI
    says it in one line instead (:func:`lost_cluster`).  The workers' and the
    scheduler's own logs are untouched."""
    scheduler = scheduler or os.environ.get("RFSTREAM_SCHEDULER") or ""
    if scheduler in ("", "threads", "synchronous", "processes"):
        yield
        return
    import distributed  # noqa: F401 - its import configures the loggers set below

    names = ["distributed", *(n for n in logging.root.manager.loggerDict if n.startswith("distributed."))]
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
