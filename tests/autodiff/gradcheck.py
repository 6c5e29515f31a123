"""The gradient check the autodiff tests share: recorded VJPs against central differences.

``check_primitive`` differentiates ``L = sum(f(inputs) * R)`` for a random ``R``
with respect to every input, and compares with the central differences of
``L`` that :func:`sknet.utils.check_layer_gradients` uses too.
"""

import numpy as np
from numpy.testing import assert_allclose

from sknet import autodiff as ad
from sknet.utils import _central_differences


def check_primitive(backend, fn, arrays, eps=1e-6):
    """Largest relative error of the recorded gradients against central differences.

    Parameters
    ----------
    backend : Backend
        Where the arrays live.
    fn : callable
        ``fn(*inputs)``, every input a float64 array of ``arrays``' shapes.
    arrays : list of ndarray
        The point at which the gradients are compared (host arrays).
    eps : float, default=1e-6
        The step of the central differences.

    Returns
    -------
    error : float
        The largest difference, over the inputs, relative to the largest entry
        of the finite-difference gradient (or 1e-3 where that is smaller).
    """
    inputs = [backend.asarray(a, np.float64) for a in arrays]
    variables = [ad.Variable(x) for x in inputs]
    out = fn(*variables)
    assert ad.is_variable(out), "a recorded input must give a recorded output"
    R = backend.asarray(np.random.RandomState(1).standard_normal(out.shape), np.float64)
    analytic = ad.gradients(out, R, variables)
    plain = fn(*inputs)  # unrecorded: a plain array with the same values
    assert not ad.is_variable(plain)
    assert_allclose(backend.to_numpy(plain), backend.to_numpy(out.data))

    host = [np.array(a, dtype=np.float64) for a in arrays]
    worst = 0.0
    for i, grad in enumerate(analytic):
        assert grad is not None and tuple(grad.shape) == host[i].shape
        assert grad.dtype == np.float64

        def loss(shifted, i=i):
            values = [shifted if k == i else h for k, h in enumerate(host)]
            out = fn(*[backend.asarray(v, np.float64) for v in values])
            return float((out * R).sum())

        numeric = _central_differences(loss, host[i], eps)
        scale = max(np.abs(numeric).max(initial=0.0), 1e-3)
        worst = max(worst, float(np.abs(backend.to_numpy(grad) - numeric).max() / scale))
    return worst
