"""The bytes a checkpoint takes: one Gram partial stored whole, packed, and compressed, and the
README's grid stopped after its Gram pass.

``codec``: a D x D Gram partial (unscaled RFF features of random rows, float32 SYRK summed in
float64 and scaled, as the Gram pass makes it) stored whole (``np.savez``, the format before packing), as its packed
upper triangle (:mod:`rfstream.io.pass_encoding`), and the packed triangle through zstd and
byte-shuffle + zstd (numcodecs); bytes, and encode / decode rates interleaved over repeats
(the minimum).  ``grid``: ``rfstream fit`` with the README's grid (``--gamma``: one gamma or
five, ``--alpha`` five values, ``--n-components 1000,2000,4000``, 5-fold) on the first rows of
letter, stopped by SIGTERM once the Gram pass is in the checkpoint; the checkpoint's files, the
prediction of :func:`rfstream.solvers.ridge.gram.checkpoint_nbytes` and the CLI's last line.
Figures: docs/robustness.md, "rfstream/io/checkpoints.py".

    python benchmarks/io/bench_checkpoint_bytes.py codec --d 2000
    python benchmarks/io/bench_checkpoint_bytes.py grid --gammas auto --rows 2000
"""
from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np


def codec(d, repeats):
    from numcodecs import Blosc, Zstd

    from rfstream.io.pass_encoding import encode

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4 * d, 10)).astype(np.float32)
    W = rng.standard_normal((10, d)).astype(np.float32)
    b = rng.uniform(0, 2 * np.pi, d).astype(np.float32)
    G = np.zeros((d, d))
    for start in range(0, X.shape[0], 8192):  # unscaled float32 features, SYRK, summed in float64 ...
        Z = np.cos(X[start:start + 8192] @ W + b)
        G += np.matmul(Z.T, Z)
    G *= 2.0 / d  # ... then scaled, as rfstream.solvers.ridge.gram.gram_chunk does
    packed = G[np.triu_indices(d)]

    def whole():
        buf = io.BytesIO()
        np.savez(buf, v0=G)
        return buf.getvalue()

    ways = {"whole (np.savez)": (whole, None), "packed": (lambda: encode((G,)), None),
            "packed + zstd 3": (lambda: Zstd(3).encode(packed), Zstd(3)),
            "packed + shuffle + zstd 3": (lambda: Blosc("zstd", 3, Blosc.SHUFFLE, typesize=8).encode(packed),
                                          Blosc("zstd", 3, Blosc.SHUFFLE, typesize=8))}
    best = {name: [np.inf, np.inf, 0] for name in ways}
    for _ in range(repeats):
        for name, (make, codec_) in ways.items():
            t0 = time.perf_counter()
            data = make()
            best[name][0] = min(best[name][0], time.perf_counter() - t0)
            best[name][2] = len(data)
            if codec_ is not None:
                t0 = time.perf_counter()
                codec_.decode(data)
                best[name][1] = min(best[name][1], time.perf_counter() - t0)
    out = {name: {"bytes": n, "of_whole": round(n / best["whole (np.savez)"][2], 4),
                  "encode_MBps": round(G.nbytes / t / 1e6), **({"decode_MBps": round(G.nbytes / td / 1e6)}
                                                              if np.isfinite(td) else {})}
           for name, (t, td, n) in best.items()}
    print(json.dumps({"d": d, "load": os.getloadavg()[0], "ways": out}, indent=1))


def grid(gammas, rows, workdir):
    from rfstream.solvers.ridge.gram import checkpoint_nbytes

    work = pathlib.Path(workdir or tempfile.mkdtemp(prefix="rfstream-ckpt-"))
    from rfstream.datasets.registry import source_paths

    source, _ = source_paths("letter")
    csv = work / "letter.csv"
    csv.write_text("".join(source.read_text().splitlines(keepends=True)[:rows]))
    data = work / "letter.zarr"
    run = [sys.executable, "-m", "rfstream"]
    subprocess.run(run + ["convert", str(csv), str(data), "--label-column", "first", "--overwrite"], check=True,
                   capture_output=True)
    out = work / "m"
    cmd = run + ["fit", str(data), "--gamma", gammas, "--alpha", "0.001,0.01,0.1,1,10", "--n-components",
                 "1000,2000,4000", "--out", str(out), "--overwrite"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    ck = pathlib.Path(str(out) + ".checkpoint")
    gram = None
    while proc.poll() is None and gram is None:
        try:
            steps = json.loads((ck / "rfstream-checkpoint.json").read_text())["steps"]
        except (OSError, ValueError, KeyError):
            steps = []
        gram = next((s for s in steps if s.get("bytes", (ck / s["file"]).stat().st_size) > 50e6), None)
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    files = {f.name: f.stat().st_size for f in sorted(ck.iterdir())} if ck.exists() else {}
    n_gammas, classes = len(gammas.split(",")), 26
    print(json.dumps({"command": " ".join(cmd[2:]), "files": files, "total": sum(files.values()),
                      "gram_pass_predicted": checkpoint_nbytes(n_gammas, 5, 4000, classes),
                      "exit": proc.returncode, "last_line": (err.strip().splitlines() or [""])[-1]}, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("codec")
    c.add_argument("--d", type=int, default=2000)
    c.add_argument("--repeats", type=int, default=3)
    g = sub.add_parser("grid")
    g.add_argument("--gammas", default="auto", help="one gamma (then multiply by 5) or auto*0.25,...")
    g.add_argument("--rows", type=int, default=2000)
    g.add_argument("--workdir")
    args = parser.parse_args()
    codec(args.d, args.repeats) if args.what == "codec" else grid(args.gammas, args.rows, args.workdir)


if __name__ == "__main__":
    main()
