"""The training engine: estimator-agnostic training of a built layer tree.

What it holds: the built network (:mod:`~sknet.engine._network`), the
trainer's epoch loop (:mod:`~sknet.engine._trainer`), the flat parameter
layout, the split of batches over threads, L-BFGS, the optimizers, the memory
estimate and the placement of the training data, the fit transaction,
scikit-learn's convergence rules, validation sets, the warm-start fingerprint,
and the hook interface of callbacks with the state they see.

What it may import: :mod:`sknet.layers`, :mod:`sknet.losses`,
:mod:`sknet.autodiff`, :mod:`sknet.backend`. Never the estimators, the
user-facing modules (:mod:`sknet.callbacks`, :mod:`sknet.utils`, ...) or
:mod:`sknet.distributed`: those import the engine. It has no public names;
users reach it through the estimators.
"""
