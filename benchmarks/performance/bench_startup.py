"""Start-up time of the ``rfstream`` command, against ``python -c "import numpy"`` in the same run.

    python benchmarks/performance/bench_startup.py --repeats 7 --json runs/startup.json

Each case is a whole process, run ``--repeats`` times (after one warm-up round, not
counted; the cases interleaved), timed from start to exit: CPU is the process's user +
system seconds (``resource.getrusage(RUSAGE_CHILDREN)`` around it), wall its
``time.perf_counter`` seconds.  The medians are printed with each goal:

* ``python -c "import numpy"``: the reference, measured in the same run;
* ``rfstream --version``, ``--help``, ``fit --help``, and argument errors (an unknown
  flag, a bad choice, a missing argument, a bad ``--gamma``): CPU under 0.5 s;
* the first pass of a small fit: ``rfstream fit`` on the shipped MAGIC data (19,020 x 10,
  converted once into ``--workdir``), stderr a pipe (one line per finished pass); wall
  seconds from the start to its first ``rfstream: pass`` line: under 1.5 s;
* an object store that cannot be reached: ``rfstream info s3://nonexistent-bucket/x.zarr``
  with ``AWS_ENDPOINT_URL=http://127.0.0.1:9`` and made-up keys, wall seconds to its
  one-line error: under 5 s;
* ``python -c "import dask.array, sklearn.base, zarr"``: what any fit imports, the floor
  of the first pass (not a goal: where the time goes).

The machine's load average is printed with the table: on a shared machine compare the
rows of one run.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

S3_ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "made-up",
          "AWS_SECRET_ACCESS_KEY": "made-up", "AWS_DEFAULT_REGION": "us-east-1"}


def cases(rfstream, data, out):
    """``{name: (argv, extra environment, goal, what the goal bounds)}``."""
    py = sys.executable
    fit = [*rfstream, "fit", str(data), "--out", str(out), "--overwrite", "--no-checkpoint", "--n-components",
           "200", "--alpha", "1"]
    return {
        "python -c 'import numpy'": ([py, "-c", "import numpy"], {}, None, "cpu"),
        "rfstream --version": ([*rfstream, "--version"], {}, 0.5, "cpu"),
        "rfstream --help": ([*rfstream, "--help"], {}, 0.5, "cpu"),
        "rfstream fit --help": ([*rfstream, "fit", "--help"], {}, 0.5, "cpu"),
        "error: unknown flag": ([*rfstream, "fit", "d.zarr", "--out", "m", "--n_components", "100"], {}, 0.5, "cpu"),
        "error: bad choice": ([*rfstream, "fit", "d.zarr", "--out", "m", "--features", "nope"], {}, 0.5, "cpu"),
        "error: missing argument": ([*rfstream, "fit", "d.zarr"], {}, 0.5, "cpu"),
        "error: bad --gamma": ([*rfstream, "fit", "d.zarr", "--out", "m", "--gamma", "auto*x"], {}, 0.5, "cpu"),
        "fit: first pass line": (fit, {}, 1.5, "first"),
        "info s3://unreachable": ([*rfstream, "info", "s3://nonexistent-bucket/x.zarr"], S3_ENV, 5.0, "wall"),
        "python -c 'import dask.array, sklearn.base, zarr'":
            ([py, "-c", "import dask.array, sklearn.base, zarr"], {}, None, "cpu"),
    }


def run(argv, extra_env):
    """``(cpu seconds, wall seconds, seconds to the first pass line or None, exit code, last
    line of stderr)``."""
    drop = ("RFSTREAM_SCHEDULER", "RFSTREAM_SMALL_DATA", "RFSTREAM_DEBUG", "PYTHONDONTWRITEBYTECODE")
    env = {**{k: v for k, v in os.environ.items() if k not in drop and not k.startswith("AWS_")}, **extra_env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first, last = None, ""
    for line in proc.stderr:
        if first is None and line.startswith("rfstream: pass "):
            first = time.perf_counter() - t0
        last = line.strip() or last
    code = proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, first, code, last


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="runs/startup", help="the converted MAGIC data go here")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", default=None, help="also write the measurements here")
    args = p.parse_args()

    from rfstream.datasets import registry

    data, _ = registry.prepare("magic_demo", args.workdir, test=False)
    script = shutil.which("rfstream", path=str(Path(sys.executable).parent))
    rfstream = [script] if script else [sys.executable, "-m", "rfstream"]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rfstream-startup-") as tmp:
        table = cases(rfstream, data, Path(tmp) / "model")
        runs = {name: [] for name in table}
        for r in range(-1, args.repeats):  # r = -1: a warm-up round (bytecode, page cache), not counted
            for name, (argv, env, _, kind) in table.items():
                result = run(argv, env)
                if result[3] not in (0, 2) or (kind == "first" and result[2] is None):
                    print(f"warning: {name} exited with {result[3]}, left out: {result[4][:200]}", file=sys.stderr)
                elif r >= 0:
                    runs[name].append(result[:4])
    rows = {}
    for name, (argv, env, goal, kind) in table.items():
        cpu, wall, first, codes = zip(*runs[name]) if runs[name] else ((float("nan"),),) * 3 + ((),)
        measured = {"cpu": statistics.median(cpu), "wall": statistics.median(wall),
                    "first": statistics.median(first) if None not in first else None}
        value = measured[kind]
        rows[name] = {"command": " ".join(f"{k}={v}" for k, v in env.items()) + (" " if env else "")
                      + " ".join(Path(a).name if a in (sys.executable, script) else a for a in argv),
                      "cpu_s": round(measured["cpu"], 3), "wall_s": round(measured["wall"], 3),
                      "first_pass_s": None if measured["first"] is None else round(measured["first"], 3),
                      "runs": len(codes), "exit_codes": sorted(set(codes)), "goal": None if goal is None else f"{kind} < {goal} s",
                      "met": None if goal is None or value is None else bool(value < goal)}
    print(f"{'case':<52}{'CPU s':>8}{'wall s':>8}{'1st pass':>10}  goal")
    for name, row in rows.items():
        first = "" if row["first_pass_s"] is None else f"{row['first_pass_s']:.2f}"
        goal = "" if row["goal"] is None else f"{row['goal']}: {'met' if row['met'] else 'NOT met'}"
        print(f"{name:<52}{row['cpu_s']:>8.2f}{row['wall_s']:>8.2f}{first:>10}  {goal}")
    print(f"medians of {args.repeats} runs (less a failed run, warned above); load average {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end; {os.cpu_count()} CPUs; {sys.version.split()[0]}")
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, {"repeats": args.repeats, "load_at_start": load,
                               "load_at_end": os.getloadavg()[0], "rows": rows}, indent=2)


if __name__ == "__main__":
    main()
