"""bench_wide.py's studies on a Gram held in memory: PCG iterations by preconditioner
(``precond``) and float32 products against float64 (``precision``)."""
from __future__ import annotations

import time

import numpy as np


def features_and_targets(args):
    """``(Z, y, Y)``: float32 Gaussian RFF (``args.d``, gamma "auto") of the standardized
    training split of ``args.dataset``, its labels and their +-1 one-hot targets."""
    from rfstream import RandomFourierFeatures
    from rfstream.datasets import registry
    from rfstream.preprocess import Standardizer

    X, _, y, _ = registry.train_test(args.dataset, args.workdir)
    X, y = np.asarray(X), np.asarray(y)
    Xs = Standardizer().fit(X).transform(X)
    Z = np.asarray(RandomFourierFeatures(args.d, gamma="auto", random_state=0).fit(Xs).transform(Xs), np.float32)
    return Z, y, np.where(y[:, None] == np.unique(y), 1.0, -1.0)


def _pcg_iterations(G, B, alpha, precondition, tol=1e-4, max_iter=3000):
    """PCG iterations to ``tol`` on ``(G + alpha I) W = B`` held in memory."""
    W, R = np.zeros_like(B), B.copy()
    Zr = precondition(R)
    P, rz, norm_b = Zr.copy(), (R * Zr).sum(0), np.linalg.norm(B, axis=0)
    for k in range(1, max_iter + 1):
        AP = G @ P + alpha * P
        step = rz / (P * AP).sum(0)
        W += P * step
        R -= AP * step
        if (np.linalg.norm(R, axis=0) / norm_b).max() < tol:
            return k
        Zr = precondition(R)
        rz_new = (R * Zr).sum(0)
        P, rz = Zr + P * (rz_new / rz), rz_new
    return max_iter


def precond(args):
    """Iterations to tol 1e-4 by preconditioner, on the letter Gram held in memory.

    Jacobi; rfstream's row-sample Nystrom preconditioner (m rows, rank r); the Gaussian
    sketch of Frangella, Tropp & Udell's Algorithm 2.1 (rank r, a pass of 2 n D r flops
    over the data that the row sample avoids).  Also d_eff(alpha) = tr(G (G + alpha I)^-1)."""
    from rfstream.solvers.nystrom_pcg import NystromPreconditioner

    Z, y, Y = features_and_targets(args)
    Z = Z.astype(np.float64)
    mu = Z.mean(0)
    Zc, n = Z - mu, Z.shape[0]
    G, B = Zc.T @ Zc, Zc.T @ (Y - Y.mean(0))
    ev = np.linalg.eigvalsh(G)
    print(f"{args.dataset}, D={args.d}, alpha={args.alpha:g}: d_eff {np.sum(ev / (ev + args.alpha)):.0f}")
    diag = np.diag(G) + args.alpha
    print("\n| preconditioner | rows sampled | rank r | iterations |\n|---|---|---|---|")
    print(f"| Jacobi | | | {_pcg_iterations(G, B, args.alpha, lambda R: R / diag[:, None])} |", flush=True)
    for m in args.rows:
        for r in (m // 4, m // 2, m):
            P = NystromPreconditioner.from_rows(Z, y, alpha=args.alpha, mu=mu, n_rows=n, m=m, rank=r, seed=0)
            print(f"| row sample (rfstream) | {m} | {r} | {_pcg_iterations(G, B, args.alpha, P)} |", flush=True)
    rng = np.random.default_rng(0)
    for r in args.sketch:
        omega = rng.standard_normal((args.d, r))
        Ysk = G @ omega
        shift = np.sqrt(args.d) * np.finfo(float).eps * np.linalg.norm(Ysk, 2)
        Ysk += shift * omega
        C = np.linalg.cholesky(omega.T @ Ysk)
        U, S, _ = np.linalg.svd(np.linalg.solve(C, Ysk.T).T, full_matrices=False)
        P = NystromPreconditioner(U, np.maximum(S**2 - shift, 0.0), args.alpha)
        print(f"| Gaussian sketch (Alg. 2.1, one more pass) | | {r} | {_pcg_iterations(G, B, args.alpha, P)} |",
              flush=True)


def precision(args):
    """PCG with the products ``Z'(Z V)`` in float32 against float64, in memory.

    The same preconditioner (rfstream's, rank ``--rank``); the true relative residual of
    the normal equations computed in float64 every 5 iterations.  For each product
    precision: the iterations to reach each of ``--tols``, the floor (the lowest true
    residual in ``--max-iter`` iterations: where float32 stalls), and the relative distance
    of the float32 solution from the float64 one at the first tolerance."""
    from rfstream.solvers.nystrom_pcg import NystromPreconditioner

    Z32, y, Y = features_and_targets(args)
    Z64 = Z32.astype(np.float64)
    Y = Y[:, : 1 if Y.shape[1] == 2 else None]
    mu = Z64.mean(0)
    B = (Z64 - mu).T @ (Y - Y.mean(0))
    P = NystromPreconditioner.from_rows(Z64, y, alpha=args.alpha, mu=mu, n_rows=len(y), m=2 * args.rank,
                                        rank=args.rank, seed=0)
    n, mu32 = len(y), mu.astype(np.float32)

    def product(V, dtype):
        Z, m = (Z32, mu32) if dtype == np.float32 else (Z64, mu)
        Vd = V.astype(dtype)
        ZZV = (Z.T @ (Z @ Vd)).astype(np.float64) - n * np.outer(m, m @ Vd).astype(np.float64)
        return ZZV + args.alpha * V

    def exact_residual(W):
        return (np.linalg.norm(B - product(W, np.float64), axis=0) / np.linalg.norm(B, axis=0)).max()

    tols = sorted(args.tols, reverse=True)
    solutions = {}
    print(f"{args.dataset}, n={n}, D={args.d}, T={B.shape[1]}, alpha={args.alpha:g}, rank {args.rank}\n")
    print("| products | " + " | ".join(f"iterations to {t:g}" for t in tols)
          + f" | floor in {args.max_iter} iterations | seconds per iteration |")
    print("|---|" + "---|" * (len(tols) + 2))
    for dtype in (np.float64, np.float32):
        W, R = np.zeros_like(B), B.copy()
        Zr = P(R)
        D_, rz, reached, best = Zr.copy(), (R * Zr).sum(0), {}, np.inf
        spent = 0.0
        for k in range(1, args.max_iter + 1):
            t0 = time.perf_counter()
            AP = product(D_, dtype)
            spent += time.perf_counter() - t0
            step = rz / (D_ * AP).sum(0)
            W += D_ * step
            R -= AP * step
            if k % 5 == 0:
                true = exact_residual(W)
                best = min(best, true)
                for t in tols:
                    if t not in reached and true < t:
                        reached[t] = k
                        if t == tols[0]:
                            solutions[np.dtype(dtype).name] = W.copy()
                if len(reached) == len(tols):
                    break
            Zr = P(R)
            rz_new = (R * Zr).sum(0)
            D_, rz = Zr + D_ * (rz_new / rz), rz_new
        print(f"| {np.dtype(dtype).name} | " + " | ".join(str(reached.get(t, "not reached")) for t in tols)
              + f" | {best:.1e} | {spent / k:.3f} |", flush=True)
    if len(solutions) == 2:
        gap = np.linalg.norm(solutions["float32"] - solutions["float64"]) / np.linalg.norm(solutions["float64"])
        print(f"\nat {tols[0]:g}: the float32 solution is {gap:.1e} (relative) from the float64 one")
