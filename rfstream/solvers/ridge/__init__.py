"""Ridge regression and classification on random features, every route in one package.

``estimators`` (the estimators, their search and the dispatcher that resolves "auto"),
``gram`` (the one pass of Z'Z and Z'Y per fold, with its gamma-grid and size variants),
``cv`` (the alpha path per fold and the scoring pass), ``loo`` (exact leave-one-out),
``evidence`` (the marginal likelihood), ``calibration`` (conformal intervals, Platt
probabilities, the posterior), ``platt`` (Platt's sigmoid from held-out decisions), ``cg`` and
``nystrom_pcg`` (conjugate gradients and their preconditioner past the Gram's memory),
``cg_search`` (a search solved by CG); docs/ridge.md.
"""
from .estimators import StreamingRidge, StreamingRidgeClassifier

__all__ = ["StreamingRidge", "StreamingRidgeClassifier"]
