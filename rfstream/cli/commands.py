"""What each ``rfstream`` subcommand does with its parsed arguments.

Thin: every computation is a call into :mod:`rfstream.pipeline`, :mod:`rfstream.io`
or :mod:`rfstream.bench`; this module turns arguments into those calls and their
results into JSON on stdout (``evaluate``: a table on a terminal).  Each command
checks what it can before it connects (:func:`_connect`): the dataset's metadata,
and for ``fit`` every parameter of the model, so that a mistake is reported before
a cluster starts or a pass begins; the size of X read there chooses threads or the
embedded cluster (:func:`rfstream.cluster.connect`).
"""
from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path


from .. import io
from ..cluster import connect
from . import resume, tables
from ..options import OPTIONS
from .options import UserError, cli_message, printable


def _write_json(data, location):
    location.write_bytes((json.dumps(data, indent=2) + "\n").encode())


def _source(args, labels=True):
    """Keyword arguments naming where a command's data are (storage, arrays)."""
    out = {"storage_options": args.storage_options, "x_array": args.x_array}
    if labels:
        out["y_array"] = args.y_array
    return out


@contextlib.contextmanager
def _warnings_as_lines(every=True):
    """Collect the warnings of a block and print each distinct one as one line on stderr
    when it ends normally (none when it raises: the error is the command's one line);
    ``every``: each warning, else those Python's filters let through (no library's
    ``DeprecationWarning``).

    ``ResourceWarning`` is left out: it reports an object some library left open (an aiohttp
    session of an object store's filesystem, collected whenever the garbage collector
    runs), nothing the command's user can act on."""
    with warnings.catch_warnings(record=True) as caught:
        if every:
            warnings.simplefilter("always")
        yield
    shown = [w for w in caught if not issubclass(w.category, ResourceWarning)]
    for message in dict.fromkeys(cli_message(w.message) for w in shown):
        print(f"rfstream: warning: {printable(message)}", file=sys.stderr)


def _print_json(data):
    print(json.dumps(data, indent=2))


def _show(data, args, table):
    """``data`` as ``table(data)`` on a terminal (``--format auto``) or with ``--format table``,
    else as the JSON scripts read."""
    if args.format == "table" or (args.format == "auto" and sys.stdout.isatty()):
        print(table(data))
    else:
        _print_json(data)


def _connect(args, X=None, data=None):
    """:func:`rfstream.cluster.connect` for ``--scheduler``, told X's bytes (of the array
    ``X``, or read from the metadata of the dataset ``data``) for the small-data rule."""
    from .. import pipeline

    if X is not None:
        size = int(X.nbytes)
    else:
        size = pipeline.data_bytes(data, storage_options=args.storage_options, x_array=args.x_array)
    from ..devices import check_device

    return connect(args.scheduler, data_bytes=size, device=check_device(getattr(args, "device", "cpu")))


def cmd_convert(args):
    """A small or compressed file streams through this process; a directory or glob of files,
    or one CSV file of several blocks, is converted by Dask tasks, on ``--scheduler``, else by
    the small-data rule with the source's bytes for X's: dask's threads, or the embedded cluster."""
    from ..io.convert import task_bytes

    size = task_bytes(args.src, args.storage_options)
    with connect(args.scheduler, data_bytes=size) if size is not None else contextlib.nullcontext():
        return _convert(args)


def _convert(args):
    t0 = time.perf_counter()
    with _warnings_as_lines():
        summary = io.convert(
            args.src, args.dst, label_column=args.label_column, positive_class=args.positive,
            rows_per_chunk=args.rows_per_chunk, header={"auto": "auto", "yes": True, "no": False}[args.header],
            task=args.task, like=args.like, overwrite=args.overwrite, sep=args.delimiter,
            storage_options=args.storage_options,
        )
    info = io.dataset_info(args.dst, storage_options=args.storage_options)
    label, doubt = label_report(info["attrs"], chosen=args.label_column != "auto" or args.like is not None)
    if doubt:
        print(f"rfstream: warning: {printable(doubt)}", file=sys.stderr)
    if not args.quiet:
        attrs = info["attrs"]
        if attrs.get("task") == "regression":  # the targets' range: one reduction over y
            label["range"] = target_range(args.dst, args.storage_options)
        _print_json({"dataset": str(args.dst), "shape": info["shape"], "task": attrs.get("task"),
                     "label": label, "classes": attrs.get("classes"), "features": info["shape"][1],
                     "one_hot": {name: len(values) for name, values in (attrs.get("categorical") or {}).items()},
                     "missing_filled": attrs.get("missing_filled", {}),
                     "seconds": round(time.perf_counter() - t0, 2)})
    return summary


def target_range(data, storage_options):
    """``[min, max]`` of a regression dataset's targets, reduced on dask's threads."""
    import dask
    import dask.array as da

    _, y = io.open_dataset(data, storage_options=storage_options)
    low, high = dask.compute(da.nanmin(y), da.nanmax(y), scheduler="threads")
    return [float(low), float(high)]


def label_report(attrs, chosen):
    """``(label, doubt)``: which column convert took as the label (its index, the task, the
    number of classes), and a warning when the label was taken by default (the first or the
    last column, :mod:`rfstream.io.guess`) while the only text column is elsewhere: that
    column looks like the label."""
    index = attrs.get("label_column")
    task = attrs.get("task")
    label = {"column": index, "task": task}
    if attrs.get("classes") is not None:
        label["classes"] = len(attrs["classes"])
    text = list(attrs.get("categorical") or {})
    doubt = None
    if not chosen and len(text) == 1 and task == "classification":
        name = text[0]  # a file without a header names its columns c0, c1, ...: pass the index
        flag = name if attrs.get("header") or not name[1:].isdigit() else name[1:]
        doubt = (f"the label is column {index} ({label.get('classes')} classes), taken by "
                 f"default; column {name!r} is the only text column: if it is the label, convert again "
                 f"with --label-column {flag}.")
    return label, doubt


def _standardize(args):
    """``standardize`` of ``--standardize auto|yes|no`` and ``--no-standardize`` (the fit's default
    without either)."""
    from ..catalog import STANDARDIZE_DEFAULT

    if args.no_standardize and args.standardize not in (None, "no"):
        raise UserError(f"--no-standardize and --standardize {args.standardize} contradict each other; "
                        "pass one of them.")
    if args.no_standardize:
        return False
    return {"auto": "auto", "yes": True, "no": False, None: STANDARDIZE_DEFAULT}[args.standardize]


def fit_options(args):
    """The keywords of :func:`rfstream.pipeline.fit_dataset` from ``rfstream fit``'s arguments:
    every option under its own name (:data:`rfstream.options.OPTIONS`), ``--standardize`` (and
    ``--no-standardize``, its ``no``) as ``standardize``, ``--no-checkpoint`` as ``checkpoint=None``."""
    named = {option.name: getattr(args, option.dest) for option in OPTIONS}
    solver = None if args.solver == "none" else args.solver
    return {**named, "features": args.features, "solver": solver, "standardize": _standardize(args),
            "out": args.out, "overwrite": args.overwrite, "task": args.task, "sample_weight": args.sample_weight,
            "checkpoint": resume.checkpoint_location(args), "restart": args.restart,
            "report": True if args.report else None, "holdout": args.holdout, "device": args.device,
            "precision": args.precision, **_source(args)}


def cmd_fit(args):
    from .. import pipeline
    from ..jobs import FitJob
    from ..selection import HEATMAP_FILE
    from ..selection.heatmap import GREATER_IS_BETTER, score_label

    job = FitJob(args.data, **fit_options(args))  # every check before the cluster starts
    if args.dry_run:  # the plan on the workers the fit would have, and no pass
        with _warnings_as_lines(), resume.quiet_client_logs(args.scheduler), _connect(args, X=job.X):
            plan = job.plan()
        _show(plan.as_dict(), args, lambda _: str(plan))
        return
    with _warnings_as_lines(), job.resumable(), resume.quiet_client_logs(args.scheduler), _connect(args, X=job.X):
        job.fit()
        pipeline.score_holdout(job)  # --holdout: one pass over the held-out rows
    scoring = job.meta.get("selection", {}).get("scoring")
    job.save(title=f"{args.features} on {io.as_location(args.data).name}: {score_label(scoring)}"
             + (" (greater is better)" if scoring in GREATER_IS_BETTER else ""))
    if not args.quiet:
        summary = job.summary()
        if job.saved_files:
            summary["report"] = str(io.model_root(args.out, args.storage_options).child(HEATMAP_FILE))
        elif job.meta.get("selection") and not args.report:  # a search, drawn only with matplotlib
            summary["report"] = "not drawn: the heat map of the search needs matplotlib (pip install " \
                                "'rfstream[plot]'; --report insists on it)"
        _show(summary, args, partial(tables.fit_table, data=str(args.data), features=args.features,
                                     solver=None if args.solver == "none" else args.solver,
                                     task=job.meta.get("dataset", {}).get("task")))


def cmd_split(args):
    split = io.DatasetSplit(args.data, args.train, args.test, test_size=args.test_size, stratify=args.stratify,
                            random_state=args.random_state, overwrite=args.overwrite,
                            **_source(args))  # every check before the cluster starts
    with _connect(args, X=split.X):
        summary = split.write()
    if not args.quiet:
        _print_json(summary)


def cmd_evaluate(args):
    from .. import pipeline

    model, meta = pipeline.load_fitted(args.model, storage_options=args.storage_options)
    with _connect(args, data=args.data):
        result = pipeline.evaluate_dataset(model, meta, args.data, interval_level=args.interval_level,
                                           device=args.device, **_source(args))
    result["model"] = str(args.model)
    data_name = io.as_location(args.data).name.split(".")[0] or "data"
    out = io.as_location(args.out or f"{str(args.model).rstrip('/')}/metrics-{data_name}.json",
                         args.storage_options)
    result["metrics_file"] = str(out)
    _write_json(result, out)
    _show(result, args, metrics_table)


def metrics_table(result):
    """The metrics of :func:`rfstream.pipeline.evaluate_dataset` as a short table."""
    lines = [f"{result['data']}: {result['rows']:,} rows, {result['task']}, model {result['model']}"]
    names = ("error_rate", "balanced_error", "auc", "log_loss", "rmse", "relative_rmse", "mae", "r2",
             "interval_coverage", "interval_width")
    for name in names:
        if result.get(name) is None:
            continue
        text = f"{result[name]:.6g}"
        if name == "auc" and result.get("auc_error_bound"):
            text += f" (within {result['auc_error_bound']:.1g})"
        if name == "interval_coverage":
            text += f" (level {result['interval_level']:g})"
        lines.append(f"  {name:<18}{text}")
    lines += _reliability_lines(result.get("reliability"))
    matrix = result.get("confusion_matrix")
    if matrix and len(matrix) <= 12:
        labels = [printable(c) for c in result.get("classes", range(len(matrix)))]
        width = max(len(t) for t in labels + [str(v) for row in matrix for v in row])
        lines.append("  confusion_matrix (rows: true class, columns: predicted)")
        lines.append("    " + " " * width + "".join(f"  {t:>{width}}" for t in labels))
        lines += ["    " + f"{t:>{width}}" + "".join(f"  {v:>{width}}" for v in row)
                  for t, row in zip(labels, matrix)]
    elif matrix:
        lines.append(f"  confusion_matrix: {len(matrix)} x {len(matrix)}, in the JSON")
    lines.append(f"  written to {result['metrics_file']}")
    return "\n".join(printable(line) for line in lines)  # names from the data: no terminal escapes


def _reliability_lines(table):
    """The reliability table's non-empty bins, one line each (:func:`rfstream.metrics.reliability_table`)."""
    if not table:
        return []
    lines = [f"  reliability (probability of the predicted label; calibration error "
             f"{table['calibration_error']:.4g})" if table["calibration_error"] is not None else "  reliability",
             f"    {'bin':<12}{'rows':>10}{'mean p':>10}{'accuracy':>10}"]
    for (low, high), count, mean, right in zip(table["bins"], table["count"], table["mean_predicted"],
                                               table["accuracy"]):
        if count:
            label = f"[{low:.1f}, {high:.1f}{']' if high >= 1 else ')'}"
            lines.append(f"    {label:<12}{count:>10,}{mean:>10.4f}{right:>10.4f}")
    return lines


def cmd_predict(args):
    from .. import pipeline

    with _connect(args, data=args.data):
        rows = pipeline.predict_dataset(args.model, args.data, args.out, overwrite=args.overwrite,
                                        scores=args.scores, std=args.std, interval=args.interval,
                                        device=args.device, **_source(args, labels=False))
    if not args.quiet:
        _print_json({"predictions": str(args.out), "rows": rows})


def cmd_transform(args):
    from .. import pipeline

    with _connect(args, data=args.data):
        shape = pipeline.transform_dataset(args.model, args.data, args.out, overwrite=args.overwrite,
                                           storage_options=args.storage_options, x_array=args.x_array,
                                           device=args.device)
    if not args.quiet:
        _print_json({"dataset": str(args.out), "shape": list(shape)})


def cmd_info(args):
    root = io.model_root(args.path, args.storage_options)
    if root.child("model.json").exists():
        doc = io.read_model_json(root)
        _show({"model": str(args.path), "format_version": doc["format_version"],
               "rfstream_version": doc.get("rfstream_version"), "metadata": doc.get("metadata"),
               "estimator": _estimator_summary(doc["estimator"])}, args, tables.model_table)
    elif root.child("y_pred").exists():
        info = io.dataset_info(args.path, x="y_pred", y=None, storage_options=args.storage_options)
        described = {"predictions": str(args.path), "shape": list(info["shape"]), "dtype": info["dtype"]}
        for name in ("scores", "std", "lower", "upper"):
            if root.child(name).exists():
                found = io.dataset_info(args.path, x=name, y=None, storage_options=args.storage_options)
                described[name] = {"shape": list(found["shape"]), "dtype": found["dtype"]}
        _show({**described, "attrs": info["attrs"]}, args, tables.plain_table)
    else:
        _show(io.dataset_info(args.path, x=args.x_array, y=args.y_array, storage_options=args.storage_options),
              args, tables.dataset_table)


def _estimator_summary(spec):
    if "steps" in spec:
        return [[name, _estimator_summary(step)] for name, step in spec["steps"]]
    params = {k: v for k, v in spec.get("params", {}).items() if not isinstance(v, dict)}
    return {"class": spec["$estimator"], "params": params}


def cmd_demo(args):
    from .. import pipeline
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
        with _warnings_as_lines(), _connect(args, X=X_tr):
            model, meta = pipeline.fit_dataset(
                data, n_components=args.n_components, alpha=[0.001, 0.01, 0.1, 1.0, 10.0, 100.0],
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
