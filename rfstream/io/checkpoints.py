"""Resume a multi-pass fit after its last completed pass.

Every pass over the data goes through :func:`rfstream.cluster.compute`, and what a pass
returns to the client is small (Grams, partial sums, gradients, the D x T products of
conjugate gradients: nothing with n in its shape).  Everything else a fit does happens
on the client and is deterministic given the seeds.  So a fit is resumable as a whole:
inside :func:`resumable`, the result of each completed pass is written to the
checkpoint (a local directory or an object-store prefix, :mod:`rfstream.io.location`)
before the fit goes on; run again with the same checkpoint, the fit replays its
client-side work and takes the first passes' results from the checkpoint instead of
the cluster, until the first pass that was not completed.  The model is the one an
uninterrupted run makes (the same numbers: the stored results are what the passes
returned).  Each fit method needs no state code of its own: Newton's, SGD's and CG's
iterates, TEFM's power iterations, CNM's alternations and the ridge CV's second pass
resume alike.

Safety:

* a checkpoint belongs to one job: ``fingerprint`` (the CLI: the command's arguments,
  the dataset's identity and rfstream's version) is stored with it, and a checkpoint
  with another fingerprint is refused with a one-line error (``restart=True``, CLI
  ``--restart``, starts over);
* each pass is checked as it is replayed: its collections' shapes and dtypes must be
  those stored; the first that differs ends the replay (the rest of the checkpoint is
  dropped and the fit computes from there);
* each stored result carries its SHA-256, checked when read; files are written whole
  (a temporary name renamed on a local disk, one PUT on an object store), and the
  manifest, written after the result, is what makes a pass count;
* only numeric and text arrays are stored (``np.savez``, read back without pickle); a
  pass returning anything else ends the checkpoint there.

A completed fit removes its checkpoint (the CLI does so after the model is saved).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json

import numpy as np

from .._version import __version__
from ..cluster import using_pass_store
from .job_lock import LOCK, JobLock
from .location import as_location, storage_errors

MANIFEST = "rfstream-checkpoint.json"
FORMAT = "rfstream-checkpoint"


def fingerprint_of(*parts):
    """SHA-256 of ``parts`` as JSON (sorted keys, ``str`` for what JSON cannot hold),
    with rfstream's version: the identity of a job."""
    doc = json.dumps([__version__, *parts], sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def dataset_identity(X, attrs):
    """What identifies a dataset to a checkpoint: X's shape, chunks and dtype, its attributes."""
    return {"shape": list(X.shape), "chunks": [list(c) for c in X.chunks], "dtype": str(X.dtype),
            "attrs": attrs}


def model_identity(model):
    """Every parameter of a scikit-learn ``model`` (a Pipeline's steps' too), the estimator
    objects themselves left out (their parameters are in the list)."""
    return {k: v for k, v in model.get_params(deep=True).items()
            if k != "steps" and not hasattr(v, "get_params")}


class CheckpointMismatch(ValueError):
    """A checkpoint made by another job (command, dataset or version)."""


def _encode(values):
    """``np.savez`` bytes of the values, or None when one is neither numeric nor text.

    Object arrays of ``str`` (labels read from a DataFrame, say) are stored as fixed-width
    text, each such array's key ending in ``_str``, and read back as object arrays."""
    arrays = {}
    for i, v in enumerate(values):
        a, key = np.asarray(v), f"v{i}"
        if a.dtype.hasobject:
            if not all(isinstance(x, str) for x in a.ravel()):
                return None
            a, key = a.astype(str), f"v{i}_str"
        arrays[key] = a
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _decode(data, count):
    values = []
    with np.load(io.BytesIO(data), allow_pickle=False) as f:
        for i in range(count):
            a = f[f"v{i}"] if f"v{i}" in f.files else f[f"v{i}_str"].astype(object)
            values.append(a[()] if a.ndim == 0 else a)
    return tuple(values)


class Checkpoint:
    """The passes of one job stored at ``location``; see the module docstring."""

    def __init__(self, location, fingerprint, *, restart=False, storage_options=None):
        self.location = as_location(location, storage_options)
        self.fingerprint = str(fingerprint)
        self.position = 0  # passes seen by this run
        self.reused = 0  # of which replayed from the checkpoint
        self.steps = []
        manifest = self._read_manifest()
        others = [f for f in self.location.files() if f.name != LOCK] if self.location.isdir() else []
        if manifest is None and others:
            raise CheckpointMismatch(f"{self.location} is not an rfstream checkpoint (no {MANIFEST}) "
                                     "and not empty; name a new or empty directory for the checkpoint.")
        if manifest is not None and restart:
            self._remove_files(manifest.get("steps", []))
        if manifest is not None and not restart:
            if manifest.get("fingerprint") != self.fingerprint or manifest.get("format") != FORMAT:
                made = manifest.get("description") or "another job"
                raise CheckpointMismatch(
                    f"the checkpoint {self.location} was made by {made}, not by this one; run the "
                    "command that made it to resume, or pass restart=True (CLI: --restart) to start over.")
            self.steps = list(manifest.get("steps", []))
        self.found = len(self.steps)
        self.description = ""

    def _read_manifest(self):
        target = self.location.child(MANIFEST)
        with storage_errors(target, "cannot be read"):
            if not target.isfile():
                return None
            try:
                return json.loads(target.read_bytes())
            except ValueError:
                raise CheckpointMismatch(f"{target} is not an rfstream checkpoint manifest; pass "
                                         "restart=True (CLI: --restart) to start over.") from None

    def _write_manifest(self):
        doc = {"format": FORMAT, "rfstream_version": __version__, "fingerprint": self.fingerprint,
               "description": self.description, "steps": self.steps}
        target = self.location.child(MANIFEST)
        with storage_errors(target, "cannot be written"):
            target.write_bytes(json.dumps(doc, indent=1).encode())

    def replay(self, sig, count):
        """The stored results of the next pass, or None: compute it (and :meth:`record` it)."""
        k = self.position
        if k >= len(self.steps):
            return None
        step = self.steps[k]
        if step["signature"] != sig or step["count"] != count:
            del self.steps[k:]  # the job took another path: nothing after this pass is valid
            self._write_manifest()
            return None
        target = self.location.child(step["file"])
        with storage_errors(target, "cannot be read"):
            data = target.read_bytes()
        if hashlib.sha256(data).hexdigest() != step["sha256"]:
            raise CheckpointMismatch(f"{target} is damaged (its SHA-256 differs from the manifest's); "
                                     "pass restart=True (CLI: --restart) to start over.")
        self.position += 1
        self.reused += 1
        return _decode(data, count)

    def record(self, sig, values):
        """Store the results of the pass just computed, then count it in the manifest."""
        k = self.position
        self.position += 1
        if k != len(self.steps):  # an earlier pass could not be stored: the replay ends there
            return
        data = _encode(values)
        if data is None:
            return
        name = f"pass-{k + 1:05d}.npz"
        target = self.location.child(name)
        with storage_errors(target, "cannot be written"):
            target.write_bytes(data)
        self.steps.append({"file": name, "signature": sig, "count": len(values),
                           "sha256": hashlib.sha256(data).hexdigest()})
        self._write_manifest()

    def _remove_files(self, steps):
        for name in [MANIFEST, *(step["file"] for step in steps)]:
            self.location.child(name).remove()

    def remove(self):
        """Delete the checkpoint's files, and its directory when nothing else is left in it
        (after the job's output is safely written)."""
        with storage_errors(self.location, "cannot be removed"):
            self._remove_files(self.steps)
            if self.location.isdir() and not self.location.files():
                self.location.remove()


@contextlib.contextmanager
def resumable(location, fingerprint="", *, restart=False, description="", storage_options=None):
    """Make the fits inside the block resumable from ``location`` (see the module docstring).

    ``fingerprint`` identifies the job (a checkpoint with another one is refused unless
    ``restart``); ``description`` says in the refusal what made the checkpoint.  One job
    at a time: another running job's checkpoint is refused (:mod:`rfstream.io.job_lock`).  Yields
    the :class:`Checkpoint`: ``reused`` passes came from it.  The checkpoint is kept
    when the block raises (or the process is killed) after a completed pass, removed when
    it raises before any (a refusal before the first pass leaves nothing behind), and left
    for the caller to :meth:`~Checkpoint.remove` when it succeeds.
    """
    lock = JobLock(as_location(location, storage_options)).acquire()
    checkpoint, failed = None, False
    try:
        checkpoint = Checkpoint(location, fingerprint, restart=restart, storage_options=storage_options)
        checkpoint.description = description
        with using_pass_store(checkpoint):
            yield checkpoint
    except BaseException:
        failed = True
        raise
    finally:
        lock.release()
        if failed and checkpoint is not None and not checkpoint.steps:
            checkpoint.remove()
