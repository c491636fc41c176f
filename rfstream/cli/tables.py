"""The short tables a person reads on a terminal: ``fit``'s outcome and ``info``'s model,
dataset or predictions, each from the same dict its ``--format json`` prints whole.

A table says what was chosen, the search's best rows, where it was saved and what to run
next; the JSON holds everything else (``--format json``, and whenever stdout is not a
terminal, so that scripts read what they always read).
"""
from __future__ import annotations

import math

from .options import printable

#: scores where greater is better (:data:`rfstream.solvers.ridge.cv.GREATER_IS_BETTER`, without importing it)
GREATER_IS_BETTER = ("roc_auc", "log_evidence")
#: the search's rows a table shows
BEST_ROWS = 5
#: the parameters of each step ``info`` shows (the JSON has them all)
SHOWN_PARAMS = ("kernel", "n_components", "gamma", "n_random_features", "alpha", "loss", "cv", "select",
                "solver", "method")


def _number(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _list(value):
    return ",".join(map(_number, value)) if isinstance(value, (list, tuple)) else _number(value)


def search_rows(cv, limit=BEST_ROWS):
    """The lines of the search's ``limit`` best candidates (best first), and how many there were."""
    scoring = cv.get("scoring", "score")
    scores = cv.get("mean_score") or []
    if not scores:
        return []
    greater = scoring in GREATER_IS_BETTER
    order = sorted(range(len(scores)), key=lambda k: (math.isnan(scores[k]), -scores[k] if greater else scores[k]))
    columns = [name for name in ("gamma", "n_components", "alpha") if name in cv]
    heads = {"gamma": "gamma", "n_components": "D", "alpha": "alpha"}
    spread = "std_score" in cv and any(not math.isnan(v) for v in cv["std_score"])

    def cell(name, k):
        if name == "gamma" and "gamma_label" in cv:
            return f"{_number(cv['gamma'][k])} ({cv['gamma_label'][k]})"
        return _number(cv[name][k])

    rows = [[cell(name, k) for name in columns] + [_number(scores[k]) + (f" +- {_number(cv['std_score'][k])}"
                                                                      if spread else "")]
            for k in order[:limit]]
    header = [heads[name] for name in columns] + [scoring + (" (greater is better)" if greater else "")]
    widths = [max(len(r[j]) for r in rows + [header]) for j in range(len(header))]
    lines = [f"search: {len(scores)} candidates, the best {min(limit, len(scores))}"]
    lines += ["    " + "  ".join(f"{text:<{w}}" for text, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return lines


#: a holdout's entries that say how it was drawn, not how the model did
_HOLDOUT_SETTINGS = ("fraction", "random_state", "rows", "metric", "value", "predict_seconds", "interval_level")
#: solvers whose model is a transformer (``rfstream transform``)
TRANSFORMERS = (None, "kpca")


def holdout_line(holdout):
    """The held-out rows' metrics in one line."""
    metrics = {k: v for k, v in holdout.items() if k not in _HOLDOUT_SETTINGS and isinstance(v, (int, float))}
    return f"holdout ({holdout.get('rows', 0):,} rows): " + ", ".join(f"{k} {_number(v)}" for k, v in metrics.items())


def next_steps(model, task, transformer=False):
    """What to run next with a saved model."""
    if model is None:
        return []
    if transformer:
        return [f"next: rfstream transform {model} DATA.zarr --out FEATURES.zarr"]
    lines = [f"next: rfstream evaluate {model} TEST.zarr", f"      rfstream predict {model} DATA.zarr --out PRED.zarr"
             + (" --scores" if task == "classification" else "")]
    return lines


def fit_table(summary, *, data, features, solver, task):
    """``rfstream fit``'s summary (:meth:`rfstream.jobs.FitJob.summary`) as a short table."""
    transformer = solver in TRANSFORMERS
    what = f"{features} features" + ("" if solver is None else f" + {solver}") + \
        (f", {task}" if task and not transformer else "")
    lines = [f"fitted {what} on {data}: {summary['rows']:,} rows in {summary['fit_seconds']:.1f} s, "
             f"{summary.get('passes', '?')} passes" + (f" ({summary['passes_reused']} resumed from the checkpoint)"
                                                        if summary.get("passes_reused") else "")]
    chosen = [f"{name}={_list(summary[name])}" for name in ("gamma", "n_components", "alpha")
              if summary.get(name) is not None]
    cv = summary.get("cv")
    if cv:
        chosen.append(f"{cv['scoring']} {_number(cv.get('best_score'))}")
    if chosen:
        lines.append("chosen: " + ", ".join(chosen))
    if summary.get("standardize"):  # what --standardize auto decided
        lines.append(f"standardize: {summary['standardize']}")
    if summary.get("edge"):
        lines.append("  at the edge of its list: " + ", ".join(f"{k} ({v})" for k, v in summary["edge"].items()))
    if summary.get("smallest_n_components_within_1se") not in (None, summary.get("n_components")):
        lines.append(f"  the smallest D within one standard error: {summary['smallest_n_components_within_1se']}")
    if cv:
        lines += search_rows(cv)
    if summary.get("holdout"):
        lines.append(holdout_line(summary["holdout"]))
    if summary.get("explained_variance_ratio"):
        ratios = summary["explained_variance_ratio"]
        lines.append(f"explained variance: {sum(ratios):.4g} in {len(ratios)} components")
    if summary.get("calibration"):
        lines.append("calibrated: " + ", ".join(summary["calibration"].get("outputs", [])))
    lines.append(f"saved to {summary['model']}" if summary.get("model") else "not saved")
    if summary.get("report"):
        lines.append(f"report: {summary['report']}")
    lines += next_steps(summary.get("model"), task, transformer=transformer)
    lines.append("everything: --format json")
    return "\n".join(printable(line) for line in lines)


def _step_line(name, step):
    params = step.get("params", {})
    shown = ", ".join(f"{key}={_list(params[key])}" for key in SHOWN_PARAMS if params.get(key) is not None)
    return f"    {name:<12}{step['class'].rsplit('.', 1)[-1]}" + (f" ({shown})" if shown else "")


def model_table(info):
    """``rfstream info MODEL``'s JSON as a short table."""
    meta = info.get("metadata") or {}
    dataset = meta.get("dataset") or {}
    lines = [f"model {info['model']} (rfstream {info.get('rfstream_version')}, format {info['format_version']})"]
    if dataset:
        classes = dataset.get("classes")
        lines.append(f"trained on {dataset.get('path')}: {dataset.get('n_rows', 0):,} rows x "
                     f"{dataset.get('n_features')} features, {dataset.get('task')}"
                     + (f", {len(classes)} classes" if classes else "")
                     + (f" in {meta['fit_seconds']:.1f} s" if meta.get("fit_seconds") is not None else ""))
    steps = info.get("estimator")
    if isinstance(steps, list):
        lines.append("pipeline:")
        lines += [_step_line(name, step) for name, step in steps]
    elif isinstance(steps, dict):
        lines.append("estimator:")
        lines.append(_step_line("", steps))
    selection = meta.get("selection") or {}
    if selection:
        chosen = [f"{name}={_list(selection[name])}" for name in ("gamma", "n_components", "alpha")
                  if selection.get(name) is not None]
        lines.append("chosen: " + ", ".join(chosen + [f"{selection['scoring']} {_number(selection.get('best_score'))}"]))
        lines += search_rows({"scoring": selection["scoring"], **selection.get("cv", {})})
    if meta.get("holdout"):
        lines.append(holdout_line(meta["holdout"]))
    if meta.get("calibration"):
        lines.append("calibrated: " + ", ".join(meta["calibration"].get("outputs", [])))
    last = steps[-1] if isinstance(steps, list) and steps else ("", steps or {})
    transformer = last[0] != "solver" or last[1].get("class", "").endswith("KernelPCA")
    lines += next_steps(info["model"], dataset.get("task"), transformer=transformer)
    lines.append("everything: --format json")
    return "\n".join(printable(line) for line in lines)


def dataset_table(info):
    """``rfstream info DATA``'s JSON (:func:`rfstream.io.dataset_info`) as a short table."""
    attrs = info.get("attrs") or {}
    rows, width = info["shape"]
    lines = [f"dataset {info['path']}: {rows:,} rows x {width} features ({info['dtype']})"
             + (f", from {attrs['source']}" if attrs.get("source") else "")]
    task = attrs.get("task")
    if task == "classification" and attrs.get("classes") is not None:
        counts = attrs.get("class_counts") or {}
        shown = ", ".join(f"{c} ({counts[c]:,})" if c in counts else str(c) for c in attrs["classes"][:12])
        more = f", ... ({len(attrs['classes'])} in all)" if len(attrs["classes"]) > 12 else ""
        lines.append(f"label: column {attrs.get('label_column')}, classification: {shown}{more}")
    elif task:
        lines.append(f"label: column {attrs.get('label_column')}, {task}")
    elif info.get("y_dtype") is None:
        lines.append("label: none")
    if attrs.get("categorical"):
        lines.append("one-hot: " + ", ".join(f"{k} ({len(v)})" for k, v in attrs["categorical"].items()))
    if attrs.get("missing_filled"):
        lines.append("missing, filled: " + ", ".join(f"{k} ({v})" for k, v in attrs["missing_filled"].items()))
    lines.append(f"next: rfstream fit {info['path']} --out MODEL")
    lines.append("everything: --format json")
    return "\n".join(printable(line) for line in lines)


def plain_table(info):
    """Any other small JSON (``info`` of predictions) as ``key: value`` lines."""
    return "\n".join(printable(f"{key}: {value}") for key, value in info.items())
