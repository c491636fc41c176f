"""A dask callback that counts the tasks dask's local schedulers run: "nothing was read"
is a count of zero."""
from dask.callbacks import Callback


class TaskCounter(Callback):
    """``with TaskCounter() as tasks: ...`` then ``tasks.count``."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _pretask(self, key, dsk, state):
        self.count += 1
