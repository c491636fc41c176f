"""What the benchmark harness measures with: peak memory, the machine's GEMM rate, the
features-only pass, load, capped runs."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time


def peak_rss():
    """This process's own peak resident memory, in bytes.

    Linux's VmHWM belongs to the address space, which exec replaces. ``ru_maxrss`` does
    not start afresh: a process started by fork + exec reports its parent's peak if that
    was higher. So ``ru_maxrss`` is only the fallback off Linux.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Sampler:
    """A thread calling ``_sample`` every ``interval`` seconds while the ``with`` block runs."""

    def __init__(self, interval):
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        raise NotImplementedError

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class PeakRSS(_Sampler):
    """The largest resident memory of some processes (default: this one), in bytes, seen
    by a thread sampling them every ``interval`` seconds while the block runs.

    ``peaks[k]`` is process ``k``'s (``peak`` the first one's).  Needs psutil.
    """

    def __init__(self, pids=None, interval=0.005):
        import psutil

        self.processes = [psutil.Process(p) for p in (pids or [os.getpid()])]
        self.peaks = [p.memory_info().rss for p in self.processes]
        super().__init__(interval)

    @property
    def peak(self):
        return self.peaks[0]

    def _sample(self):
        for k, p in enumerate(self.processes):
            self.peaks[k] = max(self.peaks[k], p.memory_info().rss)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self._sample()


class TreePeakRSS(_Sampler):
    """The largest resident memory of process ``pid`` and of its descendants, in bytes, seen
    by a thread sampling them every ``interval`` seconds while the block runs.

    ``own``: the process's; ``children``: ``{pid: peak}`` of each descendant seen; ``tree``:
    the largest sum over the whole tree at one sample (a sample that loses a process on the
    way counts for the processes read, not for the sum).  Needs psutil.
    """

    def __init__(self, pid, interval=0.05):
        import psutil

        self.process = psutil.Process(pid)
        self.own = 0
        self.children = {}
        self.tree = 0
        super().__init__(interval)

    def _sample(self):
        import psutil

        total = 0
        try:
            rss = self.process.memory_info().rss
            self.own = max(self.own, rss)
            total += rss
            for child in self.process.children(recursive=True):
                rss = child.memory_info().rss
                self.children[child.pid] = max(self.children.get(child.pid, 0), rss)
                total += rss
        except psutil.Error:
            return
        self.tree = max(self.tree, total)


def wall_seconds(fn):
    """The wall time of one call of ``fn()``, in seconds."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_seconds(fn, repeats):
    """The median wall time of ``repeats`` calls of ``fn()``, in seconds."""
    import numpy as np

    return float(np.median([wall_seconds(fn) for _ in range(repeats)]))


def gemm_gflops(D, m=4096, repeats=5):
    """float32 GEMM rate on (D x m) @ (m x D): ``{"best": ..., "median": ...}`` in GFLOP/s.

    Two distinct matrices: numpy routes ``a.T @ a`` to SYRK, which does half
    the flops, and counting 2 m D^2 for it would overstate the baseline 2x.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, D), dtype=np.float32)
    b = rng.standard_normal((m, D), dtype=np.float32)
    a.T @ b  # warm up
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a.T @ b
        rates.append(2.0 * m * D * D / (time.perf_counter() - t0) / 1e9)
    return {"best": max(rates), "median": float(np.median(rates))}


def _discard(z, *rows, offset, out):
    """A pass's chunk that keeps nothing: the pass costs what its features cost."""


def features_only_pass(Z):
    """Seconds of one pass that reads the rows of ``Z = map.transform(X)``, makes their
    features a sub-block at a time as the fused passes do, and discards them: the floor
    of any pass that makes the features and keeps nothing of size n (issue 32)."""
    from ..cluster import compute
    from ..features.fused import fused_pass
    from ..reductions import sum_rows

    fn, rows = fused_pass(Z, _discard, 1)
    t0 = time.perf_counter()
    compute(sum_rows(fn, 1, rows))
    return time.perf_counter() - t0


def load():
    """1, 5 and 15-minute load averages and the core count (the machine is shared)."""
    return {"loadavg": list(os.getloadavg()), "cpus": os.cpu_count()}


def run_capped(code, cap_bytes, timeout):
    """Run the Python statements ``code`` in a fresh interpreter under an address-space cap.

    Returns the JSON it prints, or ``{"error": ...}``: "out of memory at cap"
    when it raised MemoryError (numpy's "Unable to allocate" included) or was
    killed by a signal, "timeout" past ``timeout`` seconds.
    """
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

    cmd = [sys.executable, "-c", code]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit, timeout=timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    wall = time.perf_counter() - t0
    lines = out.stdout.strip().splitlines()
    if out.returncode == 0 and lines:
        return json.loads(lines[-1])
    err = out.stderr.strip().splitlines()
    last = err[-1] if err else f"exit status {out.returncode}"
    oom = "MemoryError" in out.stderr or "Unable to allocate" in out.stderr or out.returncode < 0
    return {"error": "out of memory at cap" if oom else "failed", "detail": last[-300:],
            "returncode": out.returncode, "seconds_until_failure": wall}
