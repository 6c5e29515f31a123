"""What the parameters of the stock layers may be: scikit-learn's constraints.

A stock layer lists its parameters' constraints in ``_parameter_constraints``,
as scikit-learn's estimators do, and :meth:`~sklearn.base.BaseEstimator._validate_params`
checks them when the layer is built, before the first epoch: a wrong type, a
negative, zero, NaN or a string for a flag is an ``InvalidParameterError`` (a
``ValueError`` and a ``TypeError``) naming the layer and the parameter and
echoing the value. The callbacks and the utilities use the same constraints.

scikit-learn counts ``True`` as the integer 1 and the number 1.0; a size, a
count or a rate given as a bool is a mistake here, so :class:`Count` and
:class:`Number` refuse bools.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from sknet.backend import ACTIVATIONS


class Count(Interval):
    """An interval of integers that are not bools."""

    def __init__(self, left=1, right=None, *, closed="left"):
        super().__init__(Integral, left, right, closed=closed)

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


class Number(Interval):
    """An interval of real numbers that are not bools (NaN is in no interval)."""

    def __init__(self, left=None, right=None, *, closed="neither"):
        super().__init__(Real, left, right, closed=closed)

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


#: a positive integer: units, filters, sizes
POSITIVE_INT = Count(1)
#: an activation name of :data:`sknet.backend.ACTIVATIONS`
ACTIVATION = StrOptions(set(ACTIVATIONS))
#: a size given as an int or a pair of ints (checked further by the layer)
INT_OR_PAIR = [Count(1), tuple, list]
#: padding: a name, a non-negative int, or a pair (checked further by the layer)
PADDING = [StrOptions({"valid", "same"}), Count(0), tuple, list]
#: an initializer: a name or a callable (checked further by the layer)
INITIALIZER = [str, callable]
#: the parameters every layer with parameters takes (see :class:`~sknet.layers.Layer`)
TRAINING_CONSTRAINTS = {
    "trainable": ["boolean"],
    "lr_scale": [Number(0, None)],
    "weights": [dict, None],
}
