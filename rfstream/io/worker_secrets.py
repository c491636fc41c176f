"""Credentials handed to each Dask worker by the client itself, never through the scheduler.

A :class:`Courier` (one per distributed client) sends the credentials this process shared
straight to each worker's address, over the client's own connection (the worker's ``run``
handler): the scheduler neither holds nor forwards a byte of them.  A worker keeps them under
the client's id while the scheduler still lists that client (:func:`watch`, every
:data:`CHECK_SECONDS`), then forgets them and the filesystems built with them.  Imported only
where a distributed client exists.  Narrative: docs/robustness.md, "rfstream/io/credentials.py".
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from functools import partial

from distributed.protocol.pickle import dumps

__all__ = ["Courier", "connected", "drop", "install", "release", "watch"]

#: how often a worker asks the scheduler whether the client that gave it credentials is still
#: there, at least (slower on a large cluster: as often as the worker's heartbeat, which
#: distributed keeps under 200 a second at the scheduler)
CHECK_SECONDS = 1.0
#: how often the client looks for workers that joined since it last gave credentials
POLL_SECONDS = 1.0
#: a worker that cannot reach the scheduler for this long forgets the credentials
LEASE_SECONDS = 30.0
#: a dropped client's filesystems are collected again this long after (its tasks freed by then)
COLLECT_AFTER_SECONDS = 3.0

_HELD: dict[str, set] = {}   # on a worker: client id -> the tokens it gave
_FORGET = []  # on a worker: [uninstall(tokens)], as the client's install gave it
_WATCHED: dict[str, asyncio.Task] = {}  # on a worker: client id -> its watch


# ------------------------------------------------------------------ on a worker
async def install(client_id, shared, keep, forget, dask_worker=None) -> bool:
    """Keep ``shared`` (token -> credentials) for ``client_id``'s tasks with ``keep(shared)``
    and watch that client; ``forget(tokens)`` drops them.  Never raises: distributed logs a
    failed function's arguments."""
    try:
        keep(shared)
        _FORGET[:] = [forget]
        _HELD.setdefault(client_id, set()).update(shared)
        if client_id not in _WATCHED and dask_worker is not None:
            _WATCHED[client_id] = asyncio.get_running_loop().create_task(watch(client_id, dask_worker))
        return True
    except Exception:
        return False


def drop(client_id) -> None:
    """Forget the credentials ``client_id`` gave, unless another client still holds them."""
    tokens = _HELD.pop(client_id, set())
    task = _WATCHED.pop(client_id, None)
    if task is not None and task is not _current_task():
        task.cancel()
    kept = set().union(*_HELD.values()) if _HELD else set()
    if _FORGET:
        _FORGET[0](tokens - kept)
    with contextlib.suppress(RuntimeError):  # the dead client's tasks are freed meanwhile
        asyncio.get_running_loop().call_later(COLLECT_AFTER_SECONDS, gc.collect)


async def release(client_id) -> bool:
    """:func:`drop`, as the client's ``run`` on a worker when it closes."""
    with contextlib.suppress(Exception):
        drop(client_id)
    return True


async def watch(client_id, worker) -> None:
    """Drop ``client_id``'s credentials once the scheduler no longer lists that client (closed,
    or its process killed), or cannot be reached for :data:`LEASE_SECONDS`."""
    confirmed = time.monotonic()
    while client_id in _HELD:
        await asyncio.sleep(_check_seconds(worker))
        try:
            events = await worker.scheduler.events(topic=client_id)
        except Exception:  # the scheduler is away: keep them a while, as the client may be too
            if time.monotonic() - confirmed > LEASE_SECONDS:
                break
            continue
        if not connected(events):
            break
        confirmed = time.monotonic()
    if _WATCHED.get(client_id) is _current_task():
        _WATCHED.pop(client_id)
    drop(client_id)


def _check_seconds(worker) -> float:
    heartbeat = getattr(worker, "periodic_callbacks", {}).get("heartbeat")
    return max(CHECK_SECONDS, getattr(heartbeat, "callback_time", 0) / 1000)


def connected(events) -> bool:
    """Whether a client's scheduler events say it is connected (its last "add-client" after its
    last "remove-client"; none at all: gone, its topic cleared)."""
    for _, event in reversed(list(events or ())):
        action = event.get("action") if isinstance(event, dict) else None
        if action in ("add-client", "remove-client"):
            return action == "add-client"
    return False


def _current_task():
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


# ------------------------------------------------------------------ on the client
class Courier:
    """Gives one client's workers the credentials of ``shared`` (a dict this process fills;
    ``keep`` and ``forget``: what a worker does with them) over direct connections: all of
    them at :meth:`deliver`, and every :data:`POLL_SECONDS` those that joined since;
    :meth:`close` takes them back."""

    def __init__(self, client, shared: dict, keep, forget):
        self.client = client
        self.shared = shared
        self.keep, self.forget = keep, forget
        self.given: dict[str, frozenset] = {}  # worker address -> tokens given
        self._poll = None

    def deliver(self) -> None:
        """Give every current worker the credentials (again: a restarted worker has none)."""
        self.client.sync(self._deliver, True)
        if self._poll is None:
            self._poll = True
            self.client.loop.add_callback(self._polling)

    async def _deliver(self, every: bool) -> None:
        workers = await self.client.scheduler.ncores()  # {address: threads}: the workers now
        tokens = frozenset(self.shared)
        todo = [a for a in workers if every or self.given.get(a) != tokens]
        function = dumps(partial(install, keep=self.keep, forget=self.forget))
        args = dumps((self.client.id, dict(self.shared)))
        results = await asyncio.gather(*(self._call(a, function, args) for a in todo), return_exceptions=True)
        for address, ok in zip(todo, results):
            if ok is True:
                self.given[address] = tokens
        for address in set(self.given) - set(workers):
            del self.given[address]

    async def _call(self, address, function, args):
        reply = await self.client.rpc(address).run(function=function, args=args, wait=True)
        return isinstance(reply, dict) and reply.get("result") is True

    async def _polling(self) -> None:
        while self._poll and self.client.status == "running":
            await asyncio.sleep(POLL_SECONDS)
            with contextlib.suppress(Exception):  # a worker or the scheduler away: next time
                if self._poll:
                    await self._deliver(False)

    def close(self) -> None:
        """Stop looking for workers and have the given ones forget the credentials now
        (their watch would within :data:`CHECK_SECONDS` of the client's end anyway)."""
        self._poll = False
        if self.client.status != "running":
            return
        with contextlib.suppress(Exception):
            self.client.sync(self._forget)

    async def _forget(self) -> None:
        function, args = dumps(release), dumps((self.client.id,))
        await asyncio.gather(*(self.client.rpc(a).run(function=function, args=args, wait=True)
                               for a in self.given), return_exceptions=True)
        self.given.clear()
