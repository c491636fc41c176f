"""Accuracy floors on real data (Rahimi & Recht 2007, Table of "Fourier+LS" results).

These use the real datasets; under CI=true a missing datasets folder fails the
run (see conftest.require_datasets), it never skips.  The floors are set from
what this implementation measures, with a margin, and checked against the
published numbers where there are some.
"""
import pytest

from rfstream import io, train_test_split
from rfstream.cluster import connect
from rfstream.pipeline import evaluate_dataset, fit_dataset

pytestmark = pytest.mark.long_file(30)  # seconds in the suite: started first (tests/conftest.py)


def _fit_evaluate(train, test, **params):
    with connect("threads"):
        model, meta = fit_dataset(train, **params)
        return model, evaluate_dataset(model, meta, test)


def test_adult_error(adult_train_zarr, adult_test_zarr):
    # Rahimi & Recht report 14.9% test error for Fourier+LS on Adult; with the
    # one-hot columns passed through the standardizer we measured 14.27%
    # (D=500, gamma="auto", alpha=1, seed 0).  The floor 15.5% is ~2.5 binomial
    # std above that (std = sqrt(.143 * .857 / 16281) = 0.27%), so seeds and
    # platforms pass while a lost passthrough (15.4%) or a broken bandwidth fails.
    model, result = _fit_evaluate(adult_train_zarr, adult_test_zarr, n_components=500,
                                  alpha=1.0, random_state=0)
    assert result["metric"] == "error_rate" and result["rows"] == 16281
    assert result["value"] <= 0.155
    assert model.named_steps["standardize"].passthrough  # the one-hot columns


def test_kdd99_error(kdd_train_zarr, kdd_test_zarr):
    # Normal vs attack, 10% training set, "corrected" test set (311,029 rows,
    # with attack types absent from training).  We measured 7.68% (D=500,
    # alpha=1, seed 0); Rahimi & Recht report 7.3% for Fourier+LS on the full
    # set.  Floor 8.5%; the binomial std is only 0.05%, the margin covers the
    # sensitivity to the random features.
    _, result = _fit_evaluate(kdd_train_zarr, kdd_test_zarr, n_components=500, alpha=1.0,
                              random_state=0)
    assert result["rows"] == 311_029
    assert result["value"] <= 0.085


@pytest.fixture(scope="module")
def cpusmall_zarr(prepared):
    return prepared("cpusmall", rows_per_chunk=2048)[0]


def test_cpusmall_relative_rmse(cpusmall_zarr):
    # Regression, 8192 rows x 12 features, 75/25 rfstream.train_test_split
    # (seed 0), D=500, alpha by 5-fold CV from [1e-3 .. 100].  We measured
    # relative RMSE ||y - yhat|| / ||y|| = 0.0581 (alpha_ = 0.1); seeds 1 and 2
    # of split+features give 0.066 and 0.063.  Floor 0.07 = measured + 20%.
    # For scale: predicting the training mean gives ~0.2, so the floor is far
    # below anything a broken model reaches.
    X, y = io.open_dataset(cpusmall_zarr)
    attrs = io.dataset_info(cpusmall_zarr)["attrs"]
    assert attrs["task"] == "regression" and X.shape == (8192, 12)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
    with connect("threads"):
        model, meta = fit_dataset(cpusmall_zarr, n_components=500, alpha=[1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0],
                                  random_state=0, X=X_tr, y=y_tr, attrs=attrs)
        result = evaluate_dataset(model, meta, cpusmall_zarr, X=X_te, y=y_te, attrs=attrs)
        y_te_np = y_te.compute()
        # (gamma, alpha) by 5-fold CV and by the evidence over a grid of bandwidths: we
        # measured the same choice (auto*0.25, 0.01) and relative RMSE 0.0392 for both. At the
        # single gamma above the evidence picks alpha 0.01 against CV's 0.1 (0.0612 vs 0.0581).
        grid = {"n_components": 500, "gamma": ["auto*0.25", "auto*0.5", "auto"],
                "alpha": [1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0], "random_state": 0, "X": X_tr, "y": y_tr,
                "attrs": attrs}
        by_cv, meta_cv = fit_dataset(cpusmall_zarr, **grid)
        by_evidence, meta_ev = fit_dataset(cpusmall_zarr, select="evidence", **grid)
        cv_value = evaluate_dataset(by_cv, meta_cv, cpusmall_zarr, X=X_te, y=y_te, attrs=attrs)["value"]
        evidence_value = evaluate_dataset(by_evidence, meta_ev, cpusmall_zarr, X=X_te, y=y_te, attrs=attrs)["value"]
        # the searched fits are calibrated: conformal 90% intervals cover 88-92% of the ~2048
        # test rows (binomial std 0.66 points; we measured 90.5% and 90.9% at D=1000)
        lower, upper = by_cv[-1].predict_interval(by_cv[:-1].transform(X_te), level=0.9)
        inside = ((y_te >= lower) & (y_te <= upper)).mean().compute()
    assert 0.88 <= inside <= 0.92
    assert evidence_value <= 1.02 * cv_value
    assert result["metric"] == "relative_rmse"
    assert abs(result["rows"] - 2048) < 5 * (8192 * 0.25 * 0.75) ** 0.5  # binomial test size
    assert result["value"] <= 0.07
    baseline = (((y_te_np - y_tr.mean().compute()) ** 2).sum() / (y_te_np**2).sum()) ** 0.5
    assert result["value"] < 0.5 * baseline
