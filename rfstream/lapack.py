"""LAPACK on the client's threads: the routines of the client's solves, called without the GIL.

scipy's ``scipy.linalg.lapack`` wrappers hold Python's GIL for the whole LAPACK call, so the
per-(gamma, fold) factorizations that :func:`rfstream.cluster.client_map` runs on the client's
cores at once ran one at a time (40 Cholesky factorizations at D = 1,000 on two threads: no faster
than on one).  The same routines are exported by ``scipy.linalg.cython_lapack`` as C function
pointers (its Cython C-API capsules, the ones Cython code and numba call); called through
``ctypes`` they run without the GIL.  Where a scipy build has no such capsule the
``scipy.linalg.lapack`` wrapper is used instead (the same routine, with the GIL).  Every function
takes and returns Fortran-ordered float64 arrays and raises ``numpy.linalg.LinAlgError`` on a
nonzero ``info``.  docs/ridge.md, "The client's solves without the GIL".
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import scipy.linalg.lapack

_INT = ctypes.POINTER(ctypes.c_int)
_CHAR = ctypes.c_char_p
_PTR = ctypes.c_void_p  # an array's address
_DOUBLE = ctypes.POINTER(ctypes.c_double)

#: The arguments of each routine as ``scipy.linalg.cython_lapack`` declares them (LAPACK's own
#: Fortran arguments, every one by address).
_SIGNATURES = {
    "dpotrf": (_CHAR, _INT, _PTR, _INT, _INT),
    "dpotrs": (_CHAR, _INT, _INT, _PTR, _INT, _PTR, _INT, _INT),
    "dtrtri": (_CHAR, _CHAR, _INT, _PTR, _INT, _INT),
    "dsytrd": (_CHAR, _INT, _PTR, _INT, _PTR, _PTR, _PTR, _PTR, _INT, _INT),
    "dormqr": (_CHAR, _CHAR, _INT, _INT, _INT, _PTR, _INT, _PTR, _PTR, _INT, _PTR, _INT, _INT),
    "dsyevr": (_CHAR, _CHAR, _CHAR, _INT, _PTR, _INT, _DOUBLE, _DOUBLE, _INT, _INT, _DOUBLE, _INT, _PTR, _PTR,
               _INT, _PTR, _PTR, _INT, _PTR, _INT, _INT),
}


@functools.cache
def _routine(name):
    """The C function ``name`` of ``scipy.linalg.cython_lapack`` as a ctypes function (which
    releases the GIL while it runs), or None where the capsule is not there."""
    try:
        from scipy.linalg import cython_lapack

        capsule = cython_lapack.__pyx_capi__[name]
        # private prototypes of the C API's two calls (ctypes.pythonapi's own are left as they are)
        get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
        get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        address = get_pointer(capsule, get_name(capsule))
    except (ImportError, AttributeError, KeyError, ValueError):  # pragma: no cover - another scipy build
        return None
    return ctypes.CFUNCTYPE(None, *_SIGNATURES[name])(address) if address else None


def _int(value):
    return ctypes.byref(ctypes.c_int(int(value)))


def _check(name, info):
    if info:
        raise np.linalg.LinAlgError(f"{name} failed (info={info})")


def _fortran(a, overwrite=False):
    """``a`` as a Fortran-ordered float64 copy (the routines write into their arguments), or ``a``
    itself with ``overwrite`` where it is already such an array and writeable."""
    if overwrite and a.dtype == np.float64 and a.flags.f_contiguous and a.flags.writeable:
        return a
    return np.array(a, dtype=np.float64, order="F", copy=True)


def potrf(A, overwrite_a=False):
    """The lower Cholesky factor of symmetric positive definite ``A`` (its lower triangle read), in a
    new Fortran array whose strict upper triangle is ``A``'s (the routines here read only the lower
    one); ``overwrite_a``: in ``A`` itself where it is a Fortran-ordered float64 array.
    ``LinAlgError`` where ``A`` is not positive definite."""
    L = _fortran(A, overwrite_a)
    n = L.shape[0]
    call = _routine("dpotrf")
    if call is None:  # pragma: no cover - another scipy build
        L, info = scipy.linalg.lapack.dpotrf(L, lower=1, clean=0, overwrite_a=1)
    else:
        info = ctypes.c_int(0)
        call(b"L", _int(n), L.ctypes.data, _int(max(n, 1)), ctypes.byref(info))
        info = info.value
    _check("dpotrf", info)
    return L


def potrs(L, B):
    """``(L L')^-1 B`` for a lower Cholesky factor ``L`` (:func:`potrf`); ``B`` (n,) or (n, k)."""
    X = _fortran(B)
    vector = X.ndim == 1
    X = X.reshape(X.shape[0], -1, order="F")
    n, k = X.shape
    call = _routine("dpotrs")
    if call is None:  # pragma: no cover - another scipy build
        X, info = scipy.linalg.lapack.dpotrs(L, X, lower=1, overwrite_b=1)
    else:
        L = np.asfortranarray(L, dtype=np.float64)
        info = ctypes.c_int(0)
        call(b"L", _int(n), _int(k), L.ctypes.data, _int(max(n, 1)), X.ctypes.data, _int(max(n, 1)),
             ctypes.byref(info))
        info = info.value
    _check("dpotrs", info)
    return X[:, 0] if vector else X


def trtri(L):
    """The inverse of lower triangular ``L``, in a new Fortran array (its strict upper triangle
    as ``L``'s)."""
    inverse = _fortran(L)
    n = inverse.shape[0]
    call = _routine("dtrtri")
    if call is None:  # pragma: no cover - another scipy build
        inverse, info = scipy.linalg.lapack.dtrtri(inverse, lower=1, overwrite_c=1)
    else:
        info = ctypes.c_int(0)
        call(b"L", b"N", _int(n), inverse.ctypes.data, _int(max(n, 1)), ctypes.byref(info))
        info = info.value
    _check("dtrtri", info)
    return inverse


def sytrd(G):
    """``(c, d, e, tau)`` of the lower tridiagonal reduction ``G = Q T Q'`` (as
    ``scipy.linalg.lapack.dsytrd(G, lower=1)``); ``G`` is not modified."""
    c = _fortran(G)
    n = c.shape[0]
    d, e, tau = np.empty(n), np.empty(max(n - 1, 0)), np.empty(max(n - 1, 0))
    call = _routine("dsytrd")
    if call is None or n == 0:  # pragma: no cover - another scipy build
        lwork, _ = scipy.linalg.lapack.dsytrd_lwork(n, lower=1)
        c, d, e, tau, info = scipy.linalg.lapack.dsytrd(c, lower=1, lwork=max(int(lwork), 1), overwrite_a=1)
    else:
        info, query = ctypes.c_int(0), np.empty(1)
        args = (b"L", _int(n), c.ctypes.data, _int(n), d.ctypes.data, e.ctypes.data, tau.ctypes.data)
        call(*args, query.ctypes.data, _int(-1), ctypes.byref(info))
        work = np.empty(max(int(query[0]), 1))
        call(*args, work.ctypes.data, _int(work.size), ctypes.byref(info))
        info = info.value
    _check("dsytrd", info)
    return c, d, e, tau


def ormqr_below(c, tau, X, trans):
    """``Q X`` (``trans="N"``) or ``Q' X`` (``"T"``), in a new Fortran array, for the ``Q`` of a
    :func:`sytrd` (its reflectors below the subdiagonal of ``c``, applied by ``dormqr`` to rows
    1.. of ``X`` as LAPACK's ``dormtr`` does); ``X`` (n, k)."""
    out = _fortran(X)
    n, k = out.shape
    if n <= 1 or k == 0:
        return out
    call = _routine("dormqr")
    if call is None:  # pragma: no cover - another scipy build
        lwork = max(int(scipy.linalg.lapack.dormqr("L", trans, c[1:, :n - 1], tau, out[1:], -1)[1][0]), 1)
        out[1:], _, info = scipy.linalg.lapack.dormqr("L", trans, c[1:, :n - 1], tau, out[1:], lwork)
    else:
        c, tau = np.asfortranarray(c, dtype=np.float64), np.ascontiguousarray(tau, dtype=np.float64)
        info, query = ctypes.c_int(0), np.empty(1)
        below = c.ctypes.data + c.itemsize  # c[1, 0], leading dimension n: the view c[1:, :n - 1]
        rows = out.ctypes.data + out.itemsize  # out[1:, :], leading dimension n
        args = (b"L", trans.encode(), _int(n - 1), _int(k), _int(n - 1), below, _int(n), tau.ctypes.data,
                rows, _int(n))
        call(*args, query.ctypes.data, _int(-1), ctypes.byref(info))
        work = np.empty(max(int(query[0]), 1))
        call(*args, work.ctypes.data, _int(work.size), ctypes.byref(info))
        info = info.value
    _check("dormqr", info)
    return out


def syevr(A, overwrite_a=False):
    """``(w, V)``: the eigenvalues (ascending) and eigenvectors of symmetric ``A`` (its lower triangle
    read), as ``scipy.linalg.eigh(A, driver="evr")`` gives them (LAPACK ``dsyevr``, the whole
    spectrum, ``abstol`` 0); ``overwrite_a``: ``A`` is used as the workspace where it is a
    Fortran-ordered float64 array."""
    a = _fortran(A, overwrite_a)
    n = a.shape[0]
    call = _routine("dsyevr")
    if call is None or n == 0:  # pragma: no cover - another scipy build
        lwork, liwork, _ = scipy.linalg.lapack.dsyevr_lwork(n, lower=1)
        w, V, _, _, info = scipy.linalg.lapack.dsyevr(a, lower=1, lwork=max(int(lwork), 1),
                                                       liwork=max(int(liwork), 1), overwrite_a=1)
        _check("dsyevr", info)
        return w, V
    w, V = np.empty(n), np.empty((n, n), order="F")
    isuppz = np.empty(2 * n, dtype=np.intc)
    found, info = ctypes.c_int(0), ctypes.c_int(0)
    zero = ctypes.c_double(0.0)
    args = (b"V", b"A", b"L", _int(n), a.ctypes.data, _int(n), ctypes.byref(zero), ctypes.byref(zero), _int(1),
            _int(n), ctypes.byref(zero), ctypes.byref(found), w.ctypes.data, V.ctypes.data, _int(n),
            isuppz.ctypes.data)
    query, iquery = np.empty(1), np.empty(1, dtype=np.intc)
    call(*args, query.ctypes.data, _int(-1), iquery.ctypes.data, _int(-1), ctypes.byref(info))
    work, iwork = np.empty(max(int(query[0]), 1)), np.empty(max(int(iquery[0]), 1), dtype=np.intc)
    call(*args, work.ctypes.data, _int(work.size), iwork.ctypes.data, _int(iwork.size), ctypes.byref(info))
    _check("dsyevr", info.value)
    return w, V
