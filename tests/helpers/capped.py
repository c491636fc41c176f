"""Commands run under an address-space limit (``RLIMIT_AS``): a size bomb fed to rfstream
must end as one line and exit 2, never as a MemoryError, a kill or the machine's OOM killer."""
import os
import resource
import subprocess
import sys
from pathlib import Path

#: the address space a capped command may use: the interpreter with numpy, pandas, pyarrow,
#: dask and zarr loaded fits with room; a bomb does not
CAP = int(2.5 * 2**30)
ROOT = Path(__file__).resolve().parents[2]


def _limit(cap):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return apply


def run_capped(args, *, cap=CAP, timeout=120, cwd=None, python=None):
    """``(exit status, stderr's non-blank lines)`` of ``python -m rfstream *args`` (or of
    ``python -c CODE`` with ``python=CODE``) under ``RLIMIT_AS = cap``, one BLAS thread."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-c", python] if python is not None else \
        [sys.executable, "-m", "rfstream", *map(str, args)]
    out = subprocess.run(cmd, preexec_fn=_limit(cap), capture_output=True, text=True, timeout=timeout,
                         env=env, cwd=cwd, check=False)
    return out.returncode, [line for line in out.stderr.splitlines() if line.strip()]


def one_line_exit_2(args, *needles, **kwargs):
    """Run ``args`` capped; assert exit 2 and one stderr line holding every ``needles``; the line."""
    code, lines = run_capped(args, **kwargs)
    assert code == 2 and len(lines) == 1, (code, lines[-8:])
    assert "Traceback" not in lines[0] and all(n in lines[0] for n in needles), lines[0]
    return lines[0]
