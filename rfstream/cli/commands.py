"""What each ``rfstream`` subcommand does with its parsed arguments.

Thin: every computation is a call into :mod:`rfstream.pipeline`, :mod:`rfstream.io`
or :mod:`rfstream.bench`; this module turns arguments into those calls and their
results into JSON on stdout.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from .. import io, pipeline
from .options import UserError, split_params


def _write_json(data, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _print_json(data):
    print(json.dumps(data, indent=2))


def cmd_convert(args):
    t0 = time.perf_counter()
    summary = io.convert(
        args.src, args.dst, label_column=args.label_column, positive_class=args.positive,
        rows_per_chunk=args.rows_per_chunk, header={"auto": "auto", "yes": True, "no": False}[args.header],
        task=args.task, like=args.like, overwrite=args.overwrite,
    )
    if not args.quiet:
        info = io.dataset_info(args.dst)
        _print_json({"dataset": str(args.dst), "shape": info["shape"], "task": info["attrs"].get("task"),
                     "classes": info["attrs"].get("classes"), "seconds": round(time.perf_counter() - t0, 2)})
    return summary


def cmd_fit(args):
    task = io.dataset_info(args.data)["attrs"].get("task")
    if task not in pipeline.TASKS:
        raise UserError(f"{args.data} has no labels (task={task!r}); fit needs a labelled dataset.")
    feature_params, solver_params = split_params(args, args.features, args.solver, task)
    model, meta = pipeline.fit_dataset(
        args.data, features=args.features, solver=args.solver, standardize=not args.no_standardize,
        out=args.out, overwrite=args.overwrite, feature_params=feature_params, solver_params=solver_params,
    )
    if not args.quiet:
        solver = model.named_steps["solver"]
        _print_json({"model": str(args.out), "rows": meta["dataset"]["n_rows"],
                     "alpha": getattr(solver, "alpha_", solver.alpha),
                     "gamma": getattr(model.named_steps["features"], "gamma_", None),
                     "fit_seconds": meta["fit_seconds"]})


def cmd_evaluate(args):
    model, meta = pipeline.load_fitted(args.model)
    result = pipeline.evaluate_dataset(model, meta, args.data)
    result["model"] = str(args.model)
    out = args.out or Path(args.model) / f"metrics-{Path(args.data).stem}.json"
    result["metrics_file"] = str(out)
    _write_json(result, out)
    _print_json(result)


def cmd_predict(args):
    rows = pipeline.predict_dataset(args.model, args.data, args.out, overwrite=args.overwrite)
    if not args.quiet:
        _print_json({"predictions": str(args.out), "rows": rows})


def cmd_info(args):
    import zarr

    path = Path(args.path)
    if (path / "model.json").exists():
        doc = io.read_model_json(path)
        _print_json({"model": str(path), "format_version": doc["format_version"],
                     "rfstream_version": doc.get("rfstream_version"), "metadata": doc.get("metadata"),
                     "estimator": _estimator_summary(doc["estimator"])})
    elif (path / "y_pred").exists():
        pred = zarr.open_group(str(path), mode="r")
        _print_json({"predictions": str(path), "shape": list(pred["y_pred"].shape),
                     "dtype": str(pred["y_pred"].dtype), "attrs": dict(pred.attrs)})
    else:
        _print_json(io.dataset_info(path))


def _estimator_summary(spec):
    if "steps" in spec:
        return [[name, _estimator_summary(step)] for name, step in spec["steps"]]
    params = {k: v for k, v in spec.get("params", {}).items() if not isinstance(v, dict)}
    return {"class": spec["$estimator"], "params": params}


def cmd_demo(args):
    from ..datasets import registry

    with tempfile.TemporaryDirectory(prefix="rfstream-demo-") as tmp:
        work = Path(args.workdir) if args.workdir else Path(tmp)
        entry = registry.get("magic_demo")
        print(f"rfstream demo: MAGIC gamma telescope data ({entry.train}, {entry.rows[0]:,} rows) -> {work}")
        data, _ = registry.prepare("magic_demo", work, rows_per_chunk=4096)
        X_tr, X_te, y_tr, y_te = registry.train_test("magic_demo", work, rows_per_chunk=4096,
                                                     random_state=args.random_state)
        attrs = io.dataset_info(data)["attrs"]
        print(f"split: {X_tr.shape[0]} training rows, {X_te.shape[0]} test rows; "
              f"fitting Gaussian RFF (D={args.n_components}) + ridge on {X_tr.numblocks[0]} chunks")
        model, meta = pipeline.fit_dataset(
            data, n_components=args.n_components, alpha=[0.1, 1.0, 10.0, 100.0],
            random_state=args.random_state, X=X_tr, y=y_tr, attrs=attrs,
            out=work / "model" if args.workdir else None, overwrite=True)
        result = pipeline.evaluate_dataset(model, meta, data, X=X_te, y=y_te, attrs=attrs)
        print(f"alpha chosen by 5-fold CV: {model.named_steps['solver'].alpha_:g}; "
              f"fit {meta['fit_seconds']:.1f} s")
        print(f"test error: {result['value']:.4f} ({result['value'] * 100:.2f}% of {result['rows']} rows)")
    return result


def cmd_bench(args):
    from ..bench import main as bench_main

    bench_main(args)
