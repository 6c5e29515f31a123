"""Property tests: random small networks, checked where the capabilities meet.

Each seed builds a network from a random mix of what a user can compose:
nested containers (``Sequential``, ``Residual``, ``Concatenate``, a user's
containers, one declaring its sublayers and holding a parameter of its own,
one found by discovery), stock layers with hand-written backward passes and
running statistics, forward-only layers (differentiated by ``sknet.autodiff``),
user layers with parameters, and frozen layers. Every network is checked:

- its gradients against finite differences (float64, ``check_layer_gradients``);
- a fit with batches split over threads against a fit with whole batches;
- a fit with the data streamed from host memory against one with the data in place;
- a pickled and unpickled model against the original, predicting and training on;
- early stopping: every array of the tree is the best epoch's, bit for bit;
- a warm start after ``trainable`` changed at any depth: frozen arrays stay, flags arrive;
- a warm fit that fails: every array of the tree, and every flag, as before it.

Seeds of ``TABULAR_SEEDS`` start with a table's embeddings instead (piecewise-linear
encodings over quantile bins, periodic embeddings, categorical codes embedded beside
them through ``SelectColumns`` branches) and may hold an ensemble of members
(``EnsembleInput``, ``EnsembleDense``, ``EnsembleHead``, flattened back to features).

Random recurrent networks (recurrent layers inside every kind of container,
``TimeDistributed`` included) are checked with padding: sequences padded before
their steps or after them give the same outputs and train the same.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

import sknet.engine._sharding as sharding
from sknet import NeuralNetRegressor
from sknet import autodiff as ad
from sknet.callbacks import Callback, EarlyStopping
from sknet.layers import (
    GRU,
    LSTM,
    BatchNorm,
    CategoricalEmbedding,
    Concatenate,
    Dense,
    Dropout,
    EnsembleDense,
    EnsembleHead,
    EnsembleInput,
    Flatten,
    GlobalAvgPool1D,
    Layer,
    PeriodicEmbedding,
    PiecewiseLinearEncoding,
    Residual,
    SelectColumns,
    Sequential,
    SimpleRNN,
    TimeDistributed,
    quantile_bins,
)
from sknet.layers._tree import walk
from sknet.utils import check_layer_gradients, estimate_memory
from tests.user_containers import Gate, Wrap

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SEEDS = range(8)
TABULAR_SEEDS = range(8, 12)
TREE_SEEDS = [*SEEDS, *TABULAR_SEEDS]
N_FEATURES = 6


class Swish(Layer):
    """Forward-only, no parameters."""

    def forward(self, X, *, training):
        return X * ad.sigmoid(X)


class Affine(Layer):
    """Forward-only, with parameters (declared with add_param)."""

    def __init__(self, units=4):
        self.units = units

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        n = input_shape[0]
        self.add_param("W", rng.normal(0, n**-0.5, (n, self.units)), regularized=True)
        self.add_param("b", rng.normal(0, 0.1, self.units))
        return (self.units,)

    def forward(self, X, *, training):
        return ad.tanh(X @ self.params["W"] + self.params["b"])


def _block(rng, width, depth, frozen_ok):
    """A random layer taking and returning samples of ``width`` features."""
    kinds = ["dense", "swish", "affine", "batchnorm"] + (
        ["sequential", "residual", "concat", "gate", "wrap"] if depth < 2 else []
    )
    kind = kinds[rng.randint(len(kinds))]
    trainable = not (frozen_ok and rng.rand() < 0.3)
    if kind == "dense":
        act = ["relu", "tanh", "logistic", None][rng.randint(4)]
        return Dense(width, activation=act, trainable=trainable)
    if kind == "swish":
        return Swish()
    if kind == "affine":
        return Affine(width, trainable=trainable)
    if kind == "batchnorm":
        return BatchNorm(trainable=trainable)
    if kind == "gate":
        return Gate(_block(rng, width, depth + 1, frozen_ok))
    if kind == "wrap":
        return Wrap(_block(rng, width, depth + 1, frozen_ok))
    inner = [_block(rng, width, depth + 1, frozen_ok) for _ in range(rng.randint(1, 3))]
    if kind == "sequential":
        return Sequential(inner, trainable=None if rng.rand() < 0.7 else trainable)
    if kind == "residual":
        return Residual(inner)
    first = width // 2
    return Concatenate([Sequential([*inner[:-1], Dense(first)]), Affine(width - first)])


def _tabular_input(rng, seed, frozen_ok):
    """A first layer taking a table's N_FEATURES columns to N_FEATURES features."""
    trainable = not (frozen_ok and rng.rand() < 0.3)
    bins = quantile_bins(rng.normal(size=(200, N_FEATURES)), n_bins=rng.randint(1, 5))
    kind = ["ple", "periodic", "columns"][seed % 3]  # each kind in TABULAR_SEEDS
    if kind == "ple":  # one embedding value per feature
        return PiecewiseLinearEncoding(bins, 1, "relu", trainable=trainable)
    if kind == "periodic":
        return PeriodicEmbedding(3, sigma=0.5, d_embedding=1, lite=rng.rand() < 0.5)
    numeric, codes = [0, 1, 2], [3, 4, 5]  # the normal draws round to codes -3..3
    return Concatenate(
        [
            Sequential([SelectColumns(numeric), PiecewiseLinearEncoding(bins[:3], 1)]),
            Sequential(
                [SelectColumns(codes), CategoricalEmbedding([2, 3, 1], 1, trainable=trainable)]
            ),
        ]
    )


def _ensemble_block(rng, width, frozen_ok, dropout):
    """Two members through BatchEnsemble layers, flattened back to ``width`` features."""
    trainable = not (frozen_ok and rng.rand() < 0.3)
    act = ["relu", "tanh", None][rng.randint(3)]
    inner = [EnsembleInput(2), EnsembleDense(width, act, r_init="normal", trainable=trainable)]
    inner += [Dropout(0.2)] if dropout else []
    inner += [EnsembleHead(width // 2, trainable=trainable), Flatten()]
    return Sequential(inner)


def random_layers(seed, *, frozen_ok=True, dropout=False):
    rng = np.random.RandomState(seed)
    tabular = seed in TABULAR_SEEDS
    first = (
        _tabular_input(rng, seed, frozen_ok) if tabular else Dense(N_FEATURES, activation="tanh")
    )
    layers = [first]  # the data's own width first
    for _ in range(rng.randint(1, 4)):
        if tabular and rng.rand() < 0.5:
            layers.append(_ensemble_block(rng, N_FEATURES, frozen_ok, dropout))
        else:
            layers.append(_block(rng, N_FEATURES, 0, frozen_ok))
        if dropout and rng.rand() < 0.5:
            layers.append(Dropout(0.2))
    return layers


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(160, N_FEATURES))
    y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], X[:, 3] - X[:, 4]])
    return X, y


def make(layers, **kw):
    params = dict(
        max_iter=3, batch_size=40, random_state=0, device="cpu", dtype="float64", alpha=1e-3
    )
    return NeuralNetRegressor(layers, **{**params, **kw})


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_gradients_of_a_random_network(seed):
    network = Sequential(random_layers(seed, frozen_ok=False))
    errors = check_layer_gradients(network, (N_FEATURES,), n_samples=5, random_state=seed)
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_frozen_layers_of_a_random_network_stay_bit_identical(seed, data):
    X, y = data
    layers = random_layers(seed)
    start = make(layers, max_iter=1).fit(X, y)
    before = {
        key: {k: v.copy() for k, v in leaf.params.items()} for key, leaf in start.network_.leaves()
    }
    trained = make(layers, warm_start=True).fit(
        X, y
    )  # a fresh network (not warm yet): the same start
    for key, leaf in trained.network_.leaves():
        if leaf.params and not leaf.trainable:
            for name, value in leaf.params.items():
                assert_array_equal(value, before[key][name])


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_a_random_network_trains_the_same_split_over_threads(seed, data, monkeypatch):
    X, y = data
    layers = random_layers(seed, dropout=True)
    monkeypatch.setattr(sharding, "MIN_SHARD_WORK", 0)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 1)
    whole = make(layers).fit(X, y)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    shardable = all(layer.shardable for layer in whole.layers_)
    split = make(layers).fit(X, y)
    assert_allclose(split.loss_curve_, whole.loss_curve_, rtol=1e-9)
    for a, b in zip(whole.network_.weights(), split.network_.weights()):
        assert_allclose(b, a, rtol=1e-9, atol=1e-12)
    assert shardable == all(getattr(layer, "shardable", False) for layer in split.layers_)


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_a_random_network_trains_the_same_streamed(seed):
    rng = np.random.RandomState(seed)
    # float32 data for a float64 fit: copied, so they stream (data of the fit's dtype
    # are used in place on the CPU); larger than the model
    X = rng.normal(size=(2000, N_FEATURES)).astype(np.float32)
    y = X[:, :2] * X[:, 2:4]
    est = make(random_layers(seed, dropout=True), max_iter=2)
    estimate = estimate_memory(est, X, y)
    limit = int(estimate.total - estimate["data"] // 2)  # half the data does not fit
    in_memory = clone(est).fit(X, y)
    streamed = clone(est).set_params(max_device_memory=limit).fit(X, y)
    assert in_memory.data_placement_ == "device" and streamed.data_placement_ == "streamed"
    assert_allclose(streamed.loss_curve_, in_memory.loss_curve_, rtol=1e-12)
    assert_array_equal(streamed.predict(X), in_memory.predict(X))


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_a_pickled_random_network_predicts_and_trains_on_the_same(seed, data):
    X, y = data
    est = make(random_layers(seed, dropout=True), warm_start=True).fit(X, y)
    restored = pickle.loads(pickle.dumps(est))
    assert_array_equal(restored.predict(X), est.predict(X))
    est.fit(X, y)
    restored.fit(X, y)
    assert_array_equal(restored.predict(X), est.predict(X))
    assert restored.loss_curve_ == est.loss_curve_


# -- sequences: the sequence layers in random networks ----------------------------------
SEQ_STEPS, SEQ_FEATURES = 6, 4


def _sequence_block(rng, depth):
    """A random layer taking and returning sequences of ``(SEQ_STEPS, SEQ_FEATURES)``."""
    from sknet.layers import (
        Conv1D,
        LayerNorm,
        MultiHeadAttention,
        TransformerEncoderBlock,
    )

    kinds = ["conv", "norm", "attention", "block"] + (
        ["residual", "sequential"] if depth < 1 else []
    )
    kind = kinds[rng.randint(len(kinds))]
    trainable = rng.rand() >= 0.25
    if kind == "conv":
        act = ["relu", "tanh", None][rng.randint(3)]
        return Conv1D(SEQ_FEATURES, 3, padding="same", activation=act, trainable=trainable)
    if kind == "norm":
        return LayerNorm(trainable=trainable)
    if kind == "attention":
        return MultiHeadAttention(2, causal=bool(rng.rand() < 0.5), trainable=trainable)
    if kind == "block":
        return TransformerEncoderBlock(
            2,
            8,
            dropout=0.0,
            norm_first=bool(rng.rand() < 0.5),
            activation=["relu", "gelu"][rng.randint(2)],
            trainable=trainable,
        )
    inner = [_sequence_block(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    return Residual(inner) if kind == "residual" else Sequential(inner)


def random_sequence_layers(seed, *, dropout=False):
    from sknet.layers import (
        GlobalAvgPool1D,
        GlobalMaxPool1D,
        MaxPool1D,
        PositionEmbedding,
        SinusoidalPositionEmbedding,
        TransformerEncoderBlock,
    )

    rng = np.random.RandomState(seed)
    layers = [[PositionEmbedding(), SinusoidalPositionEmbedding()][rng.randint(2)]]
    for _ in range(rng.randint(1, 4)):
        layers.append(_sequence_block(rng, 0))
        if dropout and rng.rand() < 0.5:
            layers.append(Dropout(0.2))
    if dropout:
        layers.append(TransformerEncoderBlock(2, 8, dropout=0.3))  # dropout inside a layer
    pool = rng.randint(3)
    layers += [[GlobalAvgPool1D()], [GlobalMaxPool1D()], [MaxPool1D(2), GlobalAvgPool1D()]][pool]
    return layers


@pytest.fixture(scope="module")
def sequences():
    rng = np.random.RandomState(1)
    X = rng.normal(size=(96, SEQ_STEPS, SEQ_FEATURES))
    y = np.column_stack([X[:, :3, 0].sum(1), X[:, 3:, 1].max(1)])
    return X, y


@pytest.mark.parametrize("seed", SEEDS)
def test_gradients_of_a_random_sequence_network(seed):
    layers = [
        layer.set_params(trainable=True) if "trainable" in layer.get_params() else layer
        for layer in random_sequence_layers(seed)
    ]
    errors = check_layer_gradients(
        Sequential(layers), (SEQ_STEPS, SEQ_FEATURES), n_samples=3, random_state=seed
    )
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_sequence_network_trains_the_same_split_over_threads_and_keeps_frozen_layers(
    seed, sequences, monkeypatch
):
    X, y = sequences
    layers = random_sequence_layers(seed, dropout=True)
    monkeypatch.setattr(sharding, "MIN_SHARD_WORK", 0)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 1)
    start = make(layers, max_iter=1, batch_size=32).fit(X, y)
    before = {
        key: {k: v.copy() for k, v in leaf.params.items()} for key, leaf in start.network_.leaves()
    }
    whole = make(layers, batch_size=32).fit(X, y)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    split = make(layers, batch_size=32).fit(X, y)
    assert all(layer.shardable for layer in split.layers_)
    assert_allclose(split.loss_curve_, whole.loss_curve_, rtol=1e-9)
    for a, b in zip(whole.network_.weights(), split.network_.weights()):
        # atol: an attention's key bias has a zero gradient up to rounding (the softmax
        # ignores a shift of all keys), whose steps Adam takes at about lr * 1e-9
        assert_allclose(b, a, rtol=1e-9, atol=1e-10)
    for key, leaf in whole.network_.leaves():
        if leaf.params and not leaf.trainable:
            for name, value in leaf.params.items():
                assert_array_equal(value, before[key][name])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_pickled_random_sequence_network_predicts_and_trains_on_the_same(seed, sequences):
    X, y = sequences
    est = make(random_sequence_layers(seed, dropout=True), warm_start=True, batch_size=32)
    est.fit(X, y)
    restored = pickle.loads(pickle.dumps(est))
    assert_array_equal(restored.predict(X), est.predict(X))
    est.fit(X, y)
    restored.fit(X, y)
    assert_array_equal(restored.predict(X), est.predict(X))
    assert restored.loss_curve_ == est.loss_curve_


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_a_random_sequence_network_trains_alike_in_float32_and_float64(seed, sequences):
    X, y = sequences
    layers = random_sequence_layers(seed)
    single = make(layers, dtype="float32", batch_size=32).fit(X.astype(np.float32), y)
    double = make(layers, batch_size=32).fit(X, y)
    assert single.predict(X[:4]).dtype == np.float32
    assert_allclose(single.loss_curve_, double.loss_curve_, rtol=2e-3)


# -- the whole tree: early stopping, warm starts, a failed warm fit ----------------------------


def arrays_of(network):
    """``{(path, name): host copy}`` of every array of the tree's parameter holders."""
    return {
        (key, name): np.array(value)
        for key, leaf in network.leaves()
        for name, value in {**leaf.params, **leaf.state}.items()
    }


def flags_of(layers):
    return {path: (node.trainable, node.lr_scale) for path, node in walk(layers)}


def assert_same_arrays(now, before):
    assert now.keys() == before.keys()
    for key, value in before.items():
        assert_array_equal(now[key], value, err_msg=str(key))


class RecordWeights(Callback):
    """Every array of the tree after each epoch."""

    def on_epoch_end(self, state, epoch, logs):
        self.seen_ = {**getattr(self, "seen_", {}), epoch: arrays_of(state.network)}


@pytest.fixture(scope="module")
def noisy():
    rng = np.random.RandomState(1)
    X = rng.normal(size=(120, N_FEATURES))
    y = np.column_stack([X[:, 0] * X[:, 1], X[:, 2]]) + rng.normal(scale=1.0, size=(120, 2))
    X_val = rng.normal(size=(60, N_FEATURES))
    y_val = np.column_stack([X_val[:, 0] * X_val[:, 1], X_val[:, 2]])
    return X, y, X_val, y_val


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_early_stopping_restores_every_array_of_a_random_tree(seed, noisy):
    X, y, X_val, y_val = noisy
    est = make(
        random_layers(seed),
        max_iter=60,
        batch_size=20,
        learning_rate_init=0.03,
        callbacks=[RecordWeights(), EarlyStopping("valid_loss", patience=2)],
    ).fit(X, y, X_val=X_val, y_val=y_val)
    record, stopper = est.callbacks_
    assert stopper.best_epoch_ < est.n_iter_  # weights moved after the best epoch
    assert record.seen_[est.n_iter_].keys() == record.seen_[stopper.best_epoch_].keys()
    assert_same_arrays(arrays_of(est.network_), record.seen_[stopper.best_epoch_])


def parameter_keys(layers):
    """``{path: set_params key}`` of every layer of unbuilt ``layers``, at any depth."""
    keys = {}

    def visit(layer, path, key):
        keys[path] = key
        entries = []
        for name in layer._sublayer_names():
            value = getattr(layer, name)
            if isinstance(value, (list, tuple)):
                entries += [(f"{name}__{j}", item) for j, item in enumerate(value)]
            elif value is not None:
                entries.append((name, value))
        for j, (name, item) in enumerate(entries):
            visit(item, path + (j,), f"{key}__{name}")

    for i, layer in enumerate(layers):
        visit(layer, (i,), f"layers__{i}")
    return keys


def _neutral(built, path):
    """Whether no container above ``path`` sets ``trainable`` for its whole subtree."""
    above = [built[path[:k]] for k in range(1, len(path))]
    return all(
        node.trainable is None
        or (node.trainable is True and "trainable" not in node.__dict__)
        or (node.trainable is True and type(node)._init_defaults().get("trainable") is True)
        for node in above
    )


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_a_warm_start_takes_trainable_changed_at_any_depth(seed, data):
    X, y = data
    rng = np.random.RandomState(100 + seed)
    est = make(random_layers(seed), warm_start=True, max_iter=2).fit(X, y)
    keys = parameter_keys(est.layers)
    built = dict(walk(est.layers_))
    holders = {key: leaf for key, leaf in est.network_.leaves()}
    paths = [  # layers with parameters and no children, under containers that leave them be
        p for p in keys if built[p].params and not built[p].sublayers() and _neutral(built, p)
    ]
    chosen = [paths[i] for i in rng.permutation(len(paths))[: max(1, len(paths) // 2)]]
    flags = {path: not built[path].trainable for path in chosen}
    est.set_params(**{keys[path] + "__trainable": flag for path, flag in flags.items()})
    before = arrays_of(est.network_)
    est.fit(X, y)
    for path, flag in flags.items():
        assert built[path].trainable is flag, (keys[path], flag)
    moved = False
    for (key, name), value in before.items():
        leaf = holders[key]
        now = np.asarray({**leaf.params, **leaf.state}[name])
        if not leaf.trainable:
            assert_array_equal(now, value, err_msg=f"{key} {name} is frozen")
        elif name in leaf.params:
            moved = moved or not np.array_equal(now, value)
    assert moved or not any(leaf.trainable and leaf.params for leaf in holders.values())


class FailAt(Callback):
    def __init__(self, epoch=1):
        self.epoch = epoch

    def on_epoch_end(self, state, epoch, logs):
        if epoch == self.epoch:
            raise RuntimeError("failed on purpose")


@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_a_failed_warm_fit_rolls_back_every_array_and_flag_of_a_random_tree(seed, data):
    X, y = data
    rng = np.random.RandomState(200 + seed)
    est = make(random_layers(seed, dropout=True), warm_start=True, max_iter=2).fit(X, y)
    before, flags = arrays_of(est.network_), flags_of(est.layers_)
    predictions = est.predict(X)
    keys = parameter_keys(est.layers)
    path = list(keys)[rng.randint(len(keys))]
    est.set_params(
        callbacks=[FailAt(epoch=est.n_iter_ + 1 + rng.randint(2))],
        **{keys[path] + "__trainable": False},
    )
    with pytest.raises(RuntimeError, match="failed on purpose"):
        est.fit(X, y)
    assert_same_arrays(arrays_of(est.network_), before)
    assert flags_of(est.layers_) == flags
    assert_array_equal(est.predict(X), predictions)


# -- padding inside random recurrent trees -------------------------------------------------------


def _recurrent_block(rng, width, depth):
    """A random layer taking and returning sequences of ``width`` features per step."""
    kinds = ["lstm", "gru", "rnn", "time_dense"] + (
        ["sequential", "residual", "concat", "gate"] if depth < 2 else []
    )
    kind = kinds[rng.randint(len(kinds))]
    if kind in ("lstm", "gru", "rnn"):
        cell = {"lstm": LSTM, "gru": GRU, "rnn": SimpleRNN}[kind]
        both = width % 2 == 0 and rng.rand() < 0.3
        return cell(width // 2 if both else width, return_sequences=True, bidirectional=both)
    if kind == "time_dense":
        return TimeDistributed(Dense(width, activation="tanh"))
    inner = [_recurrent_block(rng, width, depth + 1) for _ in range(rng.randint(1, 3))]
    if kind == "sequential":
        return Sequential(inner)
    if kind == "residual":
        return Residual(inner)
    if kind == "gate":
        return Gate(Sequential(inner))
    first = width // 2
    return Concatenate(
        [
            Sequential([*inner, TimeDistributed(Dense(first))]),
            LSTM(width - first, return_sequences=True),
        ],
        axis=1,
    )


def random_recurrent_layers(seed, width=4):
    rng = np.random.RandomState(seed)
    layers = [_recurrent_block(rng, width, 0) for _ in range(rng.randint(1, 3))]
    # something recurrent at the top, so that padding matters
    layers.append(Sequential([LSTM(width, return_sequences=True)]))
    layers.append([GlobalAvgPool1D(), LSTM(3)][rng.randint(2)])
    return layers


def padded(rng, n=16, T=6, F=4):
    lengths = rng.randint(1, T + 1, size=n)
    data = rng.normal(size=(n, T, F))
    front, back = np.zeros((n, T, F)), np.zeros((n, T, F))
    for i, length in enumerate(lengths):
        front[i, T - length :] = data[i, :length]
        back[i, :length] = data[i, :length]
    return front, back


@pytest.mark.parametrize("seed", SEEDS)
def test_padding_before_or_after_is_the_same_in_a_random_recurrent_tree(seed):
    rng = np.random.RandomState(300 + seed)
    front, back = padded(rng)
    y = rng.normal(size=len(front))
    est = NeuralNetRegressor(
        random_recurrent_layers(seed),
        max_iter=2,
        batch_size=8,
        random_state=0,
        device="cpu",
        dtype="float64",
        padding_value=0.0,
    )
    on_back = clone(est).fit(back, y)
    on_front = clone(est).fit(front, y)
    assert_allclose(on_front.loss_curve_, on_back.loss_curve_, rtol=1e-9)
    assert_allclose(on_back.predict(front), on_back.predict(back), rtol=1e-9, atol=1e-12)
    assert_allclose(on_front.predict(back), on_back.predict(back), rtol=1e-8, atol=1e-10)
