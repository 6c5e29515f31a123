"""pad_sequences, padding_mask, sequence_lengths (sknet/text/_sequences.py), against loops."""

import numpy as np
import pytest

from sknet.text import pad_sequences, padding_mask
from sknet.text._sequences import sequence_lengths


def padded_by_hand(sequences, maxlen, padding, truncating, value):
    rows = []
    for s in sequences:
        s = list(s)
        if len(s) > maxlen:
            s = s[:maxlen] if truncating == "post" else s[len(s) - maxlen :]
        pad = [value] * (maxlen - len(s))
        rows.append(s + pad if padding == "post" else pad + s)
    return np.array(rows)


@pytest.mark.parametrize("padding", ["post", "pre"])
@pytest.mark.parametrize("truncating", ["post", "pre"])
@pytest.mark.parametrize("maxlen", [None, 1, 4, 9])
def test_pad_sequences_equals_padding_by_hand(padding, truncating, maxlen):
    rng = np.random.RandomState(0)
    sequences = [rng.randint(1, 50, n) for n in (3, 0, 7, 1, 5)]
    out = pad_sequences(sequences, maxlen, padding=padding, truncating=truncating, value=-1)
    expected = padded_by_hand(sequences, maxlen or 7, padding, truncating, -1)
    np.testing.assert_array_equal(out, expected)
    assert out.dtype.kind == "i"  # ids stay integers


def test_pad_sequences_of_steps_of_features():
    rng = np.random.RandomState(0)
    sequences = [rng.normal(size=(n, 3)) for n in (2, 5, 1)]
    out = pad_sequences(sequences, value=0.0)
    assert out.shape == (3, 5, 3) and out.dtype == np.float64
    for row, s in zip(out, sequences):
        np.testing.assert_array_equal(row[: len(s)], s)
        assert not row[len(s) :].any()


def test_pad_sequences_dtype_follows_the_sequences_and_the_padding_value():
    assert pad_sequences([[1, 2], [3]]).dtype.kind == "i"
    assert pad_sequences([[1, 2], [3]], value=-0.5).dtype == np.float64  # no id: floats
    assert pad_sequences([[1, 2], [3]], dtype=np.int32).dtype == np.int32
    assert pad_sequences([np.ones(2, np.float32), np.ones(1, np.float32)]).dtype == np.float32
    assert pad_sequences([], 3).shape == (0, 3)


@pytest.mark.parametrize(
    "args, message",
    [
        (([[1], [[1, 2]]],), "all be 1-D .* or all 2-D"),
        (([np.ones((2, 3)), np.ones((2, 4))],), "same number of features"),
        ((["ab", "c"],), "must hold numbers"),
        (("abc",), "list of arrays"),
        (([[1]], -1), "maxlen must be"),
    ],
)
def test_pad_sequences_refuses_what_is_not_sequences(args, message):
    with pytest.raises(ValueError, match=message):
        pad_sequences(*args)


@pytest.mark.parametrize("name", ["padding", "truncating"])
def test_pad_sequences_refuses_an_unknown_side(name):
    with pytest.raises(ValueError, match=f"{name} must be 'post' or 'pre', got 'middle'"):
        pad_sequences([[1]], **{name: "middle"})


def test_padding_mask_and_lengths():
    ids = np.array([[5, 3, 0, 0], [0, 0, 7, 0], [0, 0, 0, 0], [1, 0, 2, 9]])
    np.testing.assert_array_equal(padding_mask(ids), ids != 0)
    # up to the last real step: padding before or between real steps counts
    np.testing.assert_array_equal(sequence_lengths(ids), [2, 3, 0, 4])
    steps = np.zeros((2, 3, 2))
    steps[0, 0] = [1.0, 0.0]  # a step is padding only when all its features are
    np.testing.assert_array_equal(padding_mask(steps), [[True, False, False], [False] * 3])
    np.testing.assert_array_equal(sequence_lengths(steps), [1, 0])
    assert sequence_lengths(np.zeros((3, 0))).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="padded sequences"):
        padding_mask(np.zeros(3))
