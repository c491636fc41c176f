"""Where a pass's products happen: the device of the rows, its array namespace and precision.

``device="cuda"`` moves each task's row block to the worker's GPU after the read (cupy), and
the passes that have a device form (:data:`ON_DEVICE`) run there, written once against the
array namespace of their rows (the array API standard: numpy, cupy, array_api_strict), so
that CI, without a GPU, runs every line of them with numpy (:class:`GenericRows`, the test
switch) and with array_api_strict.  Partials leave the device once per task as float64
numpy vectors.  Narrative and the list of passes: docs/gpu.md.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading

import numpy as np

from .options import DEVICES, PRECISIONS, ParameterError  # PRECISIONS: cuBLAS math modes

#: the steps that run on the device (the rest is refused before the first pass, docs/gpu.md)
ON_DEVICE = ("Standardizer", "RandomFourierFeatures", "PolynomialCountSketch", "StreamingRidge",
             "StreamingRidgeClassifier", "KernelPCA")
#: the fix a refusal names
CPU_FIX = "run it with {device='cpu'}"


class DeviceError(ParameterError, RuntimeError):
    """A device that cannot be used here (no cupy, no CUDA device or driver), or a job
    with a part that does not run on the device; one line naming the fix."""


class GenericRows(np.ndarray):
    """Rows on the CPU that take the device path: numpy as the namespace of the passes
    written for a device (the test switch ``device="generic"``, docs/gpu.md).  Every line
    of the device path runs on them; the numbers are the numpy path's to float32 rounding."""

    def __array_namespace__(self, api_version=None):
        return np


def is_numpy(x) -> bool:
    """Whether ``x`` takes the CPU's numpy path: anything but rows of another namespace (cupy, an
    array API array, :class:`GenericRows`); ndarrays, sparse matrices and DataFrames do."""
    if isinstance(x, GenericRows):
        return False
    if isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "tocsr") or hasattr(x, "iloc"):
        return True
    return not (type(x).__module__.split(".")[0] == "cupy" or hasattr(x, "__array_namespace__"))


def is_device_array(x) -> bool:
    """Whether ``x`` is an in-memory array of another namespace than numpy's (cupy, an array API
    array, :class:`GenericRows`): a dask collection, a DataFrame or a sparse matrix is not."""
    if isinstance(x, GenericRows):
        return True
    if isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "tocsr") or hasattr(x, "iloc") or hasattr(x, "dask"):
        return False
    return type(x).__module__.split(".")[0] == "cupy" or hasattr(x, "__array_namespace__")


def array_namespace(x):
    """The array API namespace of ``x``: numpy for numpy (and :class:`GenericRows`), cupy for
    cupy, ``x.__array_namespace__()`` for any other array of the standard."""
    if isinstance(x, np.ndarray) or hasattr(x, "tocsr"):
        return np
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    get = getattr(x, "__array_namespace__", None)
    if get is None:
        raise TypeError(f"rows of type {type(x).__name__} have no array namespace (numpy, cupy or an "
                        "array API array)")
    return get()


def to_host(x):
    """``x`` as a plain numpy array (a device array copied to host memory); scipy sparse as it is."""
    if type(x) is np.ndarray or hasattr(x, "tocsr"):
        return x
    if isinstance(x, np.ndarray):
        return x.view(np.ndarray)
    if hasattr(x, "get") and type(x).__module__.split(".")[0] == "cupy":
        return x.get()
    return np.from_dlpack(x)


def like(x, xp, dtype=None):
    """A host array ``x`` in the namespace ``xp`` (copied to its device), in ``dtype`` when given."""
    if xp is np:
        return np.asarray(x, dtype=dtype)
    out = xp.asarray(np.ascontiguousarray(x))
    return out if dtype is None else xp.astype(out, xp_dtype(xp, dtype))


def numpy_dtype(x):
    """The numpy dtype of an array of any namespace (array_api_strict's print as "array_api_strict.float32")."""
    return np.dtype(str(x.dtype).rsplit(".", 1)[-1])


def xp_dtype(xp, dtype):
    """The namespace's dtype object of the numpy ``dtype``."""
    return getattr(xp, np.dtype(dtype).name)


_DEVICE_COPIES = {}  # (namespace, id(array)) -> (array, its copy): a task's weights, moved once
_DEVICE_LOCK = threading.Lock()


def on_device_once(x, xp, dtype=None):
    """:func:`like` kept for the last few host arrays in this process: a pass's weights are
    moved to the device once per worker, not once per sub-block.  Each array is held with
    its copy, so the id that finds it cannot name another array; pass the array the graph
    holds, not a view made per call (``W.T``, ``W[k]``), which would be copied every time."""
    if xp is np:
        return np.asarray(x, dtype=dtype)
    key = (xp.__name__, id(x), None if dtype is None else np.dtype(dtype).name)
    with _DEVICE_LOCK:
        kept = _DEVICE_COPIES.get(key)
        if kept is not None:
            return kept[1]
    copy = like(x, xp, dtype)
    with _DEVICE_LOCK:
        _DEVICE_COPIES[key] = (x, copy)
        while len(_DEVICE_COPIES) > 16:
            _DEVICE_COPIES.pop(next(iter(_DEVICE_COPIES)))
    return copy


def take_rows(x, index):
    """The rows ``index`` (host integers) of ``x``, in ``x``'s namespace."""
    if is_numpy(x):
        return x[index]
    xp = array_namespace(x)
    return xp.take(x, like(np.asarray(index, dtype=np.int64), xp), axis=0)


_JOB = contextvars.ContextVar("rfstream_job_device", default=("cpu", "fp32"))

#: the client's eigendecompositions of a job on a CUDA device are made there from this order up
#: (a rule written before any GPU measurement, not yet measured on a GPU: docs/gpu.md)
DEVICE_EIGH_MIN = 1024


def current_precision():
    """The precision of the device's products in the passes built now (:func:`running_on`)."""
    return _JOB.get()[1]


@contextlib.contextmanager
def running_on(device, precision=None):
    """In the block, the passes built take ``precision`` (:data:`PRECISIONS`) into their specs and
    the client's large eigendecompositions use ``device`` (:func:`symmetric_eigh`)."""
    token = _JOB.set((device or "cpu", precision or "fp32"))
    try:
        yield
    finally:
        _JOB.reset(token)


def symmetric_eigh(G):
    """``(values, vectors)`` of the symmetric float64 ``G`` on the host: made on the job's device
    when it is a GPU (or the test switch) and ``G`` is at least :data:`DEVICE_EIGH_MIN` wide, else
    None (the caller's own scipy call keeps its driver and its memory reuse)."""
    device = _JOB.get()[0]
    if device not in ("cuda", "generic") or G.shape[0] < DEVICE_EIGH_MIN:
        return None
    if device == "cuda":
        import cupy as xp
    else:
        xp = np
    values, vectors = xp.linalg.eigh(like(G, xp, np.float64))
    return to_host(values), to_host(vectors)


def check_device(device):
    """The device a job runs on, checked before any pass: "cpu", "cuda" (cupy imports and
    finds a device; else one line naming the fix), "auto" resolved; "generic" is the
    test switch (:class:`GenericRows`)."""
    if device is None or device == "cpu":
        return "cpu"
    if device == "generic":
        return device
    if device not in DEVICES:
        raise ParameterError("{device} must be one of " f"{', '.join(DEVICES)}; got {device!r}.", device=device)
    found, why = cuda_available()
    if device == "auto":
        return "cuda" if found else "cpu"
    if not found:
        raise DeviceError("{device='cuda'} " f"{why}; install the GPU extra (pip install \"rfstream[cuda]\", "
                          "cupy for your CUDA version) on a machine with an NVIDIA GPU, or "
                          f"{CPU_FIX}.", device=device)
    return "cuda"


def cuda_available():
    """``(True, "")`` where cupy imports and sees a CUDA device, else ``(False, why)``."""
    try:
        import cupy
    except ImportError:
        return False, "needs cupy, which is not installed"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # the driver's or the runtime's own error: reported in one line
        return False, f"finds no usable CUDA driver ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if count < 1:
        return False, "finds no CUDA device"
    return True, ""


def check_precision(precision, device):
    """``precision`` checked: "fp32" anywhere, "tf32" on a CUDA device only."""
    if precision is None:
        return "fp32"
    if precision not in PRECISIONS:
        raise ParameterError("{precision} must be one of " f"{', '.join(PRECISIONS)}; got {precision!r}.",
                             precision=precision)
    if precision != "fp32" and device == "cpu":
        raise ParameterError("{precision=} is a CUDA device's (tensor cores); on the CPU "
                             "products are in the features' dtype: leave {precision} out or use {device='cuda'}.",
                             precision=precision, device=device)
    return precision


def check_model_on_device(model, device):
    """Refuse, before the first pass, a model with a step that does not run on ``device``
    (:data:`ON_DEVICE`); nothing for the CPU."""
    if device == "cpu":
        return
    for _, step in getattr(model, "steps", [("model", model)]):
        name = type(step).__name__
        if name not in ON_DEVICE:
            raise DeviceError(f"{name} does not run on a device (what does: {', '.join(ON_DEVICE)}); "
                              f"{CPU_FIX}.", device=device)


def rows_to(x, device):
    """One row block moved to ``device`` (a task's first step after its read)."""
    if device == "cuda":
        import cupy

        return cupy.asarray(x)
    if device == "generic":
        return np.asarray(x).view(GenericRows)
    return x


def meta_of(device, ndim, dtype):
    """An empty array of ``device``'s kind: the ``meta`` of a dask array whose blocks live there."""
    empty = np.empty((0,) * ndim, dtype=dtype)
    if device == "cuda":
        import cupy

        return cupy.asarray(empty)
    if device == "generic":
        return empty.view(GenericRows)
    return empty


def device_of_meta(meta):
    """Where a dask array's blocks live, from its ``meta``: "cpu" (numpy, scipy sparse), "generic"
    (:class:`GenericRows`), "cuda" (cupy), or "device" (any other array API namespace)."""
    if meta is None or is_numpy(meta):
        return "cpu"
    if isinstance(meta, GenericRows):
        return "generic"
    if type(meta).__module__.split(".")[0] == "cupy":
        return "cuda"
    return "device"


def on_device(X, device):
    """The dask array ``X`` with each block moved to ``device`` in its task (lazy; "cpu": ``X``)."""
    if device in (None, "cpu") or X is None:
        return X
    return X.map_blocks(rows_to, device=device, dtype=X.dtype, meta=meta_of(device, X.ndim, X.dtype))


def blocks_like(X, ndim, dtype):
    """The ``meta`` of an array computed from ``X``'s blocks on their device, in their namespace."""
    meta = getattr(X, "_meta", None)
    where = device_of_meta(meta)
    if where != "device":
        return meta_of(where, ndim, dtype)
    xp = array_namespace(meta)
    return xp.empty((0,) * ndim, dtype=xp_dtype(xp, dtype))


def host_blocks(A):
    """The dask array ``A`` with its blocks copied to host memory (numpy), e.g. before they are written."""
    import dask.array as da

    if not isinstance(A, da.Array) or device_of_meta(A._meta) == "cpu":
        return A
    return A.map_blocks(to_host, dtype=A.dtype, meta=np.empty((0,) * A.ndim, dtype=A.dtype))


@contextlib.contextmanager
def products_in(precision, xp):
    """The device's matrix products in ``precision`` for the block: "tf32" sets cuBLAS's
    tensor-op math mode on the current device (and restores it); numpy's products ignore it."""
    if precision != "tf32" or xp is np or getattr(xp, "__name__", "") != "cupy":
        yield
        return
    from cupy.cuda import cublas, device

    handle = device.get_cublas_handle()
    before = cublas.getMathMode(handle)
    cublas.setMathMode(handle, cublas.CUBLAS_TF32_TENSOR_OP_MATH)
    try:
        yield
    finally:
        cublas.setMathMode(handle, before)
