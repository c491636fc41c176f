"""Resume a multi-pass fit after its last completed pass.

Inside :func:`resumable`, the small result of each pass through :func:`rfstream.cluster.compute`
is written to the checkpoint (a local directory or an object-store prefix); a rerun replays
the client's deterministic work and takes the stored results up to the first pass not
completed, so the model is the one an uninterrupted run makes.  A checkpoint belongs to one
job (its fingerprint; its identity part by part says what differs when refused), holds only
rfstream's names, and each pass, stored exactly in the least bytes (:mod:`.pass_encoding`,
:func:`stored_nbytes`), carries its SHA-256 (and an HMAC under :data:`KEY_ENV`).  Narrative and
safety rules: docs/robustness.md, "rfstream/io/checkpoints.py".
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
import posixpath
import re
import sys
import zipfile

from .._version import __version__
from ..cluster import using_pass_store
from ..options import ParameterMixin
from . import made_directory as made_dirs
from . import nofollow
from .job_lock import LOCK, CheckpointBusy, JobLock
from .location import StorageError, as_location, storage_errors
from .pass_encoding import decode, encode, stored_nbytes

__all__ = ["MANIFEST", "Checkpoint", "CheckpointMismatch", "dataset_identity", "differences",
           "fingerprint_of", "identity_summary", "model_identity", "resumable", "step_name", "stored_nbytes",
           "will_recur"]

MANIFEST = "rfstream-checkpoint.json"
#: An environment variable holding a secret key.  When it is set, each stored pass carries
#: an HMAC-SHA256 under that key (of its bytes, its place, its signature and the job's
#: fingerprint) and a replayed pass without the right one is refused: whoever can write the
#: checkpoint but does not know the key cannot poison a resumed model.  Without it, a pass
#: is checked by its SHA-256 only (against damage, not against someone who rewrites both).
KEY_ENV = "RFSTREAM_CHECKPOINT_KEY"
FORMAT = "rfstream-checkpoint"
#: the most bytes a manifest may have (a few hundred a pass): a larger one is not rfstream's
MAX_MANIFEST_BYTES = 64 * 2**20
#: no bound of its own on a pass's file: what a pass returns is bounded by the memory plan
MAX_PASS_BYTES = sys.maxsize
#: every name rfstream writes in a checkpoint's directory: the manifest, the lock, the passes,
#: and their temporary names while written (``.NAME.XXXXXXXX``, renamed whole)
_NAMES = r"(rfstream-checkpoint\.json|rfstream-checkpoint\.lock|pass-\d{5}\.npz)"
OWN_NAME = re.compile(rf"{_NAMES}|\.{_NAMES}\.[a-z0-9_]{{8}}")


def fingerprint_of(*parts):
    """SHA-256 of ``parts`` as JSON (sorted keys, ``str`` for what JSON cannot hold),
    with rfstream's version: the identity of a job."""
    doc = json.dumps([__version__, *parts], sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def dataset_identity(X, attrs, witness=None):
    """What identifies a dataset to a checkpoint: X's shape, chunks and dtype, its attributes,
    and ``witness``, the digest of its content (:func:`rfstream.io.witness.content_witness`: any rewrite changes
    it; None, for a dataset with no location, leaves the identity as it was)."""
    identity = {"shape": list(X.shape), "chunks": [list(c) for c in X.chunks], "dtype": str(X.dtype),
                "attrs": attrs}
    if witness is not None:
        identity["content"] = str(witness)
    return identity


def model_identity(model):
    """Every parameter of a scikit-learn ``model`` (a Pipeline's steps' too), the estimator
    objects themselves left out (their parameters are in the list)."""
    return {k: v for k, v in model.get_params(deep=True).items()
            if k != "steps" and not hasattr(v, "get_params")}


#: the most differences a refusal names, the most characters of a value or name it shows
SHOWN_DIFFERENCES, SHOWN_CHARS = 5, 80


#: a URL's ``user:password@`` anywhere in a text (:func:`rfstream.io.location.redact_url` wants it first)
_ANY_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s'\"]*):[^/@\s'\"]*@")


def _digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def identity_summary(parts):
    """``{name: [digest, shown]}`` of a job's identity, stored in the manifest so that a
    refusal can say what differs (:func:`differences`): for each part, the first 16 hex
    digits of its SHA-256 (as :func:`fingerprint_of` hashes) and its ``repr``, passwords of
    URLs hidden, cut to :data:`SHOWN_CHARS` characters.  ``parts``: name -> value; a dict
    value under the name ``"dataset"`` is spread as ``dataset NAME`` (its ``attrs`` one per
    key), so that a dataset's attribute is named alone."""
    flat = {}
    for name, value in parts.items():
        if name == "dataset" and isinstance(value, dict):
            for key, item in value.items():
                if key == "attrs" and isinstance(item, dict):
                    flat.update({f"dataset attribute {k!r}": v for k, v in item.items()})
                else:
                    flat[f"dataset {key}"] = item
        else:
            flat[name] = value
    return {name: [_digest(value), _shown(_ANY_PASSWORD.sub(r"\1:***@", repr(value)))] for name, value in flat.items()}


def _shown(text, limit=SHOWN_CHARS):
    """``text`` (from anywhere: a checkpoint written by someone else) made safe for one line:
    at most ``limit`` characters, every one printable (others escaped)."""
    text = text if isinstance(text, str) else repr(text)
    cut = text[: limit * 4]
    safe = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in cut)
    return safe if len(safe) <= limit and len(cut) == len(text) else safe[: limit - 3] + "..."


def differences(stored, current):
    """``"NAME differs (checkpoint A, this run B)"`` for each part of two identity summaries
    (:func:`identity_summary`) whose digests differ, at most :data:`SHOWN_DIFFERENCES` named
    then "and N more"; ``stored`` may come from a file written by anyone (sanitized here).
    A model parameter is named by its last part (``alpha`` for ``solver__alpha``) when no
    other part ends so."""
    stored = stored if isinstance(stored, dict) else {}
    names = sorted(set(current) | {k for k in stored if isinstance(k, str)})

    def entry(summary, name):
        value = summary.get(name)
        ok = isinstance(value, list) and len(value) == 2
        return (str(value[0]), value[1]) if ok else (None, "(not recorded)" if summary is stored else "(none)")

    short = {}
    for name in names:
        short.setdefault(name.rsplit("__", 1)[-1], []).append(name)
    said = []
    for name in names:
        (was, was_shown), (now, now_shown) = entry(stored, name), entry(current, name)
        if was != now:
            tail = name.rsplit("__", 1)[-1]
            label = tail if len(short[tail]) == 1 else name
            said.append(f"{_shown(label)} differs (checkpoint {_shown(was_shown)}, this run {_shown(now_shown)})")
    more = len(said) - SHOWN_DIFFERENCES
    return said[:SHOWN_DIFFERENCES] + ([f"and {more} more"] if more > 0 else [])


class CheckpointMismatch(ParameterMixin, ValueError):
    """A checkpoint made by another job (command, dataset or version); the parameters it names
    as data (:class:`rfstream.options.ParameterMixin`)."""


class Checkpoint:
    """The passes of one job stored at ``location`` (docs/robustness.md).

    ``made_directory``: the token of the checkpoint's directory when this run made it
    (:mod:`rfstream.io.made_directory`); else the manifest's token counts only when the
    marker beside the directory proves it, and a directory rfstream did not make is kept."""

    def __init__(self, location, fingerprint, *, restart=False, storage_options=None, made_directory=None,
                 description="", identity=None):
        self.location = as_location(location, storage_options)
        self.fingerprint = str(fingerprint)
        self.description = description
        self.identity = identity  # identity_summary of the job, stored to say what differs
        self.position = 0  # passes seen by this run
        self.reused = 0  # of which replayed from the checkpoint
        self.steps = []
        self.written = set()  # the names this run wrote
        self.removed = False  # its files removed (the job done, or failed in a way that recurs)
        manifest = self._read_manifest()
        claimed = (manifest or {}).get("made_directory")
        if not made_directory and self.location.is_local and made_dirs.proven(self.location.path, claimed):
            made_directory = claimed  # an earlier run made it: its marker says so
        self.made_directory = made_directory if isinstance(made_directory, str) else None
        top = self.location.path.rstrip("/")
        others = [f for f in self.location.files()
                  if not (_own(f.name) and posixpath.dirname(f.path.rstrip("/")) == top)] \
            if self.location.isdir() else []
        if manifest is None and others:
            raise CheckpointMismatch(f"{self.location} is not an rfstream checkpoint (no {MANIFEST}) "
                                     "and not empty; name a new or empty directory for the checkpoint.")
        if manifest is not None and restart:
            self._remove_own_files()
        if manifest is not None and not restart:
            if manifest.get("fingerprint") != self.fingerprint:
                raise self._another_job(manifest, restart)
            self.steps = list(manifest.get("steps", []))

    def _another_job(self, manifest, restart):
        """The refusal of a checkpoint made by another job: which parts of the job differ when
        both sides recorded them (:func:`differences`), else the description it was made by."""
        stored = manifest.get("identity")
        said = differences(stored, self.identity) if self.identity and isinstance(stored, dict) else []
        if said:
            changed = " (the dataset changed since the checkpoint was made)" if any(
                d.startswith("dataset content ") for d in said) else ""
            return CheckpointMismatch(
                f"the checkpoint {self.location} is for another job: {'; '.join(said)}{changed}; run the "
                "command that made it to resume, or pass {restart=True} to discard it, or use another "
                "{checkpoint}.", restart=restart, checkpoint=None)
        made = _shown(" ".join(str(manifest.get("description") or "another job").split()), 300)
        return CheckpointMismatch(
            f"the checkpoint {self.location} was made by {made}, not by this one, or the dataset "
            "changed since; run the command that made it on the unchanged data to resume, or pass "
            "{restart=True} to start over.", restart=restart)

    @property
    def nbytes(self):
        """The bytes of the stored passes (as recorded in the manifest; a pass written by an
        older rfstream, which did not record them, counts 0)."""
        return sum(int(s.get("bytes", 0)) for s in self.steps
                   if isinstance(s, dict) and isinstance(s.get("bytes", 0), int))

    def _refuse(self, why):
        return CheckpointMismatch(f"the checkpoint {self.location} is not rfstream's ({why}); use another "
                                  "directory for the {checkpoint}.", checkpoint=None)

    def _read_manifest(self):
        """The manifest, checked: rfstream's format, and each step's file named as rfstream
        names it (``pass-NNNNN.npz``, in order); None when there is none."""
        target = self.location.child(MANIFEST)
        data = self._read(target, MAX_MANIFEST_BYTES)
        if data is None:
            return None
        try:
            manifest = json.loads(data)
        except (ValueError, RecursionError):
            manifest = None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise self._refuse(f"{MANIFEST} is not an rfstream checkpoint manifest")
        steps = manifest.get("steps", [])
        if not isinstance(steps, list):
            raise self._refuse(f"{MANIFEST} has no list of steps")
        for k, step in enumerate(steps):
            name = step.get("file") if isinstance(step, dict) else None
            if name != step_name(k):
                shown = repr(name)[:80]
                raise self._refuse(f"its manifest names {shown} as pass {k + 1}, not {step_name(k)}")
        return manifest

    def _read(self, target, limit):
        """The bytes of the checkpoint's file ``target`` (None when missing), read on a local
        disk without following a link (:mod:`rfstream.io.nofollow`); one larger than ``limit``
        bytes, a link or anything but a regular file make the checkpoint not rfstream's."""
        with storage_errors(target, "cannot be read"):
            if not target.is_local:
                if not target.isfile():
                    return None
                size = int(target.fs.info(target.path).get("size") or 0)
                if size > limit:
                    raise self._refuse(f"{target.name} is {size} bytes, more than the {limit} it may have")
                return target.read_bytes()
            try:
                return nofollow.read_file(self.location.path, target.name, limit)
            except nofollow.Refused as exc:
                raise self._refuse(f"{target.name} {exc.why}") from None

    def _write_manifest(self):
        doc = {"format": FORMAT, "rfstream_version": __version__, "fingerprint": self.fingerprint,
               "description": self.description, "made_directory": self.made_directory, "steps": self.steps}
        if self.identity:
            doc["identity"] = self.identity
        target = self.location.child(MANIFEST)
        with storage_errors(target, "cannot be written"):
            target.write_bytes(json.dumps(doc, indent=1).encode())
        self.written.add(MANIFEST)

    def _mac(self, k, sig, count, data):
        """HMAC-SHA256 of pass ``k`` (its bytes, signature, count and the job's fingerprint)
        under the key in :data:`KEY_ENV`, or None when no key is set."""
        key = os.environ.get(KEY_ENV, "")
        if not key:
            return None
        head = json.dumps([self.fingerprint, k, sig, count], sort_keys=True, default=str).encode()
        return hmac.new(key.encode(), head + b"\0" + data, hashlib.sha256).hexdigest()

    def replay(self, sig, count):
        """The stored results of the next pass, or None: compute it (and :meth:`record` it)."""
        k = self.position
        if k >= len(self.steps):
            return None
        step = self.steps[k]
        if step.get("signature") != sig or step.get("count") != count:
            del self.steps[k:]  # the job took another path: nothing after this pass is valid
            self._write_manifest()
            return None
        target = self.location.child(step_name(k))  # the name rfstream gives, checked against the manifest
        try:
            data = self._read(target, MAX_PASS_BYTES)
        except FileNotFoundError:
            data = None
        if data is None:  # named by the manifest this run read, gone since
            raise CheckpointBusy(
                f"the checkpoint {self.location} was removed while this run replayed it: another run "
                "of the same job finished first and wrote its output.")
        if hashlib.sha256(data).hexdigest() != step.get("sha256"):
            raise CheckpointMismatch(f"{target} is damaged (its SHA-256 differs from the manifest's); "
                                     "pass {restart=True} to start over.", restart=False)
        mac = self._mac(k, sig, count, data)
        if mac is not None and not hmac.compare_digest(str(step.get("hmac", "")), mac):
            raise CheckpointMismatch(f"{target} is not authenticated by ${KEY_ENV} (written without it, "
                                     "under another key, or edited); pass {restart=True} "
                                     "to start over.", restart=False)
        try:
            values = decode(data, count)
        except (ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointMismatch(f"{target} is damaged or not rfstream's ({_shown(str(exc))}); "
                                     "pass {restart=True} to start over.", restart=False) from None
        self.position += 1
        self.reused += 1
        return values

    def record(self, sig, values):
        """Store the results of the pass just computed, then count it in the manifest."""
        k = self.position
        self.position += 1
        if k != len(self.steps):  # an earlier pass could not be stored: the replay ends there
            return
        data = encode(values)
        if data is None:
            return
        name = step_name(k)
        target = self.location.child(name)
        with storage_errors(target, "cannot be written"):
            target.write_bytes(data)
        self.written.add(name)
        step = {"file": name, "signature": sig, "count": len(values), "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data)}
        mac = self._mac(k, sig, len(values), data)
        if mac is not None:
            step["hmac"] = mac
        self.steps.append(step)
        self._write_manifest()

    def _own_names(self):
        """The names of rfstream's files at the top of the checkpoint's directory (the lock
        aside): all of them when it holds rfstream's manifest, else those this run wrote."""
        if self.location.is_local:
            try:
                with os.scandir(self.location.path) as entries:
                    names = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
            except (FileNotFoundError, NotADirectoryError):
                return []
        else:
            with storage_errors(self.location, "cannot be listed"):
                if not self.location.isdir():
                    return []
                names = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.location.fs.ls(self.location.path,
                                                                                       detail=False)]
        names = [n for n in names if _own(n) and n != LOCK]
        if MANIFEST not in names and MANIFEST not in self.written:
            names = [n for n in names if n in self.written]
        return sorted(names, key=lambda n: n != MANIFEST)  # the manifest first: no pass counts after

    def _remove_own_files(self):
        for name in self._own_names():
            self.location.child(name).remove_file()
        self.written.clear()

    def remove_files(self):
        """Delete the checkpoint's own files (the manifest, the passes, their temporary
        names), and nothing else, ever; the lock is the lock's to remove."""
        with storage_errors(self.location, "cannot be removed"):
            self._remove_own_files()
        self.removed = True

    def remove_directory(self):
        """Delete the checkpoint's directory when rfstream made it (this run, or an earlier one
        its marker proves) and nothing is left in it."""
        remove_made_directory(self.location, self.made_directory)

    def remove(self):
        """Delete the checkpoint's files, and its directory when rfstream made it and nothing
        else is left in it (after the job's output is safely written)."""
        self.remove_files()
        self.remove_directory()


def step_name(k):
    """The name rfstream gives the file of pass ``k + 1``: ``pass-00001.npz``, ..."""
    return f"pass-{k + 1:05d}.npz"


def _own(name):
    return bool(OWN_NAME.fullmatch(name))


def remove_made_directory(location, token):
    """Remove the local directory ``location`` if rfstream made it with ``token`` and it is empty
    (``rmdir``: never its content; :mod:`rfstream.io.made_directory`); an object store has no
    directories to remove."""
    if location.is_local and token:
        made_dirs.remove(location.path, token)


def will_recur(exc):
    """True for a failure that a rerun would meet again: a ``ValueError`` (bad data, a refused
    parameter) other than a store's failure, a damaged or foreign checkpoint or a busy lock."""
    return isinstance(exc, ValueError) and not isinstance(exc, (StorageError, CheckpointMismatch, CheckpointBusy))


@contextlib.contextmanager
def resumable(location, fingerprint="", *, restart=False, description="", storage_options=None, identity=None):
    """Make the fits inside the block resumable from ``location`` (docs/robustness.md).

    ``fingerprint`` identifies the job (a checkpoint with another one is refused unless
    ``restart``); ``identity`` (:func:`identity_summary` of the parts hashed into it) lets
    the refusal name the parts that differ, else ``description`` says what made it.  One job
    at a time: another running job's checkpoint is refused, a crashed one's lock taken
    over (:mod:`rfstream.io.job_lock`).  Yields the :class:`Checkpoint`: ``reused``
    passes came from it.  When the block raises, the checkpoint is

    * kept after a completed pass when the failure may pass: a stop (a signal, Ctrl-C:
      any ``BaseException`` that is not an ``Exception``), a store's failure or any
      ``OSError``, a lost cluster, a damaged checkpoint (the process killed: kept too);
    * removed (its files, and its directory if rfstream made it) when no pass completed,
      or when the failure will recur (:func:`will_recur`: a ``ValueError``, bad data such
      as inf in X, NaN in y, one class, one row): a rerun would fail the same way;

    and left for the caller to :meth:`~Checkpoint.remove` when the block succeeds.
    """
    where = as_location(location, storage_options)
    lock = JobLock(where).acquire(restart=restart)
    made = lock.made_directory
    checkpoint = None
    failure = None
    try:
        checkpoint = Checkpoint(where, fingerprint, restart=restart, made_directory=made,
                                description=description, identity=identity)
        with using_pass_store(checkpoint):
            yield checkpoint
    except BaseException as exc:
        failure = exc
        raise
    finally:
        drop = failure is not None and (checkpoint is None or not checkpoint.steps or will_recur(failure))
        try:
            if drop and checkpoint is not None:
                with contextlib.suppress(Exception):  # the failure is what the caller must see
                    checkpoint.remove_files()
        finally:
            lock.release()
        if drop:
            remove_made_directory(where, checkpoint.made_directory if checkpoint is not None else made)
