"""A client process for tests/io/test_worker_credentials.py: connects to ``argv[1]``, reads
``argv[2]`` on a worker with the storage options in ``$RFSTREAM_TEST_OPTIONS`` (credentials
only there), prints the size read, then waits to be killed; :func:`holders`, the probe a second client
runs on the scheduler and the workers."""
import gc
import json
import logging
import os
import sys
import time

import dask

from rfstream.cluster import compute, connect
from rfstream.io.location import as_location


def _holds(item, text, raw):
    if type(item) is str:
        return text in item
    return type(item) in (bytes, bytearray) and raw in item


def holders(reversed_needle):
    """The types of this process's objects that hold the text (given reversed, so that the
    probe's message does not carry it) in a text or bytes they refer to (or in a dict or
    tuple of atomic values they refer to, which gc does not track), and whether its logs do: run by a second
    client.  The text is a local here, never in a closure or a generator (a cell would be found)."""
    text = reversed_needle[::-1]
    raw = text.encode()
    containers = (dict, list, tuple, set, frozenset)
    found = set()
    for obj in gc.get_objects():
        for ref in gc.get_referents(obj):
            if _holds(ref, text, raw):
                found.add(type(obj).__name__)
            elif isinstance(ref, containers) and not gc.is_tracked(ref):  # atomic values only
                for item in (*ref.keys(), *ref.values()) if isinstance(ref, dict) else ref:
                    if _holds(item, text, raw):
                        found.add(type(ref).__name__)
    for handler in logging.getLogger("distributed").handlers:
        for record in getattr(handler, "deque", ()):
            if text in str(getattr(record, "msg", record)):
                found.add("log")
    return sorted(found)


def _size(location):
    return len(location.read_bytes())


if __name__ == "__main__":
    options = json.loads(os.environ.pop("RFSTREAM_TEST_OPTIONS"))
    with connect(sys.argv[1]):
        print(compute(dask.delayed(_size)(as_location(sys.argv[2], options))), flush=True)
        time.sleep(600)
