"""Where computations run, and the one place where lazy reductions become numbers.

:func:`connect` runs on dask's threads for small data (:func:`small_data_limit`), on an embedded
LocalCluster (:mod:`rfstream.embedded`) otherwise, or on an existing scheduler named by its
address.  :func:`compute` runs every pass, with its progress display and, in a resumable fit, the
pass store (:func:`using_pass_store`), inside the active :class:`RunContext`
(:func:`run_context`, one ``contextvars.ContextVar``: two fits in one process each see their
own).  Narrative: docs/robustness.md, "rfstream/cluster.py".
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field

import dask
from dask.base import named_schedulers

from .embedded import local_cluster
from .options import PROGRESS_MODES, ParameterError

LOCAL_SCHEDULERS = ("threads", "synchronous", "processes")
#: Data at most this large (X's bytes) run on threads when no scheduler is named ...
SMALL_DATA_BYTES = 2**30
#: ... and at most this fraction of the machine's memory (:func:`small_data_limit`).
SMALL_DATA_FRACTION = 0.125
#: ``hook(client)`` before each computation on a distributed client, ``hook(client, done=True)`` when
#: :func:`connect` closes its client (io/credentials.py: the workers get the storage credentials).
CLIENT_HOOKS = []


@dataclass
class RunContext:
    """What one run (a command, a fit) counts and keeps: its display mode, passes and pass store."""

    progress: str = "never"  # how compute() shows each pass: "auto", "always" or "never"
    passes: int = 0  # passes finished (computed or taken from the store) in this run
    store: object = None  # the pass store in use (using_pass_store), e.g. a checkpoint
    last_store: object = None  # the last store used, kept after its block (the CLI says what it keeps)
    prefetched: dict = field(default_factory=dict)  # graph name -> value computed ahead (prefetch)
    expected: tuple = ()  # (kind, label) of the passes a plan expects after pass ``expected_after``
    expected_after: int = 0  # the passes done when the plan was made (expect_passes)
    expected_total: int | None = None  # the run's passes when the plan is done; None: unknown


#: What a pass is, by a part of its graph's key names: the chunk function of rfstream's
#: reductions (:func:`rfstream.reductions.chunk_name`) or a dask operation; a pass of several
#: collections is named by each kind found, joined by " + " (:func:`pass_kind`).
PASS_KINDS = {
    "moments_chunk": "moments", "unique": "classes", "gram_chunk": "Gram", "score_chunk": "CV scoring",
    "held_out_sse_chunk": "CV scoring", "loo_chunk": "leave-one-out", "calibration_chunk": "calibration",
    "gaussian_sketch_chunk": "sketch", "srht_sketch_chunk": "sketch", "power_chunk": "power iteration",
    "statistics_chunk": "label statistics", "stats_chunk": "CG statistics", "product_chunk": "products",
    "epoch_chunk": "epoch", "newton_chunk": "Newton step", "covariance_chunk": "covariance",
    "landmark_chunk": "landmarks", "pilot_gram_chunk": "pilot Gram", "classification_chunk": "metrics",
    "regression_chunk": "metrics",
}
#: The kind of a collection whose graph names no kind of :data:`PASS_KINDS`, by its own name.
TOP_KINDS = {"getitem": "row sample"}


def _kinds_of(collection):
    """The :data:`PASS_KINDS` named by the nearest layers of ``collection``'s graph (breadth
    first from its top), else :data:`TOP_KINDS`' of its own name, else none."""
    graph = collection.__dask_graph__()
    layers = getattr(graph, "dependencies", None)
    tops = list(collection.__dask_layers__()) if hasattr(collection, "__dask_layers__") else []
    seen, frontier = set(tops), tops
    while layers is not None and frontier:
        found = [PASS_KINDS[part] for name in frontier for part in str(name).split("-")[:-1] if part in PASS_KINDS]
        if found:
            return list(dict.fromkeys(found))
        frontier = [d for name in frontier for d in layers.get(name, ()) if d not in seen]
        seen.update(frontier)
    top = str(getattr(collection, "name", "")).split("-")[0]
    return [TOP_KINDS[top]] if top in TOP_KINDS else []


def pass_kind(collections):
    """What a pass over ``collections`` is, in words ("Gram", "moments + row sample +
    classes"), or "" when its graphs name nothing known."""
    kinds = []
    for c in collections:
        kinds += [k for k in _kinds_of(c) if k not in kinds]
    return " + ".join(kinds)


def expect_passes(passes, total=None):
    """From now on in the active run, the progress numbers and names the passes after the
    current one by ``passes`` (``(kind, label)`` pairs, :mod:`rfstream.fit_plan`): "pass 3 of
    ``total`` (label)" where the pass's kind (:func:`pass_kind`) is the one expected; ``total``
    None: the count is not known (a data-driven map, iterations).  Nothing outside a run."""
    run = _RUN.get()
    if run is not None:
        run.expected, run.expected_after = tuple(passes), run.passes
        run.expected_total = None if total is None else run.passes + int(total)


def pass_title(run, number, lazy):
    """"pass 3 of 6 (Gram, 5 folds x 8 gammas)": the pass's number, the run's expected total
    and its label (the plan's where the kind is the expected one, else the kind)."""
    kind = pass_kind(lazy)
    k = number - run.expected_after - 1
    label = kind
    if 0 <= k < len(run.expected) and run.expected[k][0] == kind:
        label = run.expected[k][1]
    total = run.expected_total if run.expected_total is not None and number <= run.expected_total else None
    return f"pass {number}" + (f" of {total}" if total else ""), label


def shows_progress():
    """Whether the active run shows its passes (a run whose ``progress`` is not "never")."""
    run = _RUN.get()
    return run is not None and _progress_style(run) is not None


def announce(lines):
    """Print ``lines`` to stderr, each after "rfstream: ", where the run shows progress
    (not with ``progress="never"``, the CLI's ``--quiet``)."""
    run = _RUN.get()
    if run is None or _progress_style(run) is None:
        return
    for line in lines:
        print(f"rfstream: {line}", file=sys.stderr, flush=True)


#: Seconds between two lines of the client's work between passes (:func:`client_work`).
CLIENT_WORK_INTERVAL = 5.0


@contextlib.contextmanager
def client_work(total, what):
    """The client's work between two passes (the factorizations of a search), shown as
    "solving 25 of 75 <what>" at most every :data:`CLIENT_WORK_INTERVAL` seconds where the run
    shows progress (nothing with ``progress="never"``); yields ``step(count=1, detail=None)``,
    called as each is done (``detail``: e.g. "Cholesky, D=2,000")."""
    run = _RUN.get()
    if run is None or _progress_style(run) is None or total <= 0:
        yield lambda count=1, detail=None: None
        return
    t0 = time.perf_counter()
    state = {"done": 0, "shown": t0, "lines": 0}
    lock = threading.Lock()  # steps come from client_map's threads

    def step(count=1, detail=None):
        with lock:
            state["done"] += count
            now = time.perf_counter()
            if not (now - state["shown"] >= CLIENT_WORK_INTERVAL or (state["done"] >= total and state["lines"])):
                return
            state["shown"] = now
            state["lines"] += 1
            print(f"rfstream: solving {min(state['done'], total):,} of {total:,} {what}"
                  + (f" ({detail})" if detail else "") + f", {now - t0:.1f} s", file=sys.stderr, flush=True)

    yield step


_DEFAULT = {"progress": "never"}  # the process's display mode: a setting, not a run's state
_RUN = contextvars.ContextVar("rfstream_run", default=None)


def _check_mode(mode):
    if isinstance(mode, bool):
        mode = "auto" if mode else "never"
    if mode not in PROGRESS_MODES:
        raise ValueError(f"progress must be one of {', '.join(PROGRESS_MODES)}; got {mode!r}.")
    return mode


def set_progress(mode) -> None:
    """The process's display mode: "auto" (a bar on a terminal, else a line per pass), "always"
    (a bar) or "never" (True: "auto", False: "never"), for the active run context and those opened
    afterwards without a mode."""
    _DEFAULT["progress"] = _check_mode(mode)
    run = _RUN.get()
    if run is not None:
        run.progress = _DEFAULT["progress"]


@contextlib.contextmanager
def run_context(progress=None):
    """A fresh :class:`RunContext` for the block (``progress``: its display mode, else the
    process's, :func:`set_progress`); yields it."""
    run = RunContext(progress=_DEFAULT["progress"] if progress is None else _check_mode(progress))
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)


@contextlib.contextmanager
def ensure_run_context(progress=None):
    """The active :class:`RunContext` (shown in ``progress`` for the block, when given), or a
    fresh one for the block when there is none."""
    run = _RUN.get()
    if run is not None:
        previous, run.progress = run.progress, run.progress if progress is None else _check_mode(progress)
        try:
            yield run
        finally:
            run.progress = previous
        return
    with run_context(progress) as run:
        yield run


def current_run():
    """The active :class:`RunContext`, or None outside :func:`run_context`."""
    return _RUN.get()


def _progress_style(run):
    """The display of a pass: "bar", "lines" or None (the mode, and whether stderr is a terminal)."""
    mode = run.progress
    if mode == "never":
        return None
    tty = getattr(sys.stderr, "isatty", lambda: False)()
    return "bar" if mode == "always" or tty else "lines"


def small_data_limit() -> int:
    """X's bytes at or below which :func:`connect` runs on threads: ``$RFSTREAM_SMALL_DATA`` (``"4GB"``,
    ``"0"``), else ``min(SMALL_DATA_BYTES, SMALL_DATA_FRACTION * memory)``."""
    text = os.environ.get("RFSTREAM_SMALL_DATA", "").strip()
    if text:
        from dask.utils import parse_bytes

        try:
            return int(parse_bytes(text))
        except ValueError:
            raise ValueError(f"RFSTREAM_SMALL_DATA must be a size such as 1GB or 0; got {text!r}.") from None
    import psutil

    return int(min(SMALL_DATA_BYTES, SMALL_DATA_FRACTION * psutil.virtual_memory().total))


def current_client():
    """The distributed client of this context, or None (no client, or distributed not installed)."""
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def on_workers():
    """Whether passes run on a distributed client's workers (else in this process's threads)."""
    return dask.config.get("scheduler", None) not in LOCAL_SCHEDULERS and current_client() is not None


def worker_memory():
    """``(bytes, threads)``: the smallest memory limit of a worker of the current client
    and its threads, or, with no client (dask's threads), 80% of this machine's memory
    and its cores."""
    local = dask.config.get("scheduler", None) in LOCAL_SCHEDULERS
    client = None if local else current_client()
    if client is not None:
        workers = client.scheduler_info().get("workers", {}).values()
        limits = [(w.get("memory_limit") or 0, w.get("nthreads") or 1) for w in workers]
        limits = [(m, t) for m, t in limits if m > 0]
        if limits:
            return min(limits)
    import psutil

    return int(0.8 * psutil.virtual_memory().total), os.cpu_count() or 1


@contextlib.contextmanager
def using_pass_store(store):
    """Inside the block, :func:`compute` asks ``store.replay(signature, count)`` for each
    pass's results before computing it, and gives what it computes to
    ``store.record(signature, values)`` (:class:`rfstream.io.checkpoints.Checkpoint`).
    The store belongs to the active run context (one is opened for the block when there
    is none)."""
    with ensure_run_context() as run:
        previous = run.store
        run.store = store
        run.last_store = store
        try:
            yield store
        finally:
            run.store = previous


def signature(collections):
    """What a stored pass is checked against: each collection's type, shape and dtype."""
    parts = []
    for c in collections:
        shape = getattr(c, "shape", None)
        parts.append([type(c).__name__, None if shape is None else [None if s != s else int(s) for s in shape],
                      str(getattr(c, "dtype", ""))])
    return parts


def prefetch(*collections):
    """Compute ``collections`` now, in one pass (their common inputs read once), for the run's
    later :func:`compute` calls of the same collections (the same graph names), which then take
    the values without a pass of their own; returns nothing.  Outside a run: nothing is kept."""
    run = _RUN.get()
    lazy = [c for c in collections if dask.is_dask_collection(c) and getattr(c, "name", None)]
    if run is None or not lazy:
        return
    values = compute(*lazy)
    for c, value in zip(lazy, values if len(lazy) > 1 else (values,)):
        run.prefetched[c.name] = value


def _prefetched(run, lazy):
    """The values of ``lazy`` computed ahead (:func:`prefetch`), copies, or None unless all were."""
    memo = run.prefetched
    if not memo or not all(getattr(c, "name", None) in memo for c in lazy):
        return None
    return {c.name: copy.deepcopy(memo[c.name]) for c in lazy}


def compute(*collections):
    """Compute dask collections (numpy values pass through), with progress: a tuple for
    several collections, a single value otherwise."""
    lazy = [c for c in collections if dask.is_dask_collection(c)]
    run = _RUN.get() or RunContext(progress=_DEFAULT["progress"])  # outside a run: a pass on its own
    ahead = _prefetched(run, lazy) if lazy else None
    if ahead is not None:  # computed by the run's prefetch: no pass of its own
        results = tuple(ahead[c.name] if dask.is_dask_collection(c) else c for c in collections)
        return results if len(results) > 1 else results[0]
    checkpoint = run.store if lazy else None
    sig = signature(lazy) if checkpoint is not None else None
    stored = checkpoint.replay(sig, len(lazy)) if checkpoint is not None else None
    if not lazy:
        results = collections
    elif stored is not None:  # a pass completed by an earlier, interrupted run
        run.passes += 1
        if _progress_style(run) == "lines":
            title, label = pass_title(run, run.passes, lazy)
            print(f"rfstream: {title}" + (f" ({label})" if label else "") + " taken from the checkpoint",
                  file=sys.stderr, flush=True)
        values = iter(stored)
        results = tuple(next(values) if dask.is_dask_collection(c) else c for c in collections)
    else:
        style = _progress_style(run)
        title, label = pass_title(run, run.passes + 1, lazy) if style else ("", "")
        if style == "bar":  # the bar has no words of its own: what it is and which of N
            print(f"rfstream: {title}" + (f": {label}" if label else ""), file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        local = dask.config.get("scheduler", None) in LOCAL_SCHEDULERS
        client = None if local else current_client()
        if client is not None:
            for hook in CLIENT_HOOKS:
                hook(client)
            with warnings.catch_warnings():
                # a pass's large arguments (a D x D factor, a map's weights) are one key of its
                # graph (rfstream.reductions.shared), sent once: what the warning advises
                warnings.filterwarnings("ignore", message="Sending large graph of size")
                futures = client.compute(lazy)
            if style == "bar":
                from distributed import progress

                with contextlib.redirect_stdout(sys.stderr):  # keep stdout for results
                    progress(futures)
            values = iter(client.gather(futures))
        else:
            from dask.diagnostics import ProgressBar

            bar = ProgressBar(out=sys.stderr) if style == "bar" else contextlib.nullcontext()
            # a local scheduler named by its function: dask then does not import distributed
            # to look for a client
            get = named_schedulers.get(dask.config.get("scheduler", None)) if local else None
            with bar, one_blas_thread_per_task(lazy):
                values = iter(dask.compute(*map(_uncopied, lazy), scheduler=get))
        if checkpoint is not None:  # stored before the pass counts as done
            values = list(values)
            checkpoint.record(sig, values)
            values = iter(values)
        run.passes += 1
        if style == "lines":
            print(f"rfstream: {title}" + (f" ({label})" if label else "")
                  + f" done in {time.perf_counter() - t0:.2f} s", file=sys.stderr, flush=True)
        results = tuple(next(values) if dask.is_dask_collection(c) else c for c in collections)
    return results if len(results) > 1 else results[0]


def _uncopied(collection):
    """A pass's reduced partials as the one key of their one chunk (:func:`rfstream.reductions.fresh_sum`),
    which a local scheduler hands back as it is; any other collection as it is, which dask copies
    where its one chunk may alias the graph."""
    # reductions imports dask.array, which neither the CLI's start nor a conversion needs; no
    # reduction's result exists before it is imported
    reductions = sys.modules.get(f"{__package__}.reductions")
    if reductions is not None and reductions.fresh_sum(collection) and collection.npartitions == 1:
        return collection.to_delayed().ravel()[0]
    return collection


@functools.cache
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def single_blas_thread():
    """A context in which BLAS runs on one thread.  The BLAS libraries are found once per process
    (``threadpoolctl.ThreadpoolController``, made at the first call, when numpy's and scipy's are
    loaded): ``threadpool_limits`` scans every loaded library each time, 1.3-5 ms, which a search of
    160 small passes paid 160 times."""
    return _blas_controller().limit(limits=1, user_api="blas")


def one_blas_thread_per_task(collections=()):
    """Single-threaded BLAS while dask's thread pool runs several tasks at once (each pool thread's
    BLAS would start a thread per core: docs/BENCHMARKS.md, "Measurements behind the code"); a graph
    whose widest layer has one task keeps BLAS's threads."""
    scheduler = dask.config.get("scheduler", None)
    workers = dask.config.get("num_workers", None) or os.cpu_count() or 1
    if scheduler in (None, "threads", "threading") and workers > 1 and _widest_layer(collections) > 1:
        return single_blas_thread()  # scheduler None: dask's default, threads
    return contextlib.nullcontext()


#: The client's independent solves of a search (one per (gamma, fold), or per gamma) run at once, one per
#: core with one BLAS thread each (:func:`client_map`), for Grams narrower than this; wider ones one at a
#: time on every BLAS thread.  Why: docs/ridge.md, "The route of each (gamma, fold)".
CLIENT_MAP_MAX_WIDTH = 4096
#: the D x D float64 arrays one solve of :func:`client_map` holds at once (training Gram, its centred
#: copy, the factor, the held-out moments), for the memory bound on the solves at once
CLIENT_MAP_ARRAYS = 5


def client_cores():
    """The cores this process may run on (its CPU affinity, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def client_map(fn, items, *, width, shown=None):
    """``[fn(item) for item in items]``, computed on the client's cores at once with one BLAS thread
    each, when there are several items, the Grams (``width`` x ``width``) are narrower than
    :data:`CLIENT_MAP_MAX_WIDTH` and :data:`CLIENT_MAP_ARRAYS` of them per item at once fit in a quarter
    of the available memory; else one after another, each on every BLAS thread.  A small factorization
    gains little from BLAS's threads and, on a busy machine, loses much to their waits for each other
    (docs/BENCHMARKS.md, "The client's solves"); the solves' LAPACK runs without the GIL
    (:mod:`rfstream.lapack`).  ``shown``: ``(what, per_item, detail)``, the work shown in the progress
    as each item is done (:func:`client_work`)."""
    items = list(items)
    if shown is not None:
        what, per_item, detail = shown
        with client_work(len(items) * per_item, what) as step:
            def counted(item):
                value = fn(item)
                step(per_item, detail)
                return value

            return client_map(counted, items, width=width)
    threads = min(client_cores(), len(items))
    if threads > 1 and width < CLIENT_MAP_MAX_WIDTH:
        import psutil

        per_item = CLIENT_MAP_ARRAYS * 8 * width * width
        threads = min(threads, max(1, int(0.25 * psutil.virtual_memory().available // max(per_item, 1))))
    if threads <= 1 or width >= CLIENT_MAP_MAX_WIDTH:
        return [fn(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    context = contextvars.copy_context()  # the job's settings (its device) in every thread
    with single_blas_thread(), ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda item: context.copy().run(fn, item), items))


def _widest_layer(collections):
    """Most tasks in one layer of the collections' graphs (how many can run at once)."""
    widest = 1
    for c in collections:
        graph = c.__dask_graph__()
        layers = getattr(graph, "layers", None)
        sizes = [len(layer) for layer in layers.values()] if layers else [len(graph)]
        widest = max(widest, *sizes)
    return widest


def choose_scheduler(scheduler=None, data_bytes=None):
    """The scheduler :func:`connect` uses: ``scheduler``, else ``$RFSTREAM_SCHEDULER``,
    else "threads" for small data (``data_bytes`` at most :func:`small_data_limit`),
    else None (the embedded LocalCluster; also for "cluster")."""
    scheduler = scheduler or os.environ.get("RFSTREAM_SCHEDULER") or None
    if scheduler is None and data_bytes is not None and data_bytes <= small_data_limit():
        return "threads"
    return None if scheduler == "cluster" else scheduler


#: seconds a scheduler's host:port has to accept a TCP connection before ``connect`` gives up
#: (dask config ``rfstream.probe-timeout``); the client's own handshake then has ``rfstream.connect-timeout``
PROBE_TIMEOUT = 5
#: the schemes whose address is ``host:port`` over TCP, probed before the client connects
_TCP_SCHEMES = ("tcp", "tls", "ws", "wss")


def scheduler_address(scheduler):
    """``(scheme, host, port)`` of a scheduler's address (``tcp://`` when it names none); a
    port that is not a number, or none, is a :class:`ParameterError` naming the address."""
    from urllib.parse import urlsplit

    text = scheduler if "://" in scheduler else "tcp://" + scheduler
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme in _TCP_SCHEMES and (not parts.hostname or port is None or port < 0):
        raise ParameterError(
            "{scheduler=} is not a scheduler's address: "
            + (f"its port {parts.netloc.rpartition(':')[2]!r} is not a number from 0 to 65535"
               if port is not None else "it names no port") + "; write tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786",
            scheduler=scheduler)
    return parts.scheme, parts.hostname, port


def probe_scheduler(scheduler):
    """Refuse within seconds an address where nothing accepts a TCP connection (refused,
    unreachable, unknown host), where the client would retry for its whole timeout."""
    import socket

    scheme, host, port = scheduler_address(scheduler)
    if scheme not in _TCP_SCHEMES:
        return
    seconds = dask.utils.parse_timedelta(dask.config.get("rfstream.probe-timeout", PROBE_TIMEOUT))
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as exc:
        reason = "no answer within {:g} s".format(seconds) if isinstance(exc, TimeoutError) else \
            (exc.strerror or type(exc).__name__)
        raise ParameterError(
            f"could not connect to the Dask scheduler at {scheduler!r}: nothing accepts a connection at "
            f"{host}:{port} ({reason}); check the address and that the scheduler runs, or leave "
            "{scheduler} out to use an embedded cluster.", scheduler=scheduler) from None


@contextlib.contextmanager
def connect(scheduler=None, *, n_workers=None, data_bytes=None, device="cpu"):
    """Context manager that yields a ``distributed.Client`` or ``None``.

    Parameters
    ----------
    scheduler : str or None
        ``None`` (``$RFSTREAM_SCHEDULER``, else threads for small data, else an
        embedded LocalCluster), ``"threads"``/``"synchronous"``/``"processes"``,
        ``"cluster"`` (the embedded LocalCluster), or a scheduler address.
    n_workers : int, optional
        Worker processes for the embedded cluster (default: one per core).
    data_bytes : int, optional
        X's bytes, for the small-data rule (:func:`small_data_limit`); None: unknown, the
        embedded LocalCluster.
    device : str
        "cuda": the embedded cluster's workers are the GPUs' (:func:`rfstream.embedded.gpu_cluster_kwargs`).
    """
    scheduler = choose_scheduler(scheduler, data_bytes)
    if scheduler in LOCAL_SCHEDULERS:
        with dask.config.set(scheduler=scheduler):
            yield None
        return
    from distributed import Client

    if scheduler is None:
        with local_cluster(n_workers, device) as cluster, Client(cluster) as client:
            yield client
        return
    if "://" not in scheduler and ":" not in scheduler:
        raise ValueError(
            f"scheduler must be an address like tcp://host:8786, or one of "
            f"{', '.join(LOCAL_SCHEDULERS)}; got {scheduler!r} ('cluster': an embedded LocalCluster)."
        )
    probe_scheduler(scheduler)
    try:
        client = Client(scheduler, timeout=dask.config.get("rfstream.connect-timeout", "20s"))  # DASK_RFSTREAM__...
    except (OSError, TimeoutError, MemoryError) as exc:  # MemoryError: a handshake read from another server
        said = "what answers there does not speak Dask's protocol" if isinstance(exc, MemoryError) else exc
        raise ParameterError(
            f"could not connect to the Dask scheduler at {scheduler!r} ({said}); "
            "check the address, or leave {scheduler} out to use an embedded cluster.", scheduler=scheduler
        ) from None
    with client, contextlib.ExitStack() as hooks:
        for hook in CLIENT_HOOKS:
            hooks.callback(hook, client, done=True)
        yield client
