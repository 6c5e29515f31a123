"""Optimizers: SGD (momentum, Nesterov), Adam and AdamW updating parameters in place,
scikit-learn's learning-rate schedules, and L-BFGS through SciPy.

A stochastic optimizer holds references to the layers' parameter arrays and
updates them in place with :meth:`step`; its state (velocities, moments) lives
on the backend next to the parameters and survives ``warm_start`` and
``partial_fit``. The update formulas of SGD and Adam are scikit-learn's
(``sklearn.neural_network._stochastic_optimizers``); AdamW's are PyTorch's
(``torch.optim.AdamW``).
"""

from abc import ABC, abstractmethod

import numpy as np

#: what an optimizer holds that is not its state: bound arrays, work array, spare copies
NOT_STATE = ("params", "backend", "_tmp", "_spare")


def copy_arrays(arrays, into=None):
    """Copies of ``arrays``, written into the arrays of ``into`` where they fit.

    ``into[i]`` receives ``arrays[i]`` when it has its shape, dtype, array
    kind and device (and is not that array); else the copy is a new array.
    """
    into = list(into or ())
    copies = []
    for i, array in enumerate(arrays):
        spare = into[i] if i < len(into) else None
        if (
            spare is not None
            and spare is not array
            and type(spare) is type(array)
            and spare.shape == array.shape
            and spare.dtype == array.dtype
            and getattr(spare, "device", None) == getattr(array, "device", None)
        ):
            spare[...] = array
            copies.append(spare)
        else:
            copies.append(array.copy())
    return copies


class StochasticOptimizer(ABC):
    """Base class: a learning rate, in-place updates, end-of-epoch hooks.

    Parameters
    ----------
    params : list of arrays
        The parameters to update, in place.
    backend : Backend
        The backend the parameters live on.
    learning_rate_init : float
        The initial learning rate.
    """

    #: names of the per-parameter state lists, for moving and pickling (an optimizer
    #: that averages the weights lists ``"averages"`` too: :meth:`start_averaging`)
    state_names = ()
    #: how much of the weights' moving average each step keeps (None: no average)
    average_decay = None

    def __init__(self, params, backend, learning_rate_init):
        self.learning_rate_init = learning_rate_init
        self.learning_rate = float(learning_rate_init)
        self._bind(params, backend)
        for name in self.state_names:
            setattr(self, name, [backend.xp.zeros_like(p) for p in params])

    def _bind(self, params, backend):
        tmp, before = self.__dict__.get("_tmp"), self.__dict__.get("backend")
        self.params = list(params)
        self.backend = backend
        size = max((p.size for p in self.params), default=0)
        dtype = self.params[0].dtype if self.params else np.float32
        # the work array of the last binding, where it still fits (each partial_fit rebinds)
        if tmp is None or before is not backend or tmp.dtype != dtype or tmp.size < size:
            tmp = backend.xp.empty(size, dtype=dtype)
        self._tmp = tmp

    def _tmp_like(self, p):
        return self._tmp[: p.size].reshape(p.shape)

    def rebind(self, params, backend, layout=None):
        """Point at new parameter arrays (after a move, a cast or unpickling).

        The state moves to ``backend`` and takes the parameters' dtype, so a
        warm fit in another dtype never mixes precisions. ``layout`` (one
        tuple of ``(layer, key, size)`` per array, from the trainer) says
        which parameter each part of an array holds: when layers were frozen
        or unfrozen, or ``lr_scale`` regrouped them, each parameter keeps its
        state, and a newly trained one starts from zero.
        """
        old_layout = self.__dict__.get("layout")
        self._bind(params, backend)
        if layout is not None and old_layout is not None and list(layout) != list(old_layout):
            for name in self.state_names:
                setattr(self, name, self._remap(getattr(self, name), old_layout, layout))
        else:
            for name in self.state_names:
                setattr(
                    self,
                    name,
                    [
                        backend.asarray(s, p.dtype)
                        for s, p in zip(getattr(self, name), self.params)
                    ],
                )
        if layout is not None:
            if old_layout is not None and list(layout) != list(old_layout):
                self._restart_averages()  # a newly trained parameter has no average yet
            self.layout = layout

    def follow(self, parameters):
        """Update the parameters of a :class:`~sknet.engine._layout.ParameterLayout`.

        Each parameter keeps its state across a re-layout (see :meth:`rebind`).
        """
        self.rebind(parameters.param_segments, parameters.backend, layout=parameters.entries)
        self.lr_scales = parameters.lr_scales

    def _remap(self, states, old_layout, layout):
        pieces = {}
        for state, segment in zip(states, old_layout):
            offset = 0
            for layer, key, size in segment:
                pieces[(layer, key)] = state[offset : offset + size]
                offset += size
        remapped = []
        for param, segment in zip(self.params, layout):
            new = self.backend.xp.zeros_like(param)
            offset = 0
            for layer, key, size in segment:
                if (layer, key) in pieces and pieces[(layer, key)].size == size:
                    new[offset : offset + size] = self.backend.asarray(pieces[(layer, key)])
                offset += size
            remapped.append(new)
        return remapped

    def _scaled(self, lr):
        """The learning rate of each parameter array (``lr_scale`` applied)."""
        scales = self.__dict__.get("lr_scales") or [1.0] * len(self.params)
        return [lr * scale for scale in scales]

    @abstractmethod
    def step(self, grads):
        """Update every parameter in place from its gradient (then their average)."""

    # -- the weights' moving average --------------------------------------------------
    def start_averaging(self, decay):
        """Keep an exponential moving average of the weights from now on.

        ``averages`` (one array a parameter array, a state list) start at the
        weights; after each step they move ``1 - decay`` of the way to the new
        weights. The trainer validates and returns the averages
        (:meth:`~sknet.engine._trainer.Trainer.end_epoch`).
        """
        self.average_decay = float(decay)
        if "averages" not in self.state_names:
            self.state_names = (*self.state_names, "averages")
        self._restart_averages()

    def stop_averaging(self):
        """No moving average of the weights (the default)."""
        self.average_decay = None
        self.__dict__.pop("averages", None)
        self.state_names = tuple(n for n in self.state_names if n != "averages")

    def _restart_averages(self):
        if self.average_decay is not None:
            self.averages = [p.copy() for p in self.params]

    def _average_step(self):
        """Move each average ``1 - average_decay`` of the way to its weights."""
        if self.average_decay is None:
            return
        share = 1.0 - self.average_decay
        for p, average in zip(self.params, self.averages):
            gap = self.backend.xp.subtract(p, average, out=self._tmp_like(p))
            gap *= share
            average += gap

    def snapshot(self, into=None):
        """Copies of the whole state, for :meth:`restore` after a failed fit.

        ``into`` (``{state name: arrays}``, an earlier snapshot's arrays that
        nothing else uses) receives the copies where its arrays fit
        (:func:`copy_arrays`): a fit transaction reuses them from one
        ``partial_fit`` call to the next instead of allocating new ones.
        """
        into = into or {}
        arrays = {
            name: copy_arrays(getattr(self, name), into.get(name)) for name in self.state_names
        }
        scalars = {
            k: v for k, v in vars(self).items() if k not in self.state_names and k not in NOT_STATE
        }
        return arrays, scalars

    def restore(self, snapshot):
        """Put back the state saved by :meth:`snapshot`, in place."""
        arrays, scalars = snapshot
        for name, saved in arrays.items():
            if name not in self.__dict__ and hasattr(self, "backend"):
                # the averages of an optimizer that averages, new to this one (a replica)
                setattr(
                    self,
                    name,
                    [self.backend.asarray(v, p.dtype).copy() for v, p in zip(saved, self.params)],
                )
                continue
            for state, value in zip(getattr(self, name), saved):
                state[...] = self.backend.asarray(value) if hasattr(self, "backend") else value
        self.__dict__.update(scalars)
        if "averages" not in self.state_names:  # restored to before averaging began
            self.__dict__.pop("averages", None)

    @property
    def base_learning_rate(self):
        """The learning rate a schedule sets (SGD's rate, Adam's step size)."""
        return self.learning_rate

    @base_learning_rate.setter
    def base_learning_rate(self, value):
        self.learning_rate = float(value)

    def iteration_ends(self, time_step):  # noqa: B027 (a hook: no-op unless overridden)
        """Called at the end of each epoch with the number of samples seen."""

    def trigger_stopping(self, msg, verbose):
        """Decide whether training stops when the loss stops improving."""
        if verbose:
            print(msg + " Stopping.")
        return True

    def set_hyperparameters(self, **hyperparameters):
        """Update hyperparameters in place (warm start with new settings)."""
        if hyperparameters.get("learning_rate_init", self.learning_rate_init) != (
            self.learning_rate_init
        ):
            self.learning_rate = float(hyperparameters["learning_rate_init"])
        for name, value in hyperparameters.items():
            setattr(self, name, value)

    def __getstate__(self):
        state = self.__dict__.copy()
        backend = state.pop("backend", None)
        state.pop("params", None)
        state.pop("_tmp", None)
        state.pop("_spare", None)  # the fit transaction's reusable copies
        if backend is not None:  # else unpickled and not yet rebound: NumPy already
            for name in self.state_names:
                state[name] = [backend.to_numpy(s) for s in state[name]]
        return state

    def __setstate__(self, state):
        # The estimator calls rebind() with the parameters on its backend.
        self.__dict__.update(state)


class SGD(StochasticOptimizer):
    """Stochastic gradient descent with momentum (optionally Nesterov's).

    Parameters
    ----------
    params : list of arrays
    backend : Backend
    learning_rate_init : float, default=0.1
    lr_schedule : {'constant', 'invscaling', 'adaptive'}, default='constant'
        ``'invscaling'``: ``learning_rate_init / (t + 1) ** power_t`` after each
        epoch, ``t`` the number of samples seen. ``'adaptive'``: divide by 5
        each time the loss stops improving, stop below 1e-6.
    momentum : float, default=0.9
    nesterov : bool, default=True
    power_t : float, default=0.5
    """

    state_names = ("velocities",)

    def __init__(
        self,
        params,
        backend,
        learning_rate_init=0.1,
        lr_schedule="constant",
        momentum=0.9,
        nesterov=True,
        power_t=0.5,
    ):
        super().__init__(params, backend, learning_rate_init)
        self.lr_schedule = lr_schedule
        self.momentum = momentum
        self.nesterov = nesterov
        self.power_t = power_t

    def step(self, grads):
        update = self.backend.sgd_update
        momentum, nesterov = self.momentum, self.nesterov
        for p, g, vel, lr in zip(
            self.params, grads, self.velocities, self._scaled(self.learning_rate)
        ):
            update(p, g, vel, lr, momentum, nesterov, self._tmp_like(p))
        self._average_step()

    def iteration_ends(self, time_step):
        if self.lr_schedule == "invscaling":
            self.learning_rate = float(self.learning_rate_init) / (time_step + 1) ** self.power_t

    def trigger_stopping(self, msg, verbose):
        if self.lr_schedule != "adaptive":
            return super().trigger_stopping(msg, verbose)
        if self.learning_rate <= 1e-6:
            if verbose:
                print(msg + " Learning rate too small. Stopping.")
            return True
        self.learning_rate /= 5.0
        if verbose:
            print(msg + " Setting learning rate to %f" % self.learning_rate)
        return False


class Adam(StochasticOptimizer):
    """Adam (Kingma & Ba, 2014) with bias correction folded into the step size.

    Parameters
    ----------
    params : list of arrays
    backend : Backend
    learning_rate_init : float, default=0.001
    beta_1, beta_2 : float, default=0.9, 0.999
    epsilon : float, default=1e-8
    """

    state_names = ("ms", "vs")

    def __init__(
        self,
        params,
        backend,
        learning_rate_init=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
    ):
        super().__init__(params, backend, learning_rate_init)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.t = 0

    @property
    def base_learning_rate(self):
        return self.learning_rate_init

    @base_learning_rate.setter
    def base_learning_rate(self, value):
        self.learning_rate_init = float(value)

    def step(self, grads):
        self.t += 1
        b1, b2 = self.beta_1, self.beta_2
        correction, bias = np.sqrt(1 - b2**self.t), 1 - b1**self.t
        self.learning_rate = self.learning_rate_init * correction / bias
        rates = self._step_sizes(correction, bias)
        update, eps = self.backend.adam_update, self._epsilon(correction)
        for p, g, m, v, lr in zip(self.params, grads, self.ms, self.vs, rates):
            update(p, g, m, v, lr, b1, b2, eps, self._tmp_like(p))
        self._average_step()

    def _step_sizes(self, correction, bias):
        """Each parameter array's step size: the bias-corrected rate times its ``lr_scale``.

        ``correction`` is ``sqrt(1 - beta_2**t)``, ``bias`` ``1 - beta_1**t``.
        Called before the update of step ``t``.
        """
        return self._scaled(self.learning_rate)

    def _epsilon(self, correction):
        """The epsilon the update adds to ``sqrt(v)`` (scikit-learn's place for it)."""
        return self.epsilon


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, ICLR 2019), as PyTorch's.

    Each step first shrinks the decayed parameters, ``p *= 1 - lr * weight_decay``
    (``lr`` the base step size times the layer's ``lr_scale``), then takes
    Adam's step, written as ``torch.optim.AdamW`` writes it: ``epsilon`` is
    added to the bias-corrected ``sqrt(v_hat)``, where :class:`Adam` (as
    scikit-learn) adds it to ``sqrt(v)``. The decay is not a gradient term:
    Adam's normalization does not scale it, so every weight shrinks by the
    same fraction whatever its gradients' size.

    Only the layers' ``regularized`` parameters decay (weights, not biases,
    normalization scales or embedding frequencies), the parameters the L2
    penalty ``alpha`` covers, as TabM and most recipes exclude biases and
    normalizations from weight decay.

    Parameters
    ----------
    params : list of arrays
    backend : Backend
    learning_rate_init : float, default=0.001
    beta_1, beta_2 : float, default=0.9, 0.999
    epsilon : float, default=1e-8
    weight_decay : float, default=0.01
        PyTorch's default.

    Attributes
    ----------
    decay_sizes : list of int
        How many leading values of each parameter array decay (the layout puts
        the regularized parameters first in each array).
    """

    def __init__(
        self,
        params,
        backend,
        learning_rate_init=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        weight_decay=0.01,
    ):
        super().__init__(params, backend, learning_rate_init, beta_1, beta_2, epsilon)
        self.weight_decay = weight_decay
        self.decay_sizes = [int(p.size) for p in self.params]

    def follow(self, parameters):
        super().follow(parameters)
        self.decay_sizes = decay_sizes(parameters)

    # Adam's step, with the two differences: the decay, and where epsilon goes.
    def _step_sizes(self, correction, bias):
        """Decay the decayed parameters (``p *= 1 - lr * weight_decay``), then torch's sizes.

        ``lr`` is the base step size times the array's ``lr_scale``; the
        arrays are disjoint, so decaying all of them before the updates is
        decaying each before its own.
        """
        wd, sizes = float(self.weight_decay), self.__dict__.get("decay_sizes") or ()
        rates = self._scaled(self.learning_rate_init)
        for p, size, lr in zip(self.params, sizes, rates):
            if wd and size:
                p[:size] *= 1.0 - lr * wd
        return [lr * correction / bias for lr in rates]

    def _epsilon(self, correction):
        # torch's epsilon on sqrt(v_hat) = sqrt(v) / correction is ours times correction
        return self.epsilon * correction


def decay_sizes(parameters):
    """How many leading values of each of ``parameters``' segments are regularized.

    ``parameters`` is the trainer's
    :class:`~sknet.engine._layout.ParameterLayout`, whose segments hold their
    regularized parameters first (its ``regularized_ranges``).
    """
    starts, offset = [], 0
    for segment in parameters.param_segments:
        starts.append(offset)
        offset += int(segment.size)
    sizes = [0] * len(starts)
    for start, stop in parameters.regularized_ranges:
        sizes[starts.index(start)] = stop - start
    return sizes


def make_optimizer(est, trainer, n_batches=None):
    """The optimizer ``est``'s parameters ask for, over ``trainer``'s parameter segments.

    scikit-learn's parameter names map to the optimizer's hyperparameters here;
    the initial rate is the estimator's ``_initial_learning_rate`` for epochs of
    ``n_batches`` batches (None: not known yet) where it has one.
    The estimator's previous optimizer (``_optimizer``) is kept when it is of
    the same kind: ``warm_start``/``partial_fit`` continue its moments and
    velocities, following each parameter (``rebind`` with the layout).
    """
    initial = getattr(est, "_initial_learning_rate", None)
    rate = est.learning_rate_init if initial is None else initial(n_batches)
    if est.solver == "sgd":
        cls, hyper = (
            SGD,
            dict(
                learning_rate_init=rate,
                lr_schedule=est.learning_rate,
                momentum=est.momentum,
                nesterov=est.nesterovs_momentum,
                power_t=est.power_t,
            ),
        )
    else:
        cls, hyper = (
            AdamW if est.solver == "adamw" else Adam,
            dict(
                learning_rate_init=rate,
                beta_1=est.beta_1,
                beta_2=est.beta_2,
                epsilon=est.epsilon,
            ),
        )
        if cls is AdamW:
            hyper["weight_decay"] = getattr(est, "weight_decay", 0.01)
    optimizer = getattr(est, "_optimizer", None)
    if type(optimizer) is cls:
        optimizer.follow(trainer.parameters)
        optimizer.set_hyperparameters(**hyper)
    else:
        optimizer = cls(trainer.parameters.param_segments, trainer.backend, **hyper)
        optimizer.layout = trainer.parameters.entries
        optimizer.lr_scales = trainer.parameters.lr_scales
        if cls is AdamW:
            optimizer.decay_sizes = decay_sizes(trainer.parameters)
    return optimizer
