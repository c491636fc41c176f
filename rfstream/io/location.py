"""Where bytes live: a local path or an fsspec URL, behind one small interface.

:func:`as_location` turns a local path or a URL (``s3://``, ``gs://``, ``abfs://``,
``memory://``, ``file://``; ``http(s)://`` for reading) into a :class:`Location`, a
filesystem and a path on it; no local path is ever made from a URL.  Options come from
``storage_options``, else the filesystem's environment; no credential is ever shown.  A
store's failure is one :class:`StorageError` line naming the location and the fix.
Narrative: docs/robustness.md, "rfstream/io/location.py".
"""
from __future__ import annotations

import contextlib
import copy
import errno
import os
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import fsspec
from fsspec.implementations.local import LocalFileSystem
from zarr.storage import FsspecStore

from ..options import ParameterMixin
from .credentials import by_value, missing_credentials, on_a_worker, restore, secret_values, share, split

__all__ = ["EXTRAS", "Location", "StorageError", "as_location", "is_url", "redact_url", "scrub_secrets"]

#: fsspec protocol -> the rfstream extra that installs its filesystem.
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "azure", "az": "azure",
          "abfss": "azure", "adl": "azure", "http": "http", "https": "http"}

#: S3 client settings used unless the caller gives ``config_kwargs``: fail fast on
#: a wrong endpoint instead of botocore's 60 s connect timeout and retries.
S3_FAST_FAIL = {"connect_timeout": 5, "read_timeout": 60, "retries": {"total_max_attempts": 3, "mode": "standard"}}


#: "s3:/b", "s3:b", "gs:\\b": a scheme of two letters or more and a colon, without "://".
_URL_TYPO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:(?!//)")

#: "proto://user:password@host/...": the password of a URL's userinfo.
_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:]*):[^/@]*@")


class StorageError(ParameterMixin, ValueError):
    """The store refused or could not be reached; the message names the location and the fix
    (and the parameters it names as data, :class:`rfstream.options.ParameterMixin`)."""


def is_url(target) -> bool:
    """True for ``"proto://..."`` strings (``file://`` included); False for local paths."""
    return isinstance(target, str) and "://" in target


def redact_url(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part replaced by ``***``."""
    return _URL_PASSWORD.sub(r"\1:***@", url) if isinstance(url, str) else url


def scrub_secrets(text: str, storage_options) -> str:
    """``text`` with every credential of ``storage_options`` replaced by ``***``."""
    for value in sorted(set(secret_values(storage_options)), key=len, reverse=True):
        text = text.replace(value, "***")
    return text


@dataclass(frozen=True, repr=False)
class Location:
    """A filesystem and a path on it; make one with :func:`as_location`.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
    path : str
        The path on ``fs``.
    url : str
        What the user wrote (for messages), its password hidden.
    storage_options : dict
        Neither ``str`` nor ``repr`` shows a value.
    credentials : str or None
        The token that names the options' credentials (:mod:`rfstream.io.credentials`): a
        pickled Location holds them only as this.
    """

    fs: fsspec.AbstractFileSystem
    path: str
    url: str
    storage_options: dict = field(default_factory=dict, compare=False)
    credentials: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return redact_url(self.url)

    def __repr__(self) -> str:
        keys = f", storage_options={sorted(self.storage_options)}" if self.storage_options else ""
        return f"Location({str(self)!r}{keys})"

    def __reduce__(self):
        if self.credentials is None or by_value():
            return Location, (self.fs, self.path, self.url, self.storage_options)
        fs = self.fs  # as fsspec pickles a filesystem, its options without the credentials
        return _relocated, (type(fs), fs.storage_args, split(fs.storage_options)[0], self.path, self.url,
                            split(self.storage_options)[0], self.credentials)

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    @property
    def name(self) -> str:
        """The last component of the path (``"x.zarr"``)."""
        return PurePosixPath(self.path.rstrip("/")).name

    @property
    def local_path(self) -> Path:
        if not self.is_local:
            raise ValueError(f"{self} is not on the local filesystem")
        return Path(self.path)

    def child(self, *names: str) -> Location:
        path = "/".join([self.path.rstrip("/"), *names])
        url = "/".join([self.url.rstrip("/"), *names])
        return Location(self.fs, path, url, self.storage_options, self.credentials)

    # ------------------------------------------------------------ queries
    def exists(self) -> bool:
        with storage_errors(self, "cannot be read"):
            return self.fs.exists(self.path)

    def isfile(self) -> bool:
        with storage_errors(self, "cannot be read"):
            return self.fs.isfile(self.path)

    def isdir(self) -> bool:
        with storage_errors(self, "cannot be read"):
            return self.fs.isdir(self.path)

    def glob(self, pattern: str) -> list[Location]:
        """Locations matching a glob pattern on this filesystem, sorted by path."""
        with storage_errors(self, "cannot be listed"):
            paths = sorted(self.fs.glob(pattern))
        return [self._at(p) for p in paths]

    def files(self) -> list[Location]:
        """Every file under this directory (recursively), sorted by path."""
        with storage_errors(self, "cannot be listed"):
            paths = sorted(self.fs.find(self.path))
        return [self._at(p) for p in paths]

    def _at(self, path: str) -> Location:
        if self.is_local:
            return Location(self.fs, path, path, self.storage_options, self.credentials)
        return Location(self.fs, path, redact_url(self.fs.unstrip_protocol(path)), self.storage_options,
                        self.credentials)

    # ------------------------------------------------------------ bytes
    def open(self, mode: str = "rb"):
        with storage_errors(self, "cannot be opened"):
            return self.fs.open(self.path, mode)

    def read_bytes(self) -> bytes:
        with storage_errors(self, "cannot be read"):
            return self.fs.cat_file(self.path)

    def write_bytes(self, data: bytes) -> None:
        """Write a whole file at once: a temporary file renamed locally, one PUT on a store.

        Either way a reader sees the old content or the new one, never a part.
        """
        with storage_errors(self, "cannot be written"):
            if self.is_local:
                _write_local_atomic(Path(self.path), data)
            else:
                self.fs.pipe_file(self.path, data)

    def remove(self) -> None:
        """Delete this file or directory tree; a missing one is not an error."""
        try:
            self.fs.rm(self.path, recursive=True)
        except FileNotFoundError:
            pass

    def remove_file(self) -> None:
        """Delete this one file (a symbolic link itself, never what it points to), never a
        directory; a missing one is not an error."""
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
            if not self.is_local:
                self.fs.rm_file(self.path)
            elif not os.path.isdir(self.path) or os.path.islink(self.path):
                os.unlink(self.path)

    def zarr_store(self, *, read_only: bool):
        """A zarr v3 store rooted here (``LocalStore`` or a :class:`LocatedStore`)."""
        import zarr.storage

        if self.is_local:
            return zarr.storage.LocalStore(self.path, read_only=read_only)
        # zarr drives the filesystem from its own event loop: let it make its own instance
        url = self.fs.unstrip_protocol(self.path)
        store = LocatedStore.from_url(url, storage_options=self.storage_options, read_only=read_only)
        store.location = self
        return store


def _relocated(cls, args, fs_options, path, url, options, token) -> Location:
    """A pickled :class:`Location` rebuilt, with the credentials of ``token`` where this process
    holds them (:func:`rfstream.io.credentials.restore`)."""
    fs = cls(*args, **restore(fs_options, token))
    return Location(fs, path, url, restore(options, token), token)


class LocatedStore(FsspecStore):
    """zarr's ``FsspecStore`` on a :class:`Location`: it pickles as that Location (so without
    its credentials), and "no credentials found" is a one-line :class:`StorageError` naming the
    location and whether this is a worker (:func:`as_storage_error`)."""

    location: Location | None = None

    def __reduce__(self):
        return _reopened, (self.location, self.read_only)

    def with_read_only(self, read_only: bool = False) -> LocatedStore:
        store = super().with_read_only(read_only)
        store.location = self.location
        return store

    async def get(self, *args, **kwargs):
        with _credentials_errors(self.location):
            return await super().get(*args, **kwargs)

    async def get_partial_values(self, *args, **kwargs):
        with _credentials_errors(self.location):
            return await super().get_partial_values(*args, **kwargs)

    async def set(self, *args, **kwargs):
        with _credentials_errors(self.location):
            return await super().set(*args, **kwargs)

    async def exists(self, *args, **kwargs):
        with _credentials_errors(self.location):
            return await super().exists(*args, **kwargs)


def _reopened(location: Location, read_only: bool) -> LocatedStore:
    return location.zarr_store(read_only=read_only)


@contextmanager
def _credentials_errors(location):
    try:
        yield
    except Exception as exc:
        if not missing_credentials(exc):
            raise
        raise as_storage_error(exc, location, "cannot be reached") from None


def _write_local_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def as_location(target, storage_options: dict | None = None) -> Location:
    """A :class:`Location` from a local path, a URL or a Location.

    Parameters
    ----------
    target : str, os.PathLike or Location
        A local path or a URL (``s3://``, ``gs://``, ``abfs://``, ``memory://``,
        ``file://``, ``https://``); a Location is returned as it is.
    storage_options : dict, optional
        For the filesystem's constructor (for S3, e.g.
        ``{"endpoint_url": "http://127.0.0.1:9000", "key": ..., "secret": ...}``).

    Returns
    -------
    Location

    Raises
    ------
    StorageError
        For a URL with a typo, an unknown protocol, one whose filesystem is not installed
        (naming the extra to install), or options the filesystem does not accept.
    TypeError, ValueError
        For something that is not a path or a URL, or an empty string.
    """
    if isinstance(target, Location):
        return target
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise TypeError(f"expected a local path or a URL; got {type(target).__name__}")
    if not target:
        raise ValueError("expected a local path or a URL; got an empty string")
    options = dict(storage_options or {})
    if not is_url(target) and _URL_TYPO.match(target):  # a path: no password to hide
        raise StorageError(f"{target!r} looks like a URL with a typo (a URL is proto://...); "
                           "write it as s3://bucket/key, or ./ before a local path with a colon")
    if not is_url(target):
        return Location(LocalFileSystem(), os.path.abspath(target), target, options, share(options))
    protocol = target.split("://", 1)[0].lower()
    shown = redact_url(target)
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ImportError:
        extra = EXTRAS.get(protocol)
        hint = f'pip install "rfstream[{extra}]"' if extra else "install its fsspec filesystem package"
        raise StorageError(f"{shown}: no filesystem for {protocol}:// is installed; {hint}") from None
    except ValueError:
        raise StorageError(f"{shown}: {protocol}:// is not a known storage protocol; "
                           "use a local path or s3://, gs://, abfs://, memory://, file://, https://") from None
    if protocol in ("s3", "s3a") and "config_kwargs" not in options:
        options["config_kwargs"] = copy.deepcopy(S3_FAST_FAIL)  # botocore edits it
    kwargs = dict(options)
    kwargs.update(cls._get_kwargs_from_urls(target))
    try:
        fs = cls(**kwargs)
    except TypeError as exc:  # the options' names, never their values
        raise StorageError(f"{shown}: storage options {sorted(options)} are not accepted "
                           f"by {cls.__name__} ({scrub_secrets(_first_line(exc), options)})") from None
    return Location(fs, cls._strip_protocol(target), shown, options, share(options))


@contextmanager
def storage_errors(location, doing: str):
    """Turn a store's failure into a one-line error naming ``location`` (see :func:`as_storage_error`)."""
    try:
        yield
    except Exception as exc:
        converted = as_storage_error(exc, location, doing)
        if converted is None:
            raise
        raise converted from None


_NETWORK_MODULES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "adlfs", "azure",
                    "requests", "urllib3")


def as_storage_error(exc: Exception, location, doing: str) -> Exception | None:
    """The one-line error for a store's failure ``exc``, or None if ``exc`` is not one.

    A missing file stays ``FileNotFoundError`` (with the location named), refused or
    missing credentials and unreachable endpoints become :class:`StorageError` (missing
    ones say whether the Dask workers or this process lacked them, and how to give them); errors
    rfstream raises itself are not touched.  The store's text is cleared of the
    location's credentials (:func:`scrub_secrets`).
    """
    if isinstance(exc, (FileExistsError, StorageError, IsADirectoryError, NotADirectoryError)):
        return None
    options = getattr(location, "storage_options", None) or {}
    text = scrub_secrets(_first_line(exc), options)
    if missing_credentials(exc):
        return StorageError(_no_credentials(location, doing, text), storage_options=None)
    if isinstance(exc, FileNotFoundError):
        if str(location) in text and text == _first_line(exc):
            return None
        return FileNotFoundError(f"{location} {doing}: {text}")
    if isinstance(exc, PermissionError):
        return StorageError(f"{location} {doing}: access denied ({text}); check the "
                            "credentials ({storage_options}; or the filesystem's environment)", storage_options=None)
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"{location} {doing}: {text}; free space there or write "
                            "elsewhere (what was there before is untouched)")
    if isinstance(exc, OSError) or type(exc).__module__.split(".", 1)[0] in _NETWORK_MODULES:
        return StorageError(f"{location} {doing}: {text}; check the URL, the endpoint "
                            "and the credentials ({storage_options})", storage_options=None)
    return None


def _no_credentials(location, doing: str, text: str) -> str:
    """Where the credentials for ``location`` were missing (a Dask worker, or this process) and
    the ways to give them (``{storage_options}``: the parameter, for :class:`StorageError`)."""
    if on_a_worker():
        return (f"the Dask workers could not find credentials for {location} ({text}); give the "
                "workers their own (their environment, or an instance or pod role), or pass "
                "{storage_options}, which rfstream sends to the workers")
    return (f"{location} {doing}: no credentials found ({text}); set them in this environment "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for S3, a profile or a role), or pass "
            "{storage_options}")


def _first_line(exc) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
