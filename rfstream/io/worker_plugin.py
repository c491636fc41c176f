"""The worker plugin that gives Dask workers the credentials of rfstream's storage options.

Imported only where a distributed client exists (:func:`rfstream.io.credentials.give_to_workers`):
the rest of rfstream does not import distributed.
"""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

__all__ = ["StorageOptions"]


class StorageOptions(WorkerPlugin):
    """Installs ``shared`` (token -> credentials) with ``install`` on each worker, now and
    on every worker that joins later; ``uninstall`` forgets them when the plugin is taken
    back.  Its ``repr`` shows how many sets it carries, never a value."""

    def __init__(self, shared: dict, install, uninstall):
        self.shared = shared
        self.install = install
        self.uninstall = uninstall

    def setup(self, worker):
        self.install(self.shared)

    def teardown(self, worker):
        self.uninstall(self.shared)

    def __repr__(self) -> str:
        return f"StorageOptions({len(self.shared)} set(s) of credentials)"
