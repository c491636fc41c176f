"""How storage options reach the Dask workers: their credentials by a token, never in the task graph.

A :class:`~rfstream.io.location.Location` (and a Zarr store on one) pickles its options without
the credentials (the options named as :data:`SECRET_NAME` matches) and with a random token
(:func:`share`); the credentials reach each distributed client's workers from the client itself,
never through the scheduler, and only while that client lives (:func:`give_to_workers`,
:mod:`rfstream.io.worker_secrets`); a worker puts them back (:func:`restore`).  Without options a
worker uses its own environment or role.  Dask's ``processes`` scheduler gets them whole
(:func:`by_value`).  Narrative: docs/robustness.md, "rfstream/io/credentials.py".
"""
from __future__ import annotations

import copy
import json
import re
import secrets
import sys
import weakref

import dask

from ..cluster import CLIENT_HOOKS

__all__ = ["by_value", "give_to_workers", "missing_credentials", "on_a_worker", "restore", "share", "split"]

#: An option whose name matches holds a credential (S3's key, secret, token; client_kwargs'
#: aws_secret_access_key; Azure's account_key, sas_token, connection_string; passwords).
SECRET_NAME = re.compile(r"key|secret|token|passw|credential|sas|signature|connection_string|auth",
                         re.IGNORECASE)

#: The exceptions of "no credentials were found" (botocore, google-auth), by class name:
#: their packages need not be installed.
MISSING = frozenset({"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                     "DefaultCredentialsError"})

_SHARED: dict[str, list] = {}  # token -> [(path of the option, value)], in this process
_TOKENS: dict[str, str] = {}   # the credentials as JSON text -> their token
_GIVEN = weakref.WeakKeyDictionary()  # client -> its Courier (rfstream.io.worker_secrets)
_ON_A_WORKER = []  # [True] once a client gave credentials here: this process is a worker's


def secret_values(options, secret=False) -> list:
    """Every text held under a credential's name in ``options`` (nested dicts included)."""
    if isinstance(options, dict):
        return [v for k, item in options.items()
                for v in secret_values(item, secret or bool(SECRET_NAME.search(str(k))))]
    if isinstance(options, (list, tuple)):
        return [v for item in options for v in secret_values(item, secret)]
    return [options] if secret and isinstance(options, str) and len(options) >= 4 else []


def split(options: dict, _path=()) -> tuple[dict, list]:
    """``(public, credentials)``: ``options`` without the values held under a credential's
    name, and those values as ``[(path of keys, value)]``."""
    public = {}
    found = []
    for key, value in options.items():
        path = (*_path, key)
        if isinstance(value, dict) and not SECRET_NAME.search(str(key)):
            public[key], more = split(value, path)
            found += more
        elif SECRET_NAME.search(str(key)) or secret_values(value):
            found.append((path, value))
        else:
            public[key] = value
    return public, found


def share(options: dict) -> str | None:
    """The token of the credentials in ``options`` (None if they hold none), kept in this
    process for its workers; a client current here gives them to its workers at once."""
    found = split(options or {})[1]
    if not found:
        return None
    text = json.dumps(found, default=repr)
    token = _TOKENS.get(text)
    if token is None:
        token = _TOKENS[text] = secrets.token_hex(8)
        _SHARED[token] = found
        client = _default_client()
        if client is not None:
            give_to_workers(client)
    return token


def by_value() -> bool:
    """Whether tasks pickled now carry credentials whole (dask's ``processes`` scheduler)."""
    return dask.config.get("scheduler", None) in ("processes", "multiprocessing")


def restore(public: dict, token: str | None) -> dict:
    """``public`` options with the credentials of ``token`` put back, where this process
    holds them (the client that shared them, a worker given them); else ``public``."""
    options = copy.deepcopy(public)
    for path, value in _SHARED.get(token, ()):
        place = options
        for key in path[:-1]:
            place = place.setdefault(key, {})
        place[path[-1]] = value
    return options


def install(shared: dict) -> None:
    """On a worker: keep the credentials of ``shared`` (token -> credentials) for its tasks."""
    _ON_A_WORKER[:] = [True]
    for token, found in shared.items():
        _SHARED[token] = found
        _TOKENS[json.dumps(found, default=repr)] = token


def uninstall(tokens) -> None:
    """On a worker: forget the credentials of ``tokens`` (their client is gone), and the
    filesystems built with them that fsspec keeps in its instance caches."""
    values = set()
    for token in tokens:
        found = _SHARED.pop(token, None)
        if found is not None:
            _TOKENS.pop(json.dumps(found, default=repr), None)
            values.update(secret_values([value for _, value in found], secret=True))
    if values:
        _forget_filesystems(values)


def _forget_filesystems(values: set) -> None:
    """Remove from every fsspec filesystem class's instance cache the instances whose options
    hold one of ``values``."""
    import gc

    import fsspec

    classes, stack = set(), [fsspec.AbstractFileSystem]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in classes:
                classes.add(sub)
                stack.append(sub)
    for cls in classes:
        cache = vars(cls).get("_cache")
        if isinstance(cache, dict):
            for key in [key for key, fs in cache.items()
                        if values & set(secret_values(getattr(fs, "storage_options", {})))]:
                cache.pop(key, None)
    gc.collect()


def _default_client():
    """The distributed client this process computes on by default, if any (never a worker's
    own: a task does not connect to the scheduler)."""
    if "distributed" not in sys.modules or _ON_A_WORKER:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def give_to_workers(client, done: bool = False) -> None:
    """Give ``client``'s workers every credential this process has shared, straight from this
    process (:class:`rfstream.io.worker_secrets.Courier`); ``done``: take them back."""
    if done:
        courier = _GIVEN.pop(client, None)
        if courier is not None:
            courier.close()
        return
    if not _SHARED:
        return
    from .worker_secrets import Courier

    courier = _GIVEN.get(client)
    if courier is None:
        courier = _GIVEN[client] = Courier(client, _SHARED, install, uninstall)
    courier.deliver()


def on_a_worker() -> bool:
    """Whether this code runs on a Dask worker (in its task, or in a process a client gave
    credentials to) rather than in the client."""
    if _ON_A_WORKER:
        return True
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return False
    return True


def missing_credentials(exc) -> bool:
    """Whether ``exc`` says that no credentials were found (not that they were refused)."""
    return type(exc).__name__ in MISSING or "Unable to locate credentials" in str(exc)


if give_to_workers not in CLIENT_HOOKS:
    CLIENT_HOOKS.append(give_to_workers)
