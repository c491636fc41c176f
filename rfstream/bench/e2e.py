"""Parts 2 and 3 of ``rfstream bench``: end to end against scikit-learn and dask-ml, and scaling in n.

Every measured run is its own capped subprocess (:func:`rfstream.bench.measures.run_capped`)
that calls :func:`e2e_child` or :func:`scaling_child` and prints one JSON line.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from .cases import DATASETS, REGISTRY_NAMES
from .measures import load, peak_rss, run_capped


def prepare_data(datasets, workdir, names=DATASETS):
    """``{name: (train, test)}`` (strings): the Zarr of each of ``names``, converted once into
    ``workdir`` from the folder ``datasets`` (None: :func:`rfstream.datasets.datasets_folder`)."""
    from ..datasets import prepare

    return {name: tuple(str(p) for p in prepare(REGISTRY_NAMES[name], workdir, datasets)) for name in names}


def check_sources(datasets, names):
    """Refuse, naming the missing file and both ways to give the folder, when a source file
    of ``names`` is not there: before the bench writes or converts anything."""
    from ..datasets import datasets_folder, source_paths

    folder = Path(datasets) if datasets is not None else datasets_folder()
    fix = "pass --datasets FOLDER (the folder holding kddcup99/, adult/, ...) or set RFSTREAM_DATASETS"
    if names and not folder.is_dir():
        raise FileNotFoundError(f"rfstream bench measures real datasets ({', '.join(names)}) and their folder "
                                f"{folder} does not exist: {fix}.")
    for name in names:
        for path in source_paths(REGISTRY_NAMES[name], folder):
            if path is not None and not path.exists():
                raise FileNotFoundError(f"rfstream bench: {path} does not exist: {fix}.")


def shared_gamma(train, seed=0):
    """``gamma`` for every method: rfstream's "auto" rule on the standardized training set."""
    from .. import io
    from ..kernels import auto_gamma
    from ..preprocess import Standardizer

    X, _ = io.open_dataset(train)
    passthrough = io.onehot_columns(io.dataset_info(train)["attrs"])
    with __import__("dask").config.set(scheduler="threads"):
        Xs = Standardizer(passthrough=passthrough or None).fit(X).transform(X)
        return float(auto_gamma(Xs, "gaussian", random_state=seed))


def sklearn_preprocessor(train):
    """StandardScaler on the numeric columns, one-hot columns passed through (as rfstream)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import StandardScaler

    from .. import io

    info = io.dataset_info(train)
    onehot = set(io.onehot_columns(info["attrs"]))
    numeric = [j for j in range(info["shape"][1]) if j not in onehot]
    return ColumnTransformer([("num", StandardScaler(), numeric)], remainder="passthrough")


def _fit_predict(kind, train, test, D, alpha, gamma, seed):
    """Fit on ``train``, predict ``test``: ``(fit_seconds, predict_seconds, test_error)``."""
    import dask
    import numpy as np

    from .. import io

    X, y = io.open_dataset(train)
    Xt, yt = io.open_dataset(test)
    t0 = time.perf_counter()
    if kind == "rfstream":
        from ..pipeline import evaluate_dataset, fit_dataset

        with dask.config.set(scheduler="threads"):
            model, meta = fit_dataset(train, n_components=D, alpha=alpha, gamma=gamma, random_state=seed)
            t1 = time.perf_counter()
            err = evaluate_dataset(model, meta, test)["value"]
        return t1 - t0, time.perf_counter() - t1, err
    if kind == "daskml-sgd":
        return _daskml(train, X, y, Xt, yt, D, gamma, seed, t0)
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import RidgeClassifier
    from sklearn.pipeline import make_pipeline

    Xn, yn = X.compute(), y.compute()
    if kind == "sklearn-rbf":
        fmap = RBFSampler(gamma=gamma, n_components=D, random_state=seed)
    else:
        fmap = Nystroem(kernel="rbf", gamma=gamma, n_components=D, random_state=seed)
    model = make_pipeline(sklearn_preprocessor(train), fmap, RidgeClassifier(alpha=alpha))
    model.fit(Xn, yn)
    t1 = time.perf_counter()
    err = float(np.mean(model.predict(Xt.compute()) != yt.compute()))
    return t1 - t0, time.perf_counter() - t1, err


def _daskml(train, X, y, Xt, yt, D, gamma, seed, t0):
    """dask-ml's Incremental(SGDClassifier): one epoch of ``partial_fit`` over the row blocks,
    on RBFSampler features computed block by block (the dask-ml way to stay out of core)."""
    import dask
    import dask.array as da
    import numpy as np
    from dask_ml.wrappers import Incremental
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline

    from ..random import sample_rows

    with dask.config.set(scheduler="threads"):
        sample = np.asarray(sample_rows(X, 20000, seed))  # the scaler's moments from a sample
        fmap = make_pipeline(sklearn_preprocessor(train),
                             RBFSampler(gamma=gamma, n_components=D, random_state=seed)).fit(sample)

        def features(block):
            return fmap.transform(block).astype(np.float32)

        Z = X.map_blocks(features, chunks=(X.chunks[0], (D,)), dtype=np.float32)
        Zt = Xt.map_blocks(features, chunks=(Xt.chunks[0], (D,)), dtype=np.float32)
        classes = da.unique(y).compute()  # a reduction: the label column stays on the workers
        inc = Incremental(SGDClassifier(random_state=seed), scoring=None)
        inc.fit(Z, y, classes=classes)
        t1 = time.perf_counter()
        err = float((inc.predict(Zt) != yt).mean().compute())
    return t1 - t0, time.perf_counter() - t1, err


def e2e_child(kind, train, test, D, alpha, gamma, seed):
    if kind == "daskml-sgd":
        try:
            import dask_ml  # noqa: F401  optional: not a dependency of rfstream
        except ImportError:
            print(json.dumps({"error": "not installed"}))
            return
    fit_s, predict_s, err = _fit_predict(kind, train, test, D, alpha, gamma, seed)
    print(json.dumps({"fit_seconds": fit_s, "predict_seconds": predict_s,
                      "total_seconds": fit_s + predict_s, "peak_rss_bytes": peak_rss(),
                      "test_error": err}))


def scaling_child(path, n, D, alpha, seed):
    import dask

    from .. import io
    from ..pipeline import fit_dataset

    X, y = io.open_dataset(path)
    attrs = io.dataset_info(path)["attrs"]
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        fit_dataset(path, X=X[:n], y=y[:n], attrs=attrs, n_components=D, alpha=alpha, random_state=seed)
    print(json.dumps({"rows": n, "fit_seconds": time.perf_counter() - t0, "peak_rss_bytes": peak_rss()}))


def end_to_end(paths, data, Ds, methods, alpha, cap_bytes, timeout, seed=0):
    rows = []
    for name in data:
        train, test = paths[name]
        gamma = shared_gamma(train, seed)
        for D in Ds:
            for kind in methods:
                call = (f"from rfstream.bench import e2e; "
                        f"e2e.e2e_child({kind!r}, {train!r}, {test!r}, {D}, {alpha}, {gamma!r}, {seed})")
                res = run_capped(call, cap_bytes, timeout)
                res.update(dataset=name, method=kind, D=D, gamma=gamma, alpha=alpha, load=load())
                rows.append(res)
                print(f"{name} D={D} {kind}: " + (res.get("error") or
                      f"{res['total_seconds']:.1f} s, {res['peak_rss_bytes'] / 1e9:.2f} GB, "
                      f"error {res['test_error']:.4f}"), file=sys.stderr)
    return rows


def scaling(workdir, rows_list, D, alpha, cap_bytes, timeout, seed=0):
    """rfstream fits on the first n rows of one synthetic dataset of max(rows_list) rows."""
    import dask
    import numpy as np

    from ..datasets.synthetic import write_kdd_like

    n_max = int(max(rows_list))
    path = Path(workdir) / f"kdd_like_{n_max}.zarr"
    if not path.exists():
        with dask.config.set(scheduler="threads"):
            write_kdd_like(path, n_max)
    runs = []
    for n in sorted(int(r) for r in rows_list):
        call = f"from rfstream.bench import e2e; e2e.scaling_child({str(path)!r}, {n}, {D}, {alpha}, {seed})"
        res = run_capped(call, cap_bytes, timeout)
        res.update(rows=n, D=D, load=load())
        runs.append(res)
        print(f"scaling n={n}: " + (res.get("error") or f"{res['fit_seconds']:.1f} s, "
                                   f"{res['peak_rss_bytes'] / 1e9:.2f} GB"), file=sys.stderr)
    ok = [r for r in runs if "error" not in r]
    out = {"dataset": str(path), "D": D, "runs": runs}
    if len(ok) >= 2:
        n = np.log([r["rows"] for r in ok])
        out["loglog_slope_time"] = float(np.polyfit(n, np.log([r["fit_seconds"] for r in ok]), 1)[0])
        mem = [r["peak_rss_bytes"] for r in ok]
        out["peak_memory_max_over_min"] = max(mem) / min(mem)
    return out
