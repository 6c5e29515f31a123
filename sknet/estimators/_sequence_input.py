"""Sequences of any length in: ragged lists, and padded arrays of any width at predict.

A mixin of the network estimator (:class:`~sknet.estimators._neural_net._NeuralNet`)
for samples that are sequences, token ids ``(steps,)`` or steps of features
``(steps, features)``, whose padding ``padding_value`` marks:

- a list of sequences of different lengths (1-D or 2-D arrays) is padded
  after each sequence with ``padding_value`` (:func:`~sknet.text.pad_sequences`);
  a fit learns the longest one's number of steps (or ``input_shape``'s);
- an array of another number of steps is brought to the fitted one: padded
  after its steps, or its trailing padding cut. With the padding masked, a
  sequence gets the same prediction however it was padded;
- at predict, a sequence longer than the fitted width (real steps beyond it)
  runs at a wider width, twice the fitted one or four times..., the least
  that holds it, so that its prediction depends on the sequence alone; the
  network is rebuilt at that width with the fitted weights, which only a
  network whose weights do not depend on the number of steps allows
  (recurrent layers, attention, convolutions, global pooling, embeddings,
  sinusoidal positions; not a ``Flatten`` and ``Dense`` over the steps nor
  a learned ``PositionEmbedding``). Otherwise a ValueError names the layer.
  Training data (``partial_fit``, a warm start, a validation set) cannot be
  longer: the training network has the fitted width.

Training runs every batch at the fitted width, unless ``group_by_length``
groups the batches by length and cuts each to its longest sequence
(:mod:`sknet.engine._lengths`); :meth:`SequenceInputMixin._step_lengths`
gives the trainer each row's length.
"""

import math

import numpy as np
from sklearn.utils.validation import check_array

from sknet.backend import get_array_module, is_device_array
from sknet.engine._lengths import build_at_steps, sequence_lengths_of
from sknet.engine._validation import check_finite, warn_non_finite_outputs
from sknet.text._sequences import pad_sequences, sequence_lengths


def is_ragged(X):
    """Whether ``X`` is a list of sequences (1-D or 2-D) of different lengths."""
    if isinstance(X, np.ndarray):
        if X.dtype != object or X.ndim != 1:
            return False
    elif not isinstance(X, (list, tuple)):
        return False
    shapes = set()
    for item in X:
        if isinstance(item, (str, bytes)) or not hasattr(item, "__len__"):
            return False
        try:
            shapes.add(np.shape(item))
        except ValueError:  # an item ragged itself
            return False
    return len(shapes) > 1 and all(len(shape) in (1, 2) for shape in shapes)


def wider_width(length, steps):
    """The width a sequence of ``length`` steps runs at: ``steps`` doubled until it holds it."""
    width = steps
    while width < length:
        width *= 2
    return width


class StepGroups:
    """The rows of a prediction by the number of steps they run at.

    ``groups`` is a list of ``(rows, X, steps)``: host indices into the
    ``n_rows`` rows, the validated rows, their number of steps.
    """

    def __init__(self, n_rows, groups):
        self.n_rows = n_rows
        self.groups = groups


def outputs_by_width(est, X, predict):
    """``predict(network, X)`` for validated ``X``; for :class:`StepGroups`, by group.

    Each group runs on the network of its number of steps (the fitted one, or
    one rebuilt wider, :meth:`SequenceInputMixin._network_at`) and the
    outputs are put back in the rows' order.
    """
    if not isinstance(X, StepGroups):
        return predict(est.network_, X)
    fitted_steps, P = est.input_shape_[0], None
    for rows, rows_X, steps in X.groups:
        network = est.network_ if steps == fitted_steps else est._network_at(steps)
        part = predict(network, rows_X)
        if P is None:
            xp = get_array_module(part)
            P = xp.empty((X.n_rows,) + part.shape[1:], dtype=part.dtype)
        elif part.shape[1:] != P.shape[1:]:
            raise ValueError(
                f"The outputs have a shape that depends on the number of steps "
                f"({part.shape[1:]} for sequences of {steps} steps, {P.shape[1:]} for "
                f"others): sequences longer than the {fitted_steps} steps "
                f"{type(est).__name__} was fitted on cannot be put together with the "
                f"others; cut them to {fitted_steps} steps"
            )
        P[get_array_module(P).asarray(rows)] = part
    return P


class SequenceInputMixin:
    """Ragged lists and any number of steps (a mixin of the network estimator)."""

    def _takes_sequences(self):
        """Whether samples are sequences: padding marked, token ids, or an RNN's."""
        return (
            self._padding_value() is not None
            or self._takes_token_ids()
            or self._sample_noun == "sequences"
        )

    def _step_lengths(self, X):
        """Each training row's steps up to its last real one, for ``group_by_length``
        (``None``: batches at the fitted width)."""
        if not getattr(self, "group_by_length", False) or len(self.input_shape_) < 1:
            return None
        X = X.get() if is_device_array(X) else X  # once a fit, to the host
        return sequence_lengths_of(self.network_, X)

    def _padded(self, X, name, reset):
        """A ragged list of sequences padded with ``padding_value``; ``X`` as is otherwise."""
        if not is_ragged(X):
            return X
        value = self._padding_value()
        if value is None:
            raise ValueError(
                f"{name} is a list of sequences of different lengths: set padding_value "
                "(the value padded steps hold, 0 for token ids) to have them padded and "
                "the padding masked"
            )
        X = pad_sequences(X, value=value)
        shape = getattr(self, "input_shape", None)
        if reset and shape is not None and X.shape[1] < shape[0]:  # padded to input_shape
            X = pad_sequences(list(X), shape[0], value=value)
        return X

    def _steps_of(self, X):
        """``(sequences, steps)`` when ``X`` holds sequences of another width than fitted.

        ``sequences`` is ``X`` as an array ``(n, steps)`` or ``(n, steps,
        features)``; ``None`` when ``X`` is not such an array (then the usual
        checks take it).
        """
        shape = getattr(self, "input_shape_", None)
        if shape is None or len(shape) not in (1, 2) or not self._takes_sequences():
            return None
        if hasattr(X, "iloc") or hasattr(X, "tocsr"):  # a DataFrame, a sparse matrix
            return None
        array = X if is_device_array(X) else np.asarray(X)
        if array.dtype.kind not in "biuf" or array.ndim not in (2, 3) or not array.shape[0]:
            return None
        if len(shape) == 1:
            steps = array.shape[1] if array.ndim == 2 else None
        elif array.ndim == 3:
            steps = array.shape[1] if array.shape[2] == shape[1] else None
        elif array.shape[1] % shape[1] == 0:  # flat rows of steps of features
            array = array.reshape(array.shape[0], -1, shape[1])
            steps = array.shape[1]
        else:
            steps = None
        return None if steps is None or steps == shape[0] else (array, steps)

    def _as_fitted_steps(self, X, name, *, longer):
        """``X`` at the fitted number of steps (or as :class:`StepGroups`, ``longer`` rows).

        ``X`` is returned as it is unless it holds sequences of another width.
        ``longer`` allows sequences longer than the fitted width (at predict).
        """
        found = self._steps_of(X)
        if found is None:
            return X
        array, steps = found
        fitted, value = self.input_shape_[0], self._padding_value()
        if value is None:
            raise ValueError(self._no_padding_message(np.ndim(X) == 2, steps, name))
        lengths = sequence_lengths(array, value)
        lengths = np.asarray(lengths.get() if is_device_array(lengths) else lengths)
        if lengths.max() <= fitted:
            return _at_width(array, fitted, value)
        if not longer:
            raise ValueError(
                f"{name} has a sequence of {lengths.max()} steps (up to its last real "
                f"one), longer than the {fitted} steps this {type(self).__name__} was "
                f"fitted on: training data must fit the fitted width; cut the sequences "
                f"to {fitted} steps (TextVectorizer(output_sequence_length={fitted}))"
            )
        widths = np.asarray([wider_width(n, fitted) for n in lengths])
        groups = []
        for width in np.unique(widths):
            rows = np.flatnonzero(widths == width)
            part = _at_width(array[get_array_module(array).asarray(rows)], int(width), value)
            groups.append((rows, part, int(width)))
        return StepGroups(array.shape[0], groups)

    def _no_padding_message(self, flat, steps, name):
        fitted, per_step = self.input_shape_[0], math.prod(self.input_shape_[1:])
        if flat:  # scikit-learn's words
            said = (
                f"{name} has {steps * per_step} features, but {type(self).__name__} is "
                f"expecting {fitted * per_step} features as input"
            )
        else:
            said = (
                f"{name} has sequences of {steps} steps, but this {type(self).__name__} "
                f"was fitted on sequences of {fitted} steps"
            )
        return (
            f"{said}. Set padding_value (the value padded steps hold, 0 for token ids) "
            "to give sequences padded to any number of steps, or a list of sequences "
            "of different lengths: the padding is then masked"
        )

    def _validate_wider(self, X):
        """Rows of more steps than fitted, checked as a prediction's ``X`` is."""
        flat = X.reshape(X.shape[0], -1)
        if not is_device_array(flat):
            flat = check_array(
                flat, dtype=self._X_dtype(), ensure_all_finite=False, estimator=self
            )
        check_finite(flat, self._np_dtype, "X")
        return self._check_token_ids(flat, "X")

    def _network_at(self, steps):
        """The fitted network rebuilt for sequences of ``steps`` steps, its weights copied.

        A ValueError naming the layer when the network cannot take them: a
        layer refuses the width, or has weights whose shape depends on it.
        """
        fitted = self.network_
        try:
            network = build_at_steps(fitted, steps)
        except ValueError as exc:
            message = self._fixed_width_message(steps, f"building it failed: {exc}")
            raise ValueError(message) from exc
        for (key, new), (_, old) in zip(network.leaves(), fitted.leaves()):
            new_shapes = [a.shape for a in (*new.params.values(), *new.state.values())]
            old_shapes = [a.shape for a in (*old.params.values(), *old.state.values())]
            if new_shapes != old_shapes:
                where = f"layers_[{key}]" if not isinstance(key, tuple) else f"layers_{list(key)}"
                raise ValueError(
                    self._fixed_width_message(
                        steps,
                        f"{type(old).__name__} ({where}) has weights whose shape depends on "
                        "the number of steps",
                    )
                )
        network.load_weights(fitted.weights())
        return network

    def _fixed_width_message(self, steps, reason):
        fitted = self.input_shape_[0]
        return (
            f"X has sequences longer than the {fitted} steps this {type(self).__name__} "
            f"was fitted on, which its network cannot run at {steps} steps: {reason}. "
            f"Cut the sequences to {fitted} steps (TextVectorizer(output_sequence_length="
            f"{fitted}), pad_sequences(maxlen={fitted}))"
        )

    def _predict_outputs(self, X):
        def outputs(network, rows):
            P = network.predict(rows, output=self._loss.output)
            warn_non_finite_outputs(network, rows, P, "The outputs", output=self._loss.output)
            return P

        if not isinstance(X, StepGroups):
            return super()._predict_outputs(X)
        return outputs_by_width(self, X, outputs)


def _at_width(array, steps, value):
    """``array`` of sequences with ``steps`` steps: its last ones cut, or padding after."""
    if array.shape[1] >= steps:
        return array[:, :steps]
    xp, dtype = get_array_module(array), array.dtype
    if dtype.kind in "biu" and not float(value).is_integer():
        dtype = np.dtype(np.float64)  # a padding value that is no id
    padded = xp.full((array.shape[0], steps) + array.shape[2:], value, dtype=dtype)
    padded[:, : array.shape[1]] = array
    return padded
