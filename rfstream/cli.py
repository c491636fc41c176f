"""The ``rfstream`` command line: convert | fit | predict | evaluate | info | demo | bench.

Every subcommand that computes takes ``--scheduler`` (an address, ``threads``,
or nothing for an embedded LocalCluster; also ``$RFSTREAM_SCHEDULER``) and
``--quiet``.  User errors print one line, ``rfstream: error: ...``, and exit
with code 2; set ``RFSTREAM_DEBUG=1`` to see the traceback instead.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

EXIT_USER_ERROR = 2


class UserError(ValueError):
    """A problem with the command's input that the user can fix."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2) instead of the usage block."""

    def error(self, message):
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --- small helpers -------------------------------------------------------------

def _alpha(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--alpha must be a number or a comma-separated list; got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"--alpha values must be >= 0; got {text!r}")
    return values[0] if len(values) == 1 else values


def _positive_or_auto(flag, words=("auto",)):
    """argparse type: a positive float or one of ``words`` for ``flag``."""

    def parse(text):
        if text in words:
            return text
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} must be a positive number or {' or '.join(map(repr, words))}; got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{flag} must be positive; got {text!r}")
        return value

    return parse


_gamma = _positive_or_auto("--gamma", ("auto", "paper"))  # "paper": cnm's Section 7 rule


def _label_column(text):
    if text in ("first", "last", "none"):
        return None if text == "none" else text
    try:
        return int(text)
    except ValueError:
        return text


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


def _schema_check(meta, attrs, X, data_path):
    trained = meta.get("dataset", {})
    names = trained.get("feature_names")
    if X.shape[1] != trained.get("n_features", X.shape[1]):
        raise UserError(
            f"{data_path} has {X.shape[1]} features but the model was trained on "
            f"{trained.get('n_features')}; convert it with `rfstream convert SRC DST --like TRAIN.zarr`."
        )
    if names and attrs.get("feature_names") and list(attrs["feature_names"]) != list(names):
        raise UserError(
            f"{data_path} has different feature columns than the training data; convert it "
            "with `rfstream convert SRC DST --like TRAIN.zarr`."
        )


# --- subcommands -----------------------------------------------------------------

def cmd_convert(args):
    from . import io

    t0 = time.perf_counter()
    summary = io.convert(
        args.src,
        args.dst,
        label_column=args.label_column,
        positive_class=args.positive,
        rows_per_chunk=args.rows_per_chunk,
        header={"auto": "auto", "yes": True, "no": False}[args.header],
        task=args.task,
        like=args.like,
        overwrite=args.overwrite,
    )
    if not args.quiet:
        info = io.dataset_info(args.dst)
        _print_json({"dataset": str(args.dst), "shape": info["shape"], "task": info["attrs"].get("task"),
                     "classes": info["attrs"].get("classes"), "seconds": round(time.perf_counter() - t0, 2)})
    return summary


def fit_dataset(data, *, features="rff", n_components=1000, kernel=None, gamma="auto",
                sampler="mc", variant="cos", solver="ridge", alpha=None, cv=5, random_state=0,
                standardize=True, out=None, overwrite=False, X=None, y=None, attrs=None,
                n_random_features=None, power_iter=None, loss=None, epochs=None, sgd_solver=None,
                **feature_options):
    """Fit a model on a Zarr dataset (or given dask arrays) and save it to ``out``.

    ``alpha`` (None: the solver's default), ``cv``, ``loss`` and ``epochs`` go
    to the solvers that take them (ridge: alpha, cv; sgd: alpha, loss, max_iter);
    ``sgd_solver`` is the ``solver`` of StreamingSGDClassifier ("sgd" or "newton").
    ``n_random_features``, ``power_iter`` and ``feature_options`` (constructor
    parameters of the feature map, see :data:`rfstream.models.FEATURE_OPTIONS`)
    go to the feature map; one it does not take is a user error.
    """
    from . import io
    from .models import SOLVERS, make_model, onehot_columns
    from .persist import save_model

    if X is None:
        X, y = io.open_dataset(data)
        attrs = io.dataset_info(data)["attrs"]
    task = attrs.get("task")
    if y is None or task not in ("classification", "regression"):
        raise UserError(f"{data} has no labels (task={task!r}); fit needs a labelled dataset.")
    if out is not None and Path(out).exists() and not overwrite:
        raise FileExistsError(f"{out} already exists; pass --overwrite to replace it.")
    if power_iter is not None:
        feature_options["n_power_iter"] = power_iter
    feature_params = _feature_params(
        features, n_components=n_components, kernel=kernel, gamma=gamma, sampler=sampler,
        variant=variant, random_state=random_state, n_random_features=n_random_features,
        **feature_options)
    model = make_model(
        task,
        features=features,
        solver=solver,
        standardize=standardize,
        passthrough=onehot_columns(attrs),
        feature_params=feature_params,
        solver_params=_solver_params(SOLVERS.get(solver, {}).get(task), alpha=alpha, cv=cv,
                                     random_state=random_state, loss=loss, max_iter=epochs,
                                     solver=sgd_solver),
    )
    t0 = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    meta = {
        "dataset": {
            "path": str(data),
            "n_rows": int(X.shape[0]),
            "n_features": int(X.shape[1]),
            "task": task,
            "classes": attrs.get("classes"),
            "feature_names": attrs.get("feature_names"),
            "categorical": attrs.get("categorical"),
        },
        "fit_seconds": round(seconds, 3),
    }
    if out is not None:
        save_model(model, out, metadata=meta, overwrite=overwrite)
    return model, meta


def _feature_params(features, **params):
    """The given (not None) parameters that the feature map ``features`` takes.

    The options most maps share in the CLI (kernel, gamma, sampler, variant)
    are dropped silently at their usual values when the map has no such
    parameter (``--kernel`` has no CLI default, so an unset kernel keeps each
    map's own, e.g. rff+binning's laplacian); any other parameter the map does
    not take is a user error that names its flag.
    """
    from .models import FEATURE_OPTIONS, FEATURES

    params = {k: v for k, v in params.items() if v is not None}
    if features not in FEATURES:
        return params  # make_model reports the unknown name
    accepted = FEATURES[features]().get_params()
    shared_defaults = {"kernel": "gaussian", "gamma": "auto", "sampler": "mc", "variant": "cos",
                       "n_components": 1000}  # binning has no n_components
    out = {}
    for key, value in params.items():
        if key in accepted:
            out[key] = value
        elif shared_defaults.get(key, object()) != value:
            flag = FEATURE_OPTIONS.get(key, "--" + key.replace("_", "-"))
            raise UserError(f"{flag} does not apply to --features {features}.")
    return out


def _solver_params(solver_cls, **params):
    """The given (not None) parameters that ``solver_cls`` accepts; a parameter it
    does not take but that was given explicitly is a user error."""
    params = {k: v for k, v in params.items() if v is not None}
    if solver_cls is None:
        return params
    from .models import SOLVERS

    accepted = solver_cls().get_params()
    # ridge has a max_iter and a solver of its own (CG): these flags are SGD's only
    is_sgd = solver_cls in SOLVERS["sgd"].values()
    for key, flag in (("loss", "--loss"), ("max_iter", "--epochs"), ("solver", "--sgd-solver")):
        if key in params and (not is_sgd or key not in accepted):
            raise UserError(f"{flag} does not apply to {solver_cls.__name__}; it is an option of "
                            "--solver sgd (classification).")
    return {k: v for k, v in params.items() if k in accepted}


def cmd_fit(args):
    from .models import FEATURE_OPTIONS

    # every feature-map option comes from its flag in the registry (--power-iter -> power_iter)
    feature_options = {param: getattr(args, flag[2:].replace("-", "_"))
                       for param, flag in FEATURE_OPTIONS.items()}
    model, meta = fit_dataset(
        args.data, features=args.features, n_components=args.n_components, solver=args.solver,
        alpha=args.alpha, cv=args.cv, random_state=args.random_state,
        standardize=not args.no_standardize, out=args.out, overwrite=args.overwrite,
        loss=args.loss, epochs=args.epochs, sgd_solver=args.sgd_solver, **feature_options,
    )
    if not args.quiet:
        solver = model.named_steps["solver"]
        _print_json({"model": str(args.out), "rows": meta["dataset"]["n_rows"],
                     "alpha": getattr(solver, "alpha_", solver.alpha),
                     "gamma": getattr(model.named_steps["features"], "gamma_", None),
                     "fit_seconds": meta["fit_seconds"]})


def _load(model_path):
    from .persist import load_model, read_model_json

    return load_model(model_path), read_model_json(model_path).get("metadata", {})


def evaluate_dataset(model, meta, data, *, X=None, y=None, attrs=None):
    """Error rate (classification) or relative RMSE (regression) on a dataset, one pass."""
    from . import io
    from .cluster import compute
    from .metrics import error_counts, squared_error_sums

    if X is None:
        X, y = io.open_dataset(data)
        attrs = io.dataset_info(data)["attrs"]
    if y is None:
        raise UserError(f"{data} has no labels; use `rfstream predict` instead of evaluate.")
    _schema_check(meta, attrs, X, data)
    task = meta.get("dataset", {}).get("task")
    t0 = time.perf_counter()
    pred = model.predict(X)
    if task == "classification":
        wrong, n = error_counts(y, pred)
        value = float(compute(wrong)) / max(n, 1)
        result = {"metric": "error_rate", "value": value}
    else:
        sse, norm = compute(*squared_error_sums(y, pred))
        result = {"metric": "relative_rmse", "value": float((sse / norm) ** 0.5)}
    result.update({"task": task, "rows": int(X.shape[0]), "n_unseen_labels": attrs.get("n_unseen_labels", 0),
                   "predict_seconds": round(time.perf_counter() - t0, 3),
                   "fit_seconds": meta.get("fit_seconds"), "data": str(data)})
    return result


def cmd_evaluate(args):
    model, meta = _load(args.model)
    result = evaluate_dataset(model, meta, args.data)
    result["model"] = str(args.model)
    out = args.out or Path(args.model) / f"metrics-{Path(args.data).stem}.json"
    result["metrics_file"] = str(out)
    _write_json(result, out)
    _print_json(result)


def cmd_predict(args):
    from . import io
    from .predictions import write_predictions

    model, meta = _load(args.model)
    X, _ = io.open_dataset(args.data)
    _schema_check(meta, io.dataset_info(args.data)["attrs"], X, args.data)
    pred = model.predict(X)
    write_predictions(pred, args.out, attrs={"model": str(args.model), "data": str(args.data),
                                             "task": meta.get("dataset", {}).get("task"),
                                             "classes": meta.get("dataset", {}).get("classes")},
                      overwrite=args.overwrite)
    if not args.quiet:
        _print_json({"predictions": str(args.out), "rows": int(X.shape[0])})


def cmd_info(args):
    from . import io
    from .persist import read_model_json

    path = Path(args.path)
    if (path / "model.json").exists():
        doc = read_model_json(path)
        _print_json({"model": str(path), "format_version": doc["format_version"],
                     "rfstream_version": doc.get("rfstream_version"), "metadata": doc.get("metadata"),
                     "estimator": _estimator_summary(doc["estimator"])})
    elif (path / "y_pred").exists():
        import zarr

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
    from . import io
    from .data import demo_path
    from .preprocess import train_test_split

    with tempfile.TemporaryDirectory(prefix="rfstream-demo-") as tmp:
        work = Path(args.workdir) if args.workdir else Path(tmp)
        data = work / "magic04.zarr"
        src = demo_path()
        print(f"rfstream demo: MAGIC gamma telescope data ({src.name}, 19,020 rows) -> {data}")
        io.convert(str(src), str(data), rows_per_chunk=4096, overwrite=True)
        X, y = io.open_dataset(data)
        attrs = io.dataset_info(data)["attrs"]
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=args.random_state)
        print(f"split: {X_tr.shape[0]} training rows, {X_te.shape[0]} test rows; "
              f"fitting Gaussian RFF (D={args.n_components}) + ridge on {X.numblocks[0]} chunks")
        model, meta = fit_dataset(data, n_components=args.n_components, alpha=[0.1, 1.0, 10.0, 100.0],
                                  random_state=args.random_state, X=X_tr, y=y_tr, attrs=attrs,
                                  out=work / "model" if args.workdir else None, overwrite=True)
        result = evaluate_dataset(model, meta, data, X=X_te, y=y_te, attrs=attrs)
        print(f"alpha chosen by 5-fold CV: {model.named_steps['solver'].alpha_:g}; "
              f"fit {meta['fit_seconds']:.1f} s")
        print(f"test error: {result['value']:.4f} ({result['value'] * 100:.2f}% of {result['rows']} rows)")
    return result


def cmd_bench(args):
    from .bench import main as bench_main

    bench_main(args)


# --- parser -------------------------------------------------------------------------

def _common(p, compute=True):
    p.add_argument("--quiet", action="store_true", help="no progress bars or summaries")
    if compute:
        p.add_argument("--scheduler", default=None,
                       help="scheduler address (tcp://host:8786), 'threads', or leave out for an "
                            "embedded local cluster (also $RFSTREAM_SCHEDULER)")


def build_parser():
    from .kernels import KERNELS
    from .models import FEATURES, SOLVERS
    from .samplers import SAMPLERS

    parser = _Parser(prog="rfstream", description="Kernel machines with random features on Dask.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("convert", help="CSV / LIBSVM / npy / npz -> Zarr dataset")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--label-column", type=_label_column, default="last",
                   help="'last' (default), 'first', a 0-based index, a header name, or 'none'")
    p.add_argument("--positive", default=None, help="binary task: this label vs the rest")
    p.add_argument("--rows-per-chunk", type=int, default=65536)
    p.add_argument("--header", choices=["auto", "yes", "no"], default="auto")
    p.add_argument("--task", choices=["auto", "classification", "regression"], default="auto")
    p.add_argument("--like", default=None, help="encode with the schema of this training dataset")
    p.add_argument("--overwrite", action="store_true")
    _common(p, compute=False)
    p.set_defaults(func=cmd_convert, uses_cluster=False)

    p = sub.add_parser("fit", help="fit a model on a Zarr dataset")
    p.add_argument("data")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--features", choices=sorted(FEATURES), default="rff")
    p.add_argument("--kernel", choices=sorted(KERNELS), default=None,
                   help="kernel of the random features (default: the map's own, gaussian for all "
                        "but rff+binning, whose Fourier half is laplacian like its bins)")
    p.add_argument("--n-components", type=int, default=1000)
    p.add_argument("--gamma", type=_gamma, default="auto",
                   help="kernel bandwidth: a number, 'auto' (the papers' nearest-neighbour rule) or, "
                        "for cnm, 'paper' (its Section 7 rule, 4 x 'auto')")
    p.add_argument("--sampler", choices=sorted(SAMPLERS), default="mc")
    p.add_argument("--variant", choices=["cos", "cossin"], default="cos")
    p.add_argument("--n-random-features", type=int, default=None,
                   help="tefm-g/tefm-s: random Fourier features d (default 4 x --n-components)")
    p.add_argument("--power-iter", type=int, default=None,
                   help="tefm-g/tefm-s: power iterations q (default 1)")
    p.add_argument("--n-candidates", type=int, default=None,
                   help="eerf/lkrf: candidate features M0 (default 10 x --n-components)")
    p.add_argument("--subsample", type=float, default=None,
                   help="eerf/lkrf: fraction of the rows scored, in (0, 1] (default 0.1)")
    p.add_argument("--base", choices=["fourier", "arccos0", "arccos1", "arccos2", "linear"],
                   default=None, help="eerf/lkrf: candidate features (default fourier)")
    p.add_argument("--score-mode", choices=["balanced", "raw"], default=None,
                   help="eerf/lkrf: label score, centred per class (default) or eq. 7 as printed")
    p.add_argument("--rho", type=float, default=None,
                   help="lkrf: chi-square divergence bound of the feature weights (default 1)")
    p.add_argument("--degree", type=int, default=None, help="arccos: kernel degree 0, 1 or 2 (default 1)")
    p.add_argument("--n-pairs", type=int, default=None,
                   help="ses: sketch size r, pairs of rows (default max(4 x --n-components, 1024))")
    p.add_argument("--reg", type=_positive_or_auto("--reg"), default=None,
                   help="ses: lambda_beta, a positive number or 'auto' (default: tuned on held-out pairs)")
    p.add_argument("--weights", choices=["ses", "bq", "uniform"], default=None,
                   help="ses: shrinkage weights (default), Bayesian Quadrature, or uniform (MC/QMC)")
    p.add_argument("--n-grids", type=int, default=None,
                   help="binning, rff+binning: random grids P (default 50)")
    p.add_argument("--n-bins", type=int, default=None,
                   help="binning, rff+binning: hashed bins per grid (default 64)")
    p.add_argument("--objective", choices=["classification", "kernel"], default=None,
                   help="cnm: learn the map for the classifier (default) or to approximate the kernel")
    p.add_argument("--structure", choices=["dense", "circulant"], default=None,
                   help="cnm: dense projection (default) or circulant r learned by FFT gradients")
    p.add_argument("--theta-step", type=float, default=None,
                   help="cnm: constant SGD step of the map (default 0.2; 2.0 for --objective kernel)")
    p.add_argument("--multiclass", choices=["ovr", "crammer-singer", "multinomial"], default=None,
                   help="cnm, more than two classes: multi-class hinge (crammer-singer, the default), "
                        "one-vs-rest hinge or softmax loss")
    p.add_argument("--solver", choices=sorted(SOLVERS), default="ridge")
    p.add_argument("--alpha", type=_alpha, default=None,
                   help="ridge: a value or a comma-separated list (CV), default 1; "
                        "sgd: lambda of the regularized risk, default 1e-4")
    p.add_argument("--loss", choices=["hinge", "log_loss", "squared_hinge"], default=None,
                   help="sgd classification loss (default hinge: Pegasos)")
    p.add_argument("--epochs", type=int, default=None, help="sgd: passes over the data (default 20)")
    p.add_argument("--sgd-solver", choices=["sgd", "newton"], default=None,
                   help="sgd classification: streaming SGD steps (default) or newton (one "
                        "gradient + Hessian pass per iteration; exact, any row order)")
    p.add_argument("--cv", type=int, default=5)
    p.add_argument("--random-state", type=int, default=0)
    p.add_argument("--no-standardize", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    _common(p)
    p.set_defaults(func=cmd_fit, uses_cluster=True)

    p = sub.add_parser("predict", help="predict a Zarr dataset, write a Zarr of predictions")
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")
    _common(p)
    p.set_defaults(func=cmd_predict, uses_cluster=True)

    p = sub.add_parser("evaluate", help="error rate or relative RMSE of a model on a dataset")
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("--out", default=None,
                   help="JSON file for the metrics (default: MODEL/metrics-<DATA name>.json)")
    _common(p)
    p.set_defaults(func=cmd_evaluate, uses_cluster=True)

    p = sub.add_parser("info", help="describe a dataset or a model")
    p.add_argument("path")
    _common(p, compute=False)
    p.set_defaults(func=cmd_info, uses_cluster=False)

    p = sub.add_parser("demo", help="convert, fit and evaluate on the shipped MAGIC dataset")
    p.add_argument("--n-components", type=int, default=500)
    p.add_argument("--random-state", type=int, default=0)
    p.add_argument("--workdir", default=None, help="keep the dataset and model here")
    _common(p)
    p.set_defaults(func=cmd_demo, uses_cluster=True)

    p = sub.add_parser("bench", help="throughput of the fused feature + Gram pass, and vs scikit-learn")
    from .bench import add_arguments

    add_arguments(p)
    _common(p)
    p.set_defaults(func=cmd_bench, uses_cluster=False)
    return parser


USER_ERRORS = (ValueError, TypeError, FileNotFoundError, FileExistsError, NotADirectoryError,
               IsADirectoryError, PermissionError)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    from .cluster import connect, set_progress

    set_progress(not args.quiet)
    try:
        if args.uses_cluster:
            with connect(args.scheduler):
                args.func(args)
        else:
            args.func(args)
    except USER_ERRORS as exc:
        if os.environ.get("RFSTREAM_DEBUG"):
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"rfstream: error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("rfstream: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
