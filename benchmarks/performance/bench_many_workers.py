"""A fit by address on a cluster of N single-threaded worker processes: per pass, the time
outside the tasks and the bytes moved between workers (issue 51, item 3).

    python benchmarks/performance/bench_many_workers.py --workers 1 2 4 8 --n-components 1000 \\
        --json docs/benchmarks/many_workers.json

For each N a ``dask scheduler --host 127.0.0.1 --port 0`` and ``dask worker ADDR --nthreads 1
--nworkers N --memory-limit M`` start as processes (as a user's cluster would); this process
connects by address (:func:`rfstream.cluster.connect`) and runs ``fit_dataset`` (RFF, ridge,
``--alpha`` by 5-fold CV, the defaults otherwise) on a synthetic KDD-shaped Zarr
(:func:`rfstream.datasets.synthetic.write_kdd_like`, ``--rows`` rows in chunks of ``--chunk-rows``).
``distributed.Client.compute`` and ``gather`` are wrapped to time each pass; afterwards the
scheduler's task stream and every worker's ``transfer_incoming_log`` are read and each entry
given to the pass whose window holds it.  Per pass:

* ``wall``: ``client.compute`` called to ``gather`` returned;
* ``submit``: ``client.compute`` called to the first task's start (the graph built, sent, and
  taken in by the scheduler);
* ``leaves``: the first task's start to the last leaf (row-block) task's end, against
  ``leaf_sum / N`` (the leaves' compute time shared perfectly);
* ``tail``: the last leaf's end to the root's end (the combine levels still to run, their
  transfers), and ``combine_sum`` (the combine tasks' compute time);
* ``trip``: the root's end to ``gather`` returned (the result to the client);
* ``outside``: ``wall - (leaf_sum / N + the longest combine task of each level)``, the time no
  task of the pass's critical path ran;
* ``moved``: bytes between workers (``transfer_incoming_log``) and their transfer seconds;
* the tree: the partial's bytes, the leaves and each combine level's width, read from the
  graph's layers (``split_every`` of :func:`rfstream.reductions.sum_rows`: dask's default).

On a 2-core machine, N = 4 and 8 oversubscribe the cores: the leaves then do not shrink, but
the costs that do not shrink with workers (submission, the tree, the trip) are what this
measures.  The model built on these figures: docs/scaling.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent
RECORDS = []  # one dict per pass, in order


def pass_name(fn):
    """The name of a pass's chunk function, unwrapped from the partials around it."""
    while isinstance(fn, partial):
        inner = fn.keywords.get("chunk")
        spec = fn.keywords.get("spec")
        if inner is None and spec is not None and hasattr(spec, "chunk"):
            inner = spec.chunk  # a gamma grid's group_chunk: the pass's own chunk inside
        fn = inner if inner is not None else fn.func
    return getattr(fn, "__name__", type(fn).__name__)


def graph_facts(collections):
    """Per collection: the pass's chunk function, the partial's bytes, the leaves and the
    tree's levels (tasks per combine layer, the root last), from the graph's layers."""
    facts = []
    for c in collections:
        graph = c.__dask_graph__()
        layers = getattr(graph, "layers", {})
        levels = [(name, len(layer)) for name, layer in layers.items()
                  if "-partial-" in name or "-aggregate-" in name]
        levels.sort(key=lambda item: -item[1])
        leaves = [len(layer) for name, layer in layers.items() if name.startswith("_apply_block-")]
        names = []
        for name, layer in layers.items():
            if len(layer) == 1 and name not in dict(levels):  # the pass's shared chunk function
                value = next(iter(dict(layer).values()))
                value = getattr(value, "value", value)  # a DataNode's value
                if callable(value):
                    names.append(pass_name(value))
        shape = getattr(c, "shape", ())
        size = int(shape[0]) * 8 if len(shape) == 1 and shape[0] == shape[0] else None
        facts.append({"chunk": names[0] if names else c.name.split("-")[0], "partial_bytes": size,
                      "leaves": max(leaves, default=None), "levels": [w for _, w in levels],
                      "level_names": [n.rsplit("-", 1)[0] for n, _ in levels]})
    return facts


def install_timers():
    """Wrap ``Client.compute`` and ``Client.gather`` to time each pass (:data:`RECORDS`)."""
    from distributed import Client

    compute, gather = Client.compute, Client.gather

    def timed_compute(self, collections, *args, **kwargs):
        many = isinstance(collections, (list, tuple))
        facts = graph_facts(collections if many else [collections])  # before the clock: not the pass's
        record = {"t_call": time.time(), "graph": facts}
        futures = compute(self, collections, *args, **kwargs)
        record["t_submitted"] = time.time()
        record["keys"] = [f.key for f in (futures if many else [futures])]
        RECORDS.append(record)
        return futures

    def timed_gather(self, futures, *args, **kwargs):
        out = gather(self, futures, *args, **kwargs)
        keys = {getattr(f, "key", None) for f in (futures if isinstance(futures, (list, tuple)) else [futures])}
        for record in reversed(RECORDS):
            if keys & set(record["keys"]) and "t_gathered" not in record:
                record["t_gathered"] = time.time()
                break
        return out

    Client.compute, Client.gather = timed_compute, timed_gather


def start_cluster(workdir, n_workers, memory_limit):
    """``(address, processes)``: ``dask scheduler`` and ``dask worker --nworkers N`` on 127.0.0.1."""
    sched_file = workdir / f"scheduler-{n_workers}.json"
    sched_file.unlink(missing_ok=True)
    log = workdir / f"cluster-{n_workers}.log"
    with open(log, "w") as out:  # the processes keep their own copy of the file
        scheduler = subprocess.Popen([BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                                      "--dashboard-address", "127.0.0.1:0", "--scheduler-file", sched_file],
                                     stdout=out, stderr=out)
    deadline, address = time.time() + 60, None
    while address is None and time.time() < deadline:
        try:
            address = json.loads(sched_file.read_text())["address"]
        except (FileNotFoundError, ValueError, KeyError):
            time.sleep(0.1)
    if address is None:
        scheduler.kill()
        raise RuntimeError(f"dask scheduler wrote no address to {sched_file} within 60 s")
    with open(log, "a") as out:
        workers = subprocess.Popen([BIN / "dask", "worker", address, "--nthreads", "1", "--nworkers", str(n_workers),
                                    "--memory-limit", memory_limit, "--host", "127.0.0.1", "--no-dashboard"],
                                   stdout=out, stderr=out)
    return address, [workers, scheduler]


def stop(processes):
    for p in processes:  # the workers' nanny first (it stops its workers), then the scheduler
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _tasks_of(stream, t0, t1):
    """The task stream's compute spans ``(key, start, stop)`` inside ``[t0, t1]``."""
    out = []
    for task in stream:
        for ss in task["startstops"]:
            if ss["action"] == "compute" and t0 <= ss["start"] <= t1:
                out.append((task["key"], ss["start"], ss["stop"]))
    return out


def _key_name(key):
    return key[0] if isinstance(key, tuple) else str(key)


def _is_tree(name):
    return "-partial-" in name or "-aggregate-" in name  # a combine level, or the root (fused with finalize)


def summarize(record, stream, transfers, n_workers):
    """One pass's figures (the module's docstring)."""
    t0, t1 = record["t_call"], record["t_gathered"]
    tasks = _tasks_of(stream, t0, t1)
    combine = [t for t in tasks if _is_tree(_key_name(t[0]))]
    leaves = [t for t in tasks if _key_name(t[0]).startswith("pass_through-")]  # read + chunk, fused
    first = min((t[1] for t in tasks), default=t1)
    last_leaf = max((t[2] for t in leaves), default=first)
    root = max((t[2] for t in tasks), default=last_leaf)
    leaf_sum = sum(t[2] - t[1] for t in leaves)
    by_level = {}
    for key, a, b in combine:
        by_level[_key_name(key)] = max(by_level.get(_key_name(key), 0.0), b - a)
    critical = leaf_sum / n_workers + sum(by_level.values())
    moved = [x for x in transfers if t0 <= x["start"] <= t1]
    wall = t1 - t0
    return {
        "pass": "+".join(g["chunk"] for g in record["graph"]),
        "wall_s": wall, "submit_s": first - t0, "client_compute_call_s": record["t_submitted"] - t0,
        "leaves_s": last_leaf - first, "leaf_sum_s": leaf_sum, "leaf_tasks": len(leaves),
        "leaf_max_s": max((t[2] - t[1] for t in leaves), default=0.0),
        "tail_s": root - last_leaf, "combine_sum_s": sum(b - a for _, a, b in combine),
        "combine_tasks": len(combine), "combine_level_max_s": sorted(by_level.values(), reverse=True),
        "trip_s": t1 - root, "other_tasks": len(tasks) - len(leaves) - len(combine),
        "critical_path_s": critical, "outside_s": wall - critical,
        "moved_bytes": int(sum(x["total"] for x in moved)), "transfers": len(moved),
        "transfer_s": sum(x["duration"] for x in moved),
        "partial_bytes": [g["partial_bytes"] for g in record["graph"]],
        "blocks": [g["leaves"] for g in record["graph"]],
        "levels": [g["levels"] for g in record["graph"]],
    }


def fit_on(address, data, n_workers, D, alphas):
    """Fit by address twice, on fresh workers ("cold": the scheduler and the workers import
    what the graphs name) and again ("warm"); each fit's passes and seconds."""
    import dask

    from rfstream.cluster import connect
    from rfstream.pipeline import fit_dataset

    runs = []
    with connect(address) as client:
        client.wait_for_workers(n_workers, timeout=120)
        client.run(lambda: None)  # every worker answers before the clock starts
        client.get_task_stream(count=1)  # the scheduler's task stream plugin starts recording now
        for state in ("cold", "warm"):
            RECORDS.clear()
            t0 = time.time()
            model, _ = fit_dataset(str(data), n_components=D, alpha=alphas, random_state=0, progress="never")
            wall = time.time() - t0
            stream = client.get_task_stream(start=t0 - 1)
            logs = client.run(lambda dask_worker: list(dask_worker.transfer_incoming_log))
            transfers = [x for log in logs.values() for x in log]
            passes = [summarize(r, stream, transfers, n_workers) for r in RECORDS if "t_gathered" in r]
            solver = model.steps[-1][1]
            runs.append({"workers": n_workers, "state": state, "fit_s": wall, "passes": passes,
                         "split_every_config": dask.config.get("split_every", None),
                         "coef_abs_sum": float(abs(solver.coef_).sum())})
    return runs


def _filled(x, offset, size):
    """A partial of ``size`` float64 that costs only its memory: the tree alone is timed."""
    return np.full(size, float(offset))


def tree_only(address, n_workers, partial_mb, n_blocks, widths, repeats):
    """One ``sum_rows`` pass of ``n_blocks`` partials of ``partial_mb`` MB per width in
    ``widths``, the widths interleaved, ``repeats`` rounds: each pass's figures."""
    import dask
    import dask.array as da

    from rfstream.cluster import compute, connect
    from rfstream.reductions import sum_rows

    size = int(partial_mb * 1e6 / 8)
    X = da.zeros((n_blocks, 1), chunks=(1, 1))
    out = []
    with connect(address) as client:
        client.wait_for_workers(n_workers, timeout=120)
        client.get_task_stream(count=1)
        for r in range(repeats + 1):  # round 0: the workers import what the graph names
            for s in widths:
                RECORDS.clear()
                with dask.config.set(split_every=s):
                    total = sum_rows(partial(_filled, size=size), size, X)
                t0 = time.time()
                value = compute(total)
                assert value[0] == sum(range(n_blocks)), value[0]
                stream = client.get_task_stream(start=t0 - 1)
                logs = client.run(lambda dask_worker: list(dask_worker.transfer_incoming_log))
                transfers = [x for log in logs.values() for x in log]
                figures = summarize(RECORDS[-1], stream, transfers, n_workers)
                if r:
                    out.append({"split_every": s, "round": r, **figures})
                    print(f"s={s} round {r}: wall {figures['wall_s']:.2f} s, tail {figures['tail_s']:.2f} s, "
                          f"trip {figures['trip_s']:.2f} s, moved {figures['moved_bytes'] / 1e6:.0f} MB, "
                          f"levels {figures['levels']}", flush=True)
    return out


def tree_depth(n_blocks, split_every):
    """Levels of dask's tree reduction of ``n_blocks`` partials: the smallest L >= 1 with s**L >= n."""
    depth, reach = 1, split_every
    while reach < n_blocks:
        depth, reach = depth + 1, reach * split_every
    return depth


def model(n, D, W, *, K=1, G=1, flops=70e9, net=1.25e9, mem=10e9, split_every=4, block_rows=65536,
          slices=1, itemsize=8, triangle=True):
    """docs/scaling.md's model of one Gram pass on ``W`` single-threaded workers (seconds, bytes).

    The arithmetic ``2 n D^2 / (W flops)``; the partial ``P = itemsize K G D (D + 1) / 2`` bytes
    (each ``Z'Z`` as its triangle, as rfstream sends it; ``triangle=False``: the whole square
    ``D^2``, as it did before); the row
    blocks ``max(ceil(n / block_rows), W)`` (cut smaller when the workers outnumber them); the
    tree after the last leaf, every level exposed: ``L`` levels, each receiving ``s - 1``
    partials over one worker's link (``net`` bytes/s) and adding them in place (3 P bytes of
    memory traffic per add at ``mem`` bytes/s); ``slices`` independent trees over as many
    column slices of the partial (each moving ``P / slices``), then the result to the client.
    """
    blocks = max(-(-n // block_rows), W)
    P = itemsize * K * G * (D * (D + 1) // 2 if triangle else D * D)
    L = tree_depth(blocks, split_every)
    level = (split_every - 1) * (P / slices) * (1 / net + 3 / mem)
    trip = P / net + (P / net if slices > 1 else 0.0)  # the slices joined on a worker, then to the client
    return {"n": n, "D": D, "W": W, "blocks": blocks, "partial_bytes": P, "depth": L,
            "arithmetic_s": 2.0 * n * D * D / (W * flops), "level_s": level, "tree_s": L * level,
            "trip_s": trip, "moved_bytes": (blocks - 1) * P, "combine_memory_bytes": (split_every + 1) * P}


def crossover(n, D, **kw):
    """The fewest workers at which the tree and the trip take longer than the arithmetic."""
    W = 1
    while W < 10**6:
        m = model(n, D, W, **kw)
        if m["tree_s"] + m["trip_s"] >= m["arithmetic_s"]:
            return W
        W += 1 if W < 100 else W // 100
    return None


#: the fits docs/scaling.md models: (D, K) -- D = 2,000 by 5-fold CV; D = 16,384 by leave-one-out, one
#: Gram (rfstream's memory plan falls back to it where K of them do not fit a worker,
#: rfstream.solvers.memory.use_loo_instead)
MODELLED = ((2000, 5), (16384, 1))


def model_tables():
    """The tables of docs/scaling.md."""
    head = ("| n | D | K | W | blocks | P | depth | arithmetic s | tree + trip s, 10 Gb/s | 100 Gb/s | "
            "moved GB | a combine holds GB |")
    lines = [head, "|---" * 12 + "|"]
    for n in (5_000_000, 50_000_000):
        for D, K in MODELLED:
            for W in (100, 1000):
                a, b = model(n, D, W, K=K), model(n, D, W, K=K, net=12.5e9)
                lines.append(f"| {n / 1e6:g}M | {D} | {K} | {W} | {a['blocks']} | {a['partial_bytes'] / 1e9:.2f} GB | "
                             f"{a['depth']} | {a['arithmetic_s']:.2f} | {a['tree_s'] + a['trip_s']:.2f} | "
                             f"{b['tree_s'] + b['trip_s']:.2f} | {a['moved_bytes'] / 1e9:.0f} | "
                             f"{a['combine_memory_bytes'] / 1e9:.1f} |")
    lines += ["", "| n | K | network | s = 4 (today) | whole squares (before) | s = 2 | s = 8 | s = 4, 8 slices | "
                  "s = 4, float32 |", "|---" * 9 + "|"]
    for n in (5_000_000, 50_000_000):
        for K in (5, 1):
            for net, label in ((1.25e9, "10 Gb/s"), (12.5e9, "100 Gb/s")):
                kw = {"K": K, "net": net}
                cells = [crossover(n, 2000, **kw), crossover(n, 2000, triangle=False, **kw),
                         crossover(n, 2000, split_every=2, **kw),
                         crossover(n, 2000, split_every=8, **kw), crossover(n, 2000, slices=8, **kw),
                         crossover(n, 2000, itemsize=4, **kw)]
                lines.append(f"| {n / 1e6:g}M | {K} | {label} | " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def table(results):
    head = ("| N | pass | wall s | submit s | leaves s (sum/N) | tail s | trip s | outside s | "
            "moved MB | blocks -> levels |")
    lines = [head, "|---" * 10 + "|"]
    for res in results:
        for p in res["passes"]:
            tree = "; ".join(f"{b} -> {','.join(map(str, lv))}" for b, lv in zip(p["blocks"], p["levels"]))
            lines.append(f"| {res['workers']} | {p['pass']} | {p['wall_s']:.2f} | {p['submit_s']:.3f} | "
                         f"{p['leaves_s']:.2f} ({p['leaf_sum_s'] / res['workers']:.2f}) | {p['tail_s']:.3f} | "
                         f"{p['trip_s']:.3f} | {p['outside_s']:.3f} | {p['moved_bytes'] / 1e6:.1f} | {tree} |")
        lines.append(f"| {res['workers']} | **fit ({res['state']})** | {res['fit_s']:.2f} | | | | | | | |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--rows", type=int, default=393216)
    p.add_argument("--chunk-rows", type=int, default=16384)
    p.add_argument("--n-components", type=int, default=1000)
    p.add_argument("--alpha", default="0.01,0.1,1,10")
    p.add_argument("--memory-limit", default="2.5GiB", help="per worker")
    p.add_argument("--split-every", type=int, help="the tree's width (dask's split_every; default: dask's)")
    p.add_argument("--data", help="the Zarr dataset (default: written once under the cache folder)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--model", action="store_true", help="print docs/scaling.md's model tables and exit")
    p.add_argument("--tree-only", type=float, metavar="MB",
                   help="time the tree alone: --blocks partials of MB megabytes, per --widths, --repeats rounds")
    p.add_argument("--blocks", type=int, default=24)
    p.add_argument("--widths", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    if args.model:
        print(model_tables())
        return

    import dask

    from rfstream.bench.measures import load
    from rfstream.bench.scripts import cache_dir, write_json
    from rfstream.datasets.synthetic import write_kdd_like

    install_timers()
    if args.tree_only:
        n = args.workers[-1]
        out = {"command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]), "workers": n,
               "partial_mb": args.tree_only, "blocks": args.blocks, "load_before": load()}
        with tempfile.TemporaryDirectory(prefix="rfstream-many-workers-") as tmp:
            address, processes = start_cluster(Path(tmp), n, args.memory_limit)
            try:
                out["passes"] = tree_only(address, n, args.tree_only, args.blocks, args.widths, args.repeats)
            finally:
                stop(processes)
        out["load_after"] = load()
        if args.json:
            write_json(args.json, out)
        return
    data = Path(args.data) if args.data else cache_dir() / f"kdd_like_{args.rows}_{args.chunk_rows}.zarr"
    if not data.exists():
        write_kdd_like(data, args.rows, rows_per_chunk=args.chunk_rows)
    alphas = [float(a) for a in args.alpha.split(",")]
    out = {"split_every": args.split_every, "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]),
           "rows": args.rows, "chunk_rows": args.chunk_rows, "n_components": args.n_components, "alphas": alphas,
           "load_before": load(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "runs": []}
    split = {} if args.split_every is None else {"split_every": args.split_every}
    with tempfile.TemporaryDirectory(prefix="rfstream-many-workers-") as tmp, dask.config.set(split):
        for n in args.workers:
            address, processes = start_cluster(Path(tmp), n, args.memory_limit)
            try:
                out["runs"].extend(fit_on(address, data, n, args.n_components, alphas))
            finally:
                stop(processes)
            print(table(out["runs"][-2:]), flush=True)
            if args.json:  # after each N: a run cut short keeps what it measured
                write_json(args.json, out)
    out["load_after"] = load()
    print(table([r for r in out["runs"] if r["state"] == "warm"]))
    if args.json:
        write_json(args.json, out)


if __name__ == "__main__":
    main()
