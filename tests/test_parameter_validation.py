"""Every parameter of every public class and function is checked before the first epoch.

The walk at the end of this module finds the public names in the packages'
``__all__`` lists and, for every parameter of every constructor (and of the
public functions of :mod:`sknet.utils` and :mod:`sknet.datasets`), tries the
wrong type, a negative, zero, NaN and a string for a flag: each must be a
``ValueError`` or ``TypeError`` naming the parameter, raised by a one-epoch
fit at most (the trigger for layers, losses and callbacks). A value that is
legitimately valid is listed in :data:`VALID`, and the walk checks that it is
accepted; a public class the walk cannot exercise needs a recipe in
:data:`LAYER_RECIPES` (or a reason in :data:`NOT_CONSTRUCTED`), so a new class
or a new parameter cannot skip it.

Before it, the defects that the walk generalizes, each named.
"""

import importlib
import inspect
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from sknet import MLPClassifier, MLPRegressor
from sknet.callbacks import Callback, Checkpoint, EarlyStopping, LRScheduler, Unfreeze
from sknet.layers import Dense, Layer
from sknet.losses import Loss, SquaredError

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

rng = np.random.RandomState(0)
X = rng.rand(30, 3)
y = np.arange(30) % 2


def fit_with_callback(callback, **kwargs):
    params = dict(hidden_layer_sizes=(3,), max_iter=2, early_stopping=True, random_state=0)
    return MLPClassifier(**params, device="cpu", callbacks=[callback], **kwargs).fit(X, y)


# -- callbacks ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "callback, message",
    [
        # trained by gradient ascent: a negative rate
        (LRScheduler(policy="cosine", min_lr=-1), "'min_lr' parameter of LRScheduler"),
        # divided by zero after an epoch
        (LRScheduler(step_size=0), "'step_size' parameter of LRScheduler"),
        (LRScheduler(gamma=0), "'gamma' parameter of LRScheduler"),
        (LRScheduler(T_max=0), "'T_max' parameter of LRScheduler"),
        (LRScheduler(policy="linear"), "'policy' parameter of LRScheduler"),
        # stopped early and restored epoch 1: no value improves on NaN
        (EarlyStopping(min_delta=np.nan), "'min_delta' parameter of EarlyStopping"),
        (EarlyStopping(patience=-1), "'patience' parameter of EarlyStopping"),
        (EarlyStopping(restore_best_weights="no"), "'restore_best_weights' parameter of"),
        (Checkpoint(path=3), "'path' parameter of Checkpoint"),
        (Unfreeze(epoch=0), "'epoch' parameter of Unfreeze"),
        (Unfreeze(lr_scale=np.nan), "'lr_scale' parameter of Unfreeze"),
    ],
)
def test_callback_parameters_are_checked_before_the_first_epoch(callback, message):
    with pytest.raises(ValueError, match=message):
        fit_with_callback(callback, max_device_memory="not a size either")  # callbacks first


def test_a_user_callback_without_constraints_is_not_checked():
    from sknet.callbacks import Callback

    class Count(Callback):
        def __init__(self, every=0):
            self.every = every

    assert fit_with_callback(Count(every=-1)).callbacks_[0].every == -1


# -- flags are bools, not truthy values ----------------------------------------------------------
def test_use_bias_no_is_refused_not_read_as_true():
    from sknet import NeuralNetRegressor

    reg = NeuralNetRegressor([Dense(3, use_bias="no")], max_iter=1, device="cpu")
    with pytest.raises(ValueError, match="'use_bias' parameter of Dense must be an instance of"):
        reg.fit(X, y.astype(float))


@pytest.mark.parametrize("padding_value", [np.nan, np.inf, "0"])
def test_padding_value_must_be_a_finite_number(padding_value):
    """NaN padding would never match (NaN != NaN) and X is refused with NaN in it anyway."""
    from sknet import RNNClassifier

    clf = RNNClassifier(padding_value=padding_value, max_iter=1, device="cpu")
    with pytest.raises(ValueError, match="'padding_value' parameter of RNNClassifier"):
        clf.fit(X.reshape(30, 3, 1), y)


# -- the walk: every parameter of every public class and function --------------------------------

#: the packages whose ``__all__`` the walk reads (classes), and whose functions it walks too
PACKAGES = ["sknet", "sknet.layers", "sknet.losses", "sknet.callbacks", "sknet.utils",
            "sknet.datasets", "sknet.distributed"]  # fmt: skip
FUNCTION_PACKAGES = ["sknet.utils", "sknet.datasets", "sknet.layers"]

#: the values every parameter is tried with
BAD_VALUES = {
    "wrong type": object(),
    "negative": -1,
    "zero": 0,
    "NaN": float("nan"),
    "a string for a flag": "no",
}

#: public names that have no constructor a user calls with parameters, and why
NOT_CONSTRUCTED = {
    "Layer": "the base class: its trainable, lr_scale and weights are walked on every layer",
    "Loss": "the base class of losses; it takes no parameters",
    "Callback": "the base class of callbacks; it takes no parameters",
    "TrainingState": "made by the fit for the callbacks' hooks",
    "MemoryEstimate": "returned by estimate_memory",
    "WorkerLostError": "an exception sknet raises",
}

#: (owner, parameter) -> the kinds of BAD_VALUES that are legitimately valid there, and why;
#: the walk checks that each is accepted
VALID = {
    # estimators: scikit-learn's ranges
    ("*", "alpha"): {"zero": "no L2 penalty"},
    ("*", "power_t"): {"zero": "a constant inverse scaling"},
    ("*", "tol"): {"zero": "no tolerance"},
    ("*", "verbose"): {"zero": "silent"},
    ("*", "random_state"): {"zero": "a seed"},
    ("*", "momentum"): {"zero": "plain SGD"},
    ("*", "beta_1"): {"zero": "Adam without a first moment"},
    ("*", "beta_2"): {"zero": "Adam without a second moment"},
    ("*", "validation_fraction"): {"zero": "no split (early_stopping=False)"},
    ("*", "dropout"): {"zero": "no dropout"},
    ("*", "weight_decay"): {"zero": "no decay"},
    ("*", "label_smoothing"): {"zero": "the one-hot targets"},
    ("*", "padding_value"): {"negative": "a token id or feature value", "zero": "likewise"},
    ("FeatureExtractor", "layer"): {"negative": "counted from the end", "zero": "the first"},
    # layers
    ("Dropout", "rate"): {"zero": "the identity"},
    ("BatchNorm", "momentum"): {"zero": "the last batch's statistics"},
    ("*", "padding"): {"zero": "no padding"},
    ("MultiHeadAttention", "dropout"): {"zero": "no dropout"},
    ("TransformerEncoderBlock", "dropout"): {"zero": "no dropout"},
    ("Concatenate", "axis"): {"negative": "counted from the end", "zero": "the first axis"},
    # losses
    ("FocalLoss", "gamma"): {"zero": "the log-loss"},
    # callbacks
    ("EarlyStopping", "patience"): {"zero": "stop at the first epoch without improvement"},
    ("EarlyStopping", "min_delta"): {"zero": "any improvement counts"},
    ("LRScheduler", "patience"): {"zero": "reduce at the first epoch without improvement"},
    ("LRScheduler", "min_lr"): {"zero": "no floor"},
    ("LRScheduler", "warmup"): {"zero": "no warm-up"},
    ("LRScheduler", "monitor"): {"a string for a flag": "read by policy='plateau' only"},
    ("Checkpoint", "path"): {"a string for a flag": "a file name"},
    ("TensorBoardLogger", "histogram_freq"): {"zero": "no histograms"},
    ("MLflowLogger", "experiment_name"): {"a string for a flag": "an experiment's name"},
    ("MLflowLogger", "run_name"): {"a string for a flag": "a run's name"},
    # functions
    ("*", "path"): {"a string for a flag": "a file name (then not found)"},
    ("check_layer_gradients", "random_state"): {"zero": "a seed"},
    ("check_layer_gradients", "tol"): {},  # a check that cannot fail
    ("check_loss_gradients", "tol"): {},
    ("from_estimator", "upto"): {"negative": "layers_[:-1], as a slice counts"},
    ("check_loss_gradients", "random_state"): {"zero": "a seed"},
    ("embedding_size", "cardinality"): {"zero": "a column with no category (missing, unknown)"},
}


def valid_reason(owner, param, kind):
    """Why ``kind`` is valid for ``owner``'s ``param`` (its own entry first), or None."""
    entry = VALID.get((owner, param), VALID.get(("*", param), {}))
    return entry.get(kind)


# What fits each estimator (tiny, one epoch), and the data it takes.
def _rows(n=30, f=3):
    return np.random.RandomState(0).rand(n, f)


def _targets(kind, n=30):
    return np.arange(n) % 2 if kind == "classifier" else np.linspace(0, 1, n)


ESTIMATOR_DATA = {  # estimator name prefix -> one sample's shape
    "MLP": (3,),
    "NeuralNet": (3,),
    "Tabular": (3,),
    "ConvNet": (1, 6, 6),
    "RNN": (4, 2),
}
FAST = dict(max_iter=1, random_state=0, device="cpu")
SMALL = dict(hidden_layer_sizes=(3,), conv_filters=(2,), dense_units=(), units=3)


def estimator_fit(cls, kwargs):
    est = cls(**kwargs) if cls.__name__ != "FeatureExtractor" else None
    if est is None:
        base = dict(estimator=MLPClassifier(hidden_layer_sizes=(3,), **FAST))
        est, shape, kind = cls(**{**base, **kwargs}), (3,), "classifier"
    else:
        names = est.get_params(deep=False)
        est.set_params(
            **{k: v for k, v in {**SMALL, **FAST}.items() if k in names and k not in kwargs}
        )
        shape = next(s for prefix, s in ESTIMATOR_DATA.items() if cls.__name__.startswith(prefix))
        kind = "classifier" if "Classifier" in cls.__name__ else "regressor"
    X_fit = np.random.RandomState(0).rand(30, *shape)
    return lambda: est.fit(X_fit, _targets(kind))


# What builds each layer: its required arguments, the layers around it, the input.
def _images():
    return np.random.RandomState(0).rand(30, 1, 6, 6)


def _sequences():
    return np.random.RandomState(0).rand(30, 5, 4)


def _codes():
    return np.random.RandomState(0).randint(0, 3, (30, 2))


def _ids():
    return np.random.RandomState(0).randint(0, 10, (30, 5))


LAYER_RECIPES = {  # name -> (required arguments, layers before it, input)
    "Activation": ({}, [], _rows),
    "AvgPool1D": ({}, [], _sequences),
    "AvgPool2D": ({}, [], _images),
    "BatchNorm": ({}, [], _rows),
    "CategoricalEmbedding": ({"cardinalities": [3, 3]}, [], _codes),
    "Concatenate": ({"branches": [Dense(2), Dense(2)]}, [], _rows),
    "Conv1D": ({"filters": 2}, [], _sequences),
    "Conv2D": ({"filters": 2}, [], _images),
    "Dense": ({"units": 2}, [], _rows),
    "Dropout": ({}, [], _rows),
    "Embedding": ({"input_dim": 10, "output_dim": 2}, [], _ids),
    "EnsembleDense": ({"units": 2}, ["EnsembleInput"], _rows),
    "EnsembleHead": ({"units": 1}, ["EnsembleInput"], _rows),
    "EnsembleInput": ({"k": 2}, [], _rows),
    "Flatten": ({}, [], _images),
    "GRU": ({"units": 2}, [], _sequences),
    "GlobalAvgPool1D": ({}, [], _sequences),
    "GlobalAvgPool2D": ({}, [], _images),
    "GlobalMaxPool1D": ({}, [], _sequences),
    "LSTM": ({"units": 2}, [], _sequences),
    "Lambda": ({"func": np.tanh}, [], _rows),
    "LayerNorm": ({}, [], _rows),
    "MaxPool1D": ({}, [], _sequences),
    "MaxPool2D": ({}, [], _images),
    "MultiHeadAttention": ({"num_heads": 2}, [], _sequences),
    "PeriodicEmbedding": ({"n_frequencies": 2, "d_embedding": 2}, [], _rows),
    "PiecewiseLinearEncoding": ({"bins": [[0.0, 0.5, 1.0]] * 3}, [], _rows),
    "PositionEmbedding": ({}, [], _sequences),
    "Residual": ({"layers": [Dense(3)]}, [], _rows),
    "SelectColumns": ({"columns": [0, 1]}, [], _rows),
    "Sequential": ({"layers": [Dense(2)]}, [], _rows),
    "SimpleRNN": ({"units": 2}, [], _sequences),
    "SinusoidalPositionEmbedding": ({}, [], _sequences),
    "TimeDistributed": ({"layer": Dense(2)}, [], _sequences),
    "TransformerEncoderBlock": ({"num_heads": 2}, [], _sequences),
}


def layer_fit(cls, kwargs):
    from sknet import NeuralNetRegressor
    from sknet import layers as stock

    required, before, data = LAYER_RECIPES[cls.__name__]
    before = [getattr(stock, name)(2) for name in before]
    layer = cls(**{**required, **kwargs})
    reg = NeuralNetRegressor(layers=before + [layer], **FAST)
    X_fit = data()
    return lambda: reg.fit(X_fit, _targets("regressor"))


LOSS_RECIPES = {"EnsembleLoss": {"loss": SquaredError()}}


def loss_fit(cls, kwargs):
    loss = cls(**{**LOSS_RECIPES.get(cls.__name__, {}), **kwargs})
    classification = cls.__name__ in ("LogLoss", "FocalLoss")
    est = (MLPClassifier if classification else MLPRegressor)(
        loss=loss, hidden_layer_sizes=(3,), **FAST
    )
    kind = "classifier" if classification else "regressor"
    return lambda: est.fit(_rows(), _targets(kind))


#: callbacks whose fits import a library (an extra); the walk skips them without it
CALLBACK_LIBRARIES = {"TensorBoardLogger": "tensorboard", "MLflowLogger": "mlflow",
                      "OptunaPruning": "optuna"}  # fmt: skip


def callback_fit(cls, kwargs, tmp_path):
    if cls.__name__ in CALLBACK_LIBRARIES:
        pytest.importorskip(CALLBACK_LIBRARIES[cls.__name__])
    required = {"path": str(tmp_path / "model.joblib")} if cls.__name__ == "Checkpoint" else {}
    if cls.__name__ == "OptunaPruning":
        import optuna

        required = {"trial": optuna.create_study(storage=None).ask()}
    callback = cls(**{**required, **kwargs})
    est = MLPClassifier(hidden_layer_sizes=(3,), early_stopping=True, callbacks=[callback], **FAST)
    return lambda: est.fit(_rows(), _targets("classifier"))


def _fitted_mlp():
    return MLPClassifier(hidden_layer_sizes=(3,), **FAST).fit(_rows(), _targets("classifier"))


FUNCTION_RECIPES = {  # name -> the valid arguments of a call
    "check_layer_gradients": lambda: {"layer": Dense(2), "input_shape": (3,)},
    "check_loss_gradients": lambda: {"loss": "huber"},
    "estimate_memory": lambda: {
        "estimator": MLPClassifier(hidden_layer_sizes=(3,), device="cpu"),
        "X": _rows(),
        "y": _targets("classifier"),
    },
    "load_mnist": lambda: {"path": "no such directory"},
    "load_cifar10": lambda: {"path": "no such directory"},
    "load_image_folder": lambda: {"path": "no such directory"},
    "read_idx": lambda: {"path": "no such file"},
    "from_estimator": lambda: {"estimator": _fitted_mlp()},
    "embedding_size": lambda: {"cardinality": 10},
    "quantile_bins": lambda: {"X": _rows(), "n_bins": 4},
}


def function_call(function, kwargs):
    arguments = {**FUNCTION_RECIPES[function.__name__](), **kwargs}
    return lambda: function(**arguments)


def _discover():
    owners = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or (package in FUNCTION_PACKAGES and inspect.isfunction(obj)):
                owners.setdefault(name, obj)
    cases = []
    for name, obj in sorted(owners.items()):
        if name in NOT_CONSTRUCTED:
            continue
        function = inspect.isfunction(obj)
        signature = inspect.signature(obj if function else obj.__init__)
        params = [
            p.name
            for p in list(signature.parameters.values())[0 if function else 1 :]
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        cases += [pytest.param(name, obj, p, id=f"{name}.{p}") for p in params]
        if not params and not function and not issubclass(obj, (Callback, Loss, Layer)):
            cases.append(pytest.param(name, obj, None, id=f"{name}.(no parameters)"))
    return cases


def trigger(owner, obj, kwargs, tmp_path):
    """The call that must refuse ``kwargs``: a one-epoch fit, a build, or the function."""
    if inspect.isfunction(obj):
        return function_call(obj, kwargs)
    if issubclass(obj, Layer):
        return layer_fit(obj, kwargs)
    if issubclass(obj, Loss):
        return loss_fit(obj, kwargs)
    if issubclass(obj, Callback):
        return callback_fit(obj, kwargs, tmp_path)
    if owner == "DataParallel":  # its fit needs a Dask cluster (tests/distributed has one)
        return lambda: obj(MLPClassifier(), **kwargs)._validate_params()
    if owner == "SklearnGlorotUniform":  # an initializer: built by a Dense
        return layer_fit(Dense, {"init": obj(**kwargs)})
    if issubclass(obj, BaseEstimator):
        return estimator_fit(obj, kwargs)
    raise AssertionError(
        f"{owner}: no way to exercise it; add a recipe or a NOT_CONSTRUCTED reason"
    )


@pytest.mark.parametrize("owner, obj, param", _discover())
def test_every_parameter_refuses_bad_values_naming_itself(
    owner, obj, param, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a path given as a string lands here
    if param is None:
        return  # no parameters: nothing to refuse
    if inspect.isclass(obj) and issubclass(obj, Layer) and owner not in LAYER_RECIPES:
        pytest.fail(f"{owner} has no recipe in LAYER_RECIPES: the walk cannot build it")
    if inspect.isfunction(obj) and owner not in FUNCTION_RECIPES:
        pytest.fail(f"{owner} has no recipe in FUNCTION_RECIPES: the walk cannot call it")
    problems = []
    for kind, value in BAD_VALUES.items():
        run = trigger(owner, obj, {param: value}, tmp_path)
        reason = valid_reason(owner, param, kind)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run()
            except (ValueError, TypeError) as exc:
                if reason is not None:
                    if param in str(exc):
                        problems.append(f"{kind} {value!r} is listed valid ({reason}): {exc}")
                elif param not in str(exc):
                    problems.append(f"{kind} {value!r}: the error does not name it: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - a loader's missing file, say
                if reason is None:
                    problems.append(f"{kind} {value!r}: {type(exc).__name__}: {exc}")
                continue
        if reason is None:
            problems.append(f"{kind} {value!r} was accepted")
    assert not problems, f"{owner}({param}=...):\n  " + "\n  ".join(problems)
