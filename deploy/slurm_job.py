"""rfstream on a SLURM cluster through dask-jobqueue (pip install dask-jobqueue).

    python deploy/slurm_job.py /shared/train.zarr /shared/model --jobs 8

Each SLURM job runs one single-threaded Dask worker; the data must be on a filesystem
that every node mounts at the same path.
"""
import argparse

from dask_jobqueue import SLURMCluster

from rfstream.cli import main


def run():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--queue", default=None)
    args = p.parse_args()
    cluster = SLURMCluster(cores=1, processes=1, memory="8GB", walltime="02:00:00", queue=args.queue)
    cluster.scale(jobs=args.jobs)
    try:
        return main(["fit", args.data, "--n-components", "2000", "--alpha", "0.1,1,10",
                     "--out", args.out, "--overwrite", "--scheduler", cluster.scheduler_address])
    finally:
        cluster.close()


if __name__ == "__main__":
    raise SystemExit(run())
