"""The data and results of the CNM benchmarks (bench_cnm.py): the datasets, standardized,
the linear classifier that scores a map's features, and the JSON written to docs/cnm/."""
from __future__ import annotations

import json
import os
from pathlib import Path

from cnm_figures import OUT

CACHE = Path(os.environ.get("RFSTREAM_BENCH_CACHE", "/tmp/rfstream-bench"))
C_LOGISTIC, MAX_ITER_LOGISTIC = 100.0, 300


def load(name):
    """Standardized train/test numpy arrays and dask training arrays of a dataset."""
    import dask.array as da

    from rfstream import Standardizer
    from rfstream.datasets import train_test
    from rfstream.datasets.registry import get

    split = {} if get(name).test else {"test_size": 0.25}  # ijcnn1 ships its test file
    Xtr, Xte, ytr, yte = train_test(name, CACHE, rows_per_chunk=4096, **split)
    st = Standardizer().fit(Xtr)
    Xtr, Xte = st.transform(Xtr).compute(), st.transform(Xte).compute()
    ytr, yte = ytr.compute(), yte.compute()
    dask_train = (da.from_array(Xtr, chunks=(4096, -1)), da.from_array(ytr, chunks=4096))
    return Xtr, Xte, ytr, yte, dask_train


def linear_accuracy(Ztr, ytr, Zte, yte):
    """Test accuracy of a converged linear classifier on given features (see module doc)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = LogisticRegression(C=C_LOGISTIC, max_iter=MAX_ITER_LOGISTIC).fit(Ztr, ytr)
    return float(clf.score(Zte, yte))


def write(name, data):
    """``data`` as JSON in docs/cnm/``name``."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    path.write_text(json.dumps(data, indent=1))
    print("wrote", path)
