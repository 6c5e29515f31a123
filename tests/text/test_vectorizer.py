"""TextVectorizer (sknet/text/_vectorizer.py): a vocabulary learned in fit, texts to token ids."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from sknet import RNNClassifier
from sknet.layers import GRU, Embedding, GlobalAvgPool1D
from sknet.text import TextVectorizer

TEXTS = [
    "The cat sat on the mat.",
    "A dog sat on the log!",
    "the cat and the dog",
    "Birds fly; cats sit.",
]


def test_the_vocabulary_most_frequent_first_ties_by_token_ids_from_2():
    vectorizer = TextVectorizer().fit(TEXTS)
    counts = {}
    for text in TEXTS:
        for token in CountVectorizer().build_analyzer()(text):
            counts[token] = counts.get(token, 0) + 1
    expected = sorted(counts, key=lambda t: (-counts[t], t))
    assert list(vectorizer.vocabulary_) == expected
    assert list(vectorizer.vocabulary_.values()) == list(range(2, len(expected) + 2))
    assert vectorizer.vocabulary_size_ == len(expected) + 2
    assert vectorizer.get_vocabulary() == ["", "[UNK]", *expected]
    assert expected[:4] == ["the", "cat", "dog", "on"]  # 5, then three of 2 (sorted)


def test_the_vocabulary_does_not_depend_on_the_order_of_the_texts():
    rng = np.random.RandomState(0)
    words = np.array(["w%d" % i for i in range(40)])
    texts = [" ".join(rng.choice(words, 8)) for _ in range(60)]
    first = TextVectorizer(max_tokens=20).fit(texts).vocabulary_
    shuffled = TextVectorizer(max_tokens=20).fit(rng.permutation(texts)).vocabulary_
    assert first == shuffled


def test_max_tokens_counts_padding_and_unknown_and_min_frequency_counts_occurrences():
    vectorizer = TextVectorizer(max_tokens=4).fit(TEXTS)
    assert vectorizer.vocabulary_ == {"the": 2, "cat": 3}
    assert vectorizer.vocabulary_size_ == 4
    ids = vectorizer.transform(TEXTS)
    assert ids.max() < 4  # an Embedding(max_tokens, ...) takes them
    rare = TextVectorizer(min_frequency=2).fit(["spam spam eggs", "ham"])
    assert rare.vocabulary_ == {"spam": 2}  # twice in one text is twice


def test_transform_unknown_padding_and_truncating():
    vectorizer = TextVectorizer(max_tokens=5).fit(TEXTS)  # the, cat, dog
    texts = ["the cat", "the bird cat dog the"]
    np.testing.assert_array_equal(vectorizer.transform(texts), [[2, 3, 0, 0, 0], [2, 1, 3, 4, 2]])
    pre = clone(vectorizer).set_params(output_sequence_length=3, padding="pre", truncating="pre")
    np.testing.assert_array_equal(pre.fit(TEXTS).transform(texts), [[0, 2, 3], [3, 4, 2]])
    post = clone(vectorizer).set_params(output_sequence_length=3).fit(TEXTS)
    np.testing.assert_array_equal(post.transform(texts), [[2, 3, 0], [2, 1, 3]])
    assert post.transform(texts).dtype == np.int32
    assert vectorizer.set_params(dtype="int64").transform(texts).dtype == np.int64


def test_without_an_output_length_each_call_pads_to_its_longest_text():
    vectorizer = TextVectorizer().fit(TEXTS)
    assert vectorizer.transform(["cat", "the cat sat"]).shape == (2, 3)
    assert vectorizer.transform(["cat"]).shape == (1, 1)
    assert vectorizer.transform(["", "?"]).tolist() == [[0], [0]]  # one step of padding
    assert vectorizer.transform([]).shape == (0, 1)


def test_ragged_output_is_each_texts_ids_unpadded():
    vectorizer = TextVectorizer(output="ragged").fit(TEXTS)
    ragged = vectorizer.transform(["the cat", "", "the bird sat"])
    assert [r.tolist() for r in ragged] == [[2, 3], [], [2, 1, 6]]
    assert all(r.dtype == np.int32 for r in ragged)
    cut = vectorizer.set_params(output_sequence_length=2, truncating="pre")
    assert [r.tolist() for r in cut.transform(["the bird sat"])] == [[1, 6]]


def test_scikit_learns_analyzers_make_the_tokens():
    texts = ["Café au lait", "the café is open"]
    options = [
        dict(ngram_range=(1, 2)),
        dict(analyzer="char", ngram_range=(2, 3)),
        dict(analyzer="char_wb", ngram_range=(3, 3), lowercase=False),
        dict(stop_words="english", strip_accents="ascii"),
        dict(token_pattern=r"\b\w+\b"),
    ]
    for kw in options:
        vectorizer = TextVectorizer(**kw, output="ragged").fit(texts)
        analyze = CountVectorizer(**kw).build_analyzer()
        lookup = vectorizer.get_vocabulary()
        for text, ids in zip(texts, vectorizer.transform(texts)):
            assert [lookup[i] for i in ids] == analyze(text), kw
    by_hand = TextVectorizer(analyzer=str.split, output="ragged").fit(["a b", "b C"])
    assert by_hand.vocabulary_ == {"b": 2, "C": 3, "a": 4}  # the callable's tokens, as they are


def test_inverse_transform_gives_the_tokens_back_without_padding():
    vectorizer = TextVectorizer(max_tokens=5, output_sequence_length=6).fit(TEXTS)
    tokens = vectorizer.inverse_transform(vectorizer.transform(["the bird cat", "dog"]))
    assert [t.tolist() for t in tokens] == [["the", "[UNK]", "cat"], ["dog"]]
    ragged = vectorizer.set_params(output="ragged").transform(["cat the"])
    assert vectorizer.inverse_transform(ragged)[0].tolist() == ["cat", "the"]
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 5\)"):
        vectorizer.inverse_transform([[2, 7]])
    with pytest.raises(ValueError, match="must hold token ids"):
        vectorizer.inverse_transform([[0.5, 2.0]])


def test_feature_names_and_pandas_output_need_a_fixed_length():
    pd = pytest.importorskip("pandas")
    fixed = TextVectorizer(output_sequence_length=3).fit(TEXTS)
    assert fixed.get_feature_names_out().tolist() == [
        "textvectorizer0",
        "textvectorizer1",
        "textvectorizer2",
    ]
    frame = fixed.set_output(transform="pandas").transform(pd.Series(["the cat"]))
    assert list(frame.columns) == ["textvectorizer0", "textvectorizer1", "textvectorizer2"]
    assert not hasattr(TextVectorizer(), "get_feature_names_out")  # each call's own width
    assert not hasattr(TextVectorizer(output="ragged", output_sequence_length=3), "set_output")


def test_texts_come_as_a_list_an_array_a_series_or_one_column():
    pd = pytest.importorskip("pandas")
    expected = TextVectorizer().fit_transform(TEXTS)
    for texts in (
        np.array(TEXTS, dtype=object),
        pd.Series(TEXTS),
        pd.DataFrame({"text": TEXTS}),
        np.array(TEXTS)[:, None],
        tuple(TEXTS),
    ):
        np.testing.assert_array_equal(TextVectorizer().fit_transform(texts), expected)


@pytest.mark.parametrize(
    "X, message",
    [
        ("the cat", "Iterable over raw text documents expected"),
        (["the cat", None], "must hold texts .* NoneType None at index 1"),
        (["the cat", np.nan], "must hold texts"),
        (np.array([["a", "b"]]), "one dimension"),
        (42, "list of texts"),
    ],
)
def test_what_is_not_texts_is_refused(X, message):
    with pytest.raises(ValueError, match=message):
        TextVectorizer().fit(X)


@pytest.mark.parametrize(
    "params",
    [
        dict(max_tokens=2),
        dict(min_frequency=0),
        dict(output_sequence_length=0),
        dict(output="bag"),
        dict(padding="middle"),
        dict(analyzer="sentence"),
        dict(stop_words="french"),
    ],
)
def test_parameters_are_checked_in_fit(params):
    with pytest.raises(InvalidParameterError):
        TextVectorizer(**params).fit(TEXTS)


def test_a_dtype_that_holds_no_ids_is_refused():
    with pytest.raises(ValueError, match="dtype must be a 32- or 64-bit integer type"):
        TextVectorizer(dtype=np.float32).fit(TEXTS)


def test_fit_transform_transform_clone_and_pickle_agree():
    vectorizer = TextVectorizer(max_tokens=6, output_sequence_length=4)
    ids = vectorizer.fit_transform(TEXTS)
    np.testing.assert_array_equal(vectorizer.transform(TEXTS), ids)
    assert vectorizer.fit(TEXTS) is vectorizer  # fit returns self
    np.testing.assert_array_equal(clone(vectorizer).fit(TEXTS).transform(TEXTS), ids)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(vectorizer)).transform(TEXTS), ids)
    with pytest.raises(Exception, match="not fitted"):
        TextVectorizer().transform(TEXTS)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_pipeline_from_raw_text_to_a_sequence_estimator():
    rng = np.random.RandomState(0)
    words = ["good", "great", "fine", "bad", "awful", "poor", "the", "food", "was", "very"]
    texts, y = [], []
    for _ in range(200):
        label = rng.rand() < 0.5
        pool = words[:3] if label else words[3:6]
        n = rng.randint(3, 12)
        texts.append(" ".join(rng.choice(words[6:], n - 1).tolist() + [rng.choice(pool)]))
        y.append(int(label))
    pipeline = make_pipeline(
        TextVectorizer(max_tokens=16),
        RNNClassifier(
            layers=[Embedding(16, 8), GRU(8, return_sequences=True), GlobalAvgPool1D()],
            padding_value=0,
            learning_rate_init=0.02,
            max_iter=30,
            random_state=0,
            device="cpu",
        ),
    ).fit(texts, y)
    assert pipeline.score(texts, y) > 0.9
    # texts longer than any seen in fit: the estimator takes another width
    long = [" ".join(["the food was very"] * 5 + ["great"])]
    assert pipeline.predict(long).shape == (1,)


def test_skops_loads_it_with_sknets_trusted_types():
    sio = pytest.importorskip("skops.io")
    import sknet

    vectorizer = TextVectorizer(max_tokens=6).fit(TEXTS)
    loaded = sio.loads(sio.dumps(vectorizer), trusted=sknet.TRUSTED_TYPES)
    np.testing.assert_array_equal(loaded.transform(TEXTS), vectorizer.transform(TEXTS))
    assert loaded.get_vocabulary() == vectorizer.get_vocabulary()
