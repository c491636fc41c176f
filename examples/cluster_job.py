"""A cluster job: convert KDD99 to Zarr, fit Gaussian RFF + ridge, evaluate, predict.

    python examples/cluster_job.py --datasets ../shared/datasets --scheduler tcp://host:8786

Without --scheduler an embedded LocalCluster is started.  Every pass over the data is a
distributed reduction; only D x D matrices come back to this process.
"""
import argparse
from pathlib import Path

import rfstream
from rfstream import io
from rfstream.cluster import connect, set_progress
from rfstream.datasets import prepare
from rfstream.io import read_model_json, write_predictions
from rfstream.pipeline import evaluate_dataset, fit_dataset


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=None, help="real datasets folder (default: $RFSTREAM_DATASETS, "
                   "else ../shared/datasets beside the repository)")
    p.add_argument("--workdir", default="runs/kdd_job")
    p.add_argument("--scheduler", default=None)
    p.add_argument("--n-components", type=int, default=2000)
    args = p.parse_args()
    work = Path(args.workdir)
    train, test = prepare("kddcup99", work, args.datasets)
    set_progress(True)
    with connect(args.scheduler):
        model, meta = fit_dataset(train, n_components=args.n_components, alpha=[0.01, 0.1, 1.0, 10.0],
                                  out=work / "model", overwrite=True)
        print("alpha chosen by CV:", model.named_steps["solver"].alpha_)
        print(evaluate_dataset(model, meta, test))
        model = rfstream.load_model(work / "model")
        X, _ = io.open_dataset(test)
        write_predictions(model.predict(X), work / "pred.zarr", overwrite=True,
                          attrs={"classes": read_model_json(work / "model")["metadata"]["dataset"]["classes"]})


if __name__ == "__main__":
    main()
