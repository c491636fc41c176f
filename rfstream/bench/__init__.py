"""``rfstream bench``: performance against the tools users would otherwise pick.

One run on one machine measures three parts under the same conditions: rfstream's fused pass
against the same run's float32 GEMM (:mod:`~rfstream.bench.fused`), fit + predict end to end
against scikit-learn and dask-ml, and scaling in n on synthetic KDD-shaped data
(:mod:`~rfstream.bench.e2e`), each end-to-end run in its own capped subprocess.  Results go to
``<out>/bench.json`` and PNG plots beside it.  What each part measures and how:
benchmarks/README.md, "rfstream/bench: the harness"; the figures: docs/BENCHMARKS.md.
"""
import json
import os
import platform
import sys
import time
from pathlib import Path

from .cases import DATASETS, METHODS


def add_arguments(p):
    p.add_argument("--datasets", default=None,
                   help="folder of the real datasets (kddcup99/, adult/; default: $RFSTREAM_DATASETS, "
                        "else ../shared/datasets beside the repository or the working directory)")
    p.add_argument("--out", default="rfstream-bench",
                   help="everything the bench writes goes under this folder: bench.json, PNG plots and "
                        "(unless --workdir) the converted datasets in OUT/data")
    p.add_argument("--workdir", default=None, help="converted Zarr datasets are cached here (default: OUT/data)")
    p.add_argument("--parts", nargs="+", default=["fused", "e2e", "scaling"],
                   choices=["fused", "e2e", "scaling"], help="what to measure (default: all three)")
    p.add_argument("--fused-components", type=int, default=2000, help="D of the fused-pass measurement")
    p.add_argument("--repeats", type=int, default=3, help="repeats of the fused pass (median and spread)")
    p.add_argument("--n-components", type=int, nargs="+", default=[500, 2000, 5000],
                   help="D values of the end-to-end comparison")
    p.add_argument("--data", nargs="+", default=list(DATASETS), choices=DATASETS,
                   help="datasets of the end-to-end comparison")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS,
                   help="methods of the end-to-end comparison")
    p.add_argument("--alpha", type=float, default=1.0, help="ridge regularization of every method")
    p.add_argument("--memory-cap", default="10GB",
                   help="address-space cap of every end-to-end and scaling subprocess")
    p.add_argument("--timeout", type=int, default=1200, help="seconds before a subprocess is stopped")
    p.add_argument("--scaling-rows", type=float, nargs="+", default=[1e6, 2e6, 4e6, 8e6],
                   help="row counts of the synthetic data of the scaling measurement")
    p.add_argument("--scaling-components", type=int, default=500, help="D of the scaling measurement")
    p.add_argument("--no-plots", action="store_true", help="write bench.json only, no PNG plots")


def _bytes(text):
    from dask.utils import parse_bytes

    return int(parse_bytes(text))


def main(args):
    from . import e2e, fused, measures, plots  # what measures, imported when the bench runs

    if not args.no_plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError(  # a one-line user error in the CLI, before an hour of measuring
                'rfstream bench draws its plots with matplotlib: pip install "rfstream[plot]", '
                "or pass --no-plots."
            ) from None
    out = Path(args.out)
    workdir = Path(args.workdir) if args.workdir else out / "data"
    wanted = (["kdd99"] if "fused" in args.parts else []) + (list(args.data) if "e2e" in args.parts else [])
    e2e.check_sources(args.datasets, sorted(set(wanted)))  # a missing file fails before anything is written
    cap = _bytes(args.memory_cap)
    out.mkdir(parents=True, exist_ok=True)
    result = {"command": "rfstream bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"]
              else " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")},
              "load_at_start": measures.load(), "memory_cap_bytes": cap}
    try:
        import dask_ml

        result["dask_ml"] = dask_ml.__version__
    except ImportError:
        result["dask_ml"] = "not installed"
    json_path = out / "bench.json"
    if json_path.exists():  # measure one part and keep the others from an earlier run
        old = json.loads(json_path.read_text())
        result.update({k: old[k] for k in ("fused", "e2e", "scaling") if k in old and k not in args.parts})
    paths = e2e.prepare_data(args.datasets, workdir, sorted(set(wanted)))
    parts = {
        "fused": lambda: fused.fused_vs_gemm(paths["kdd99"][0], args.fused_components, args.alpha, args.repeats),
        "e2e": lambda: e2e.end_to_end(paths, args.data, args.n_components, args.methods, args.alpha, cap,
                                  args.timeout),
        "scaling": lambda: e2e.scaling(workdir, args.scaling_rows, args.scaling_components, args.alpha,
                                   cap, args.timeout),
    }
    for part, measure in parts.items():
        if part in args.parts:
            result[part] = measure()
            result["load_at_end"] = measures.load()
            json_path.write_text(json.dumps(result, indent=2) + "\n")  # after each part
    if not args.no_plots:
        plots.plot(result, out)
    print(json.dumps({k: result[k] for k in ("load_at_start", "load_at_end")}, indent=2))
    return result
