"""TextVectorizer: raw text to token ids, with a vocabulary learned in fit.

Keras's ``TextVectorization`` (``output_mode='int'``) as a scikit-learn
transformer: ``fit`` learns a vocabulary from the tokens scikit-learn's
analyzers make (those of :class:`~sklearn.feature_extraction.text.CountVectorizer`),
``transform`` turns each text into the ids of its tokens, padded or cut to
one length. Id 0 is padding and id 1 a token the vocabulary lacks, so the
ids go straight into an :class:`~sknet.layers.Embedding` of an estimator with
``padding_value=0``.
"""

from collections import Counter
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from sknet.text._sequences import pad_sequences

#: The reserved ids, and the tokens that stand for them (Keras's).
PADDING_ID, OOV_ID = 0, 1
PADDING_TOKEN, OOV_TOKEN = "", "[UNK]"

#: The tokenizer's parameters, scikit-learn's vectorizers' own (documented once).
ANALYZER_DOC = r"""
    analyzer : {'word', 'char', 'char_wb'} or callable, default='word'
        What a token is, as in ``CountVectorizer``: word n-grams, character
        n-grams (``'char_wb'``: inside word boundaries), or a callable that
        turns a text into its tokens (the options below are then ignored).

    lowercase : bool, default=True
        Lowercase the text before tokenizing.

    strip_accents : {'ascii', 'unicode'} or callable, default=None
        Remove accents, as ``CountVectorizer`` does.

    token_pattern : str, default=r"(?u)\b\w\w+\b"
        The regular expression of a word (``analyzer='word'``); the default
        is scikit-learn's, words of two characters or more.

    ngram_range : tuple (min_n, max_n), default=(1, 1)
        The n-grams that are tokens: ``(1, 2)`` adds pairs of words (or
        characters) after the single ones, in their order in the text.

    stop_words : {'english'}, list or None, default=None
        Words left out before the n-grams are made (``analyzer='word'``).
"""


def _documents(X):
    """``X`` as a list of strings, or the error scikit-learn's vectorizers raise."""
    if isinstance(X, (str, bytes)):
        raise ValueError("Iterable over raw text documents expected, string object received.")
    if getattr(X, "ndim", 1) == 2 and X.shape[1] == 1:  # one column of a table
        X = X.iloc[:, 0] if hasattr(X, "iloc") else np.asarray(X, dtype=object)[:, 0]
    elif getattr(X, "ndim", 1) != 1:
        raise ValueError(
            f"X must be a list of texts (one dimension), got an array of shape {X.shape}"
        )
    try:
        documents = list(X)
    except TypeError:
        raise ValueError(f"X must be a list of texts, got {type(X).__name__}") from None
    for i, doc in enumerate(documents):
        if not isinstance(doc, (str, bytes)):
            raise ValueError(
                f"X must hold texts (str), got {type(doc).__name__} {doc!r} at index {i}"
            )
    return documents


class TextVectorizer(TransformerMixin, BaseEstimator):
    """Raw text to padded token ids: a vocabulary learned in fit, ids for padding and unknown.

    The text layer a Keras user knows (``TextVectorization`` with
    ``output_mode='int'``) as a scikit-learn transformer, to put before a
    sequence estimator in a ``Pipeline``. ``fit`` splits each text into
    tokens with scikit-learn's analyzers (those of
    :class:`~sklearn.feature_extraction.text.CountVectorizer`: words,
    n-grams, characters, or your own callable) and keeps the most frequent
    ones; ``transform`` gives each text the ids of its tokens. Id 0 is
    padding and id 1 a token out of the vocabulary (``'[UNK]'``), the
    vocabulary's tokens have ids from 2, so ids run from 0 to
    ``vocabulary_size_ - 1``: an :class:`~sknet.layers.Embedding` of
    ``input_dim=max_tokens`` takes them, in an estimator with
    ``padding_value=0`` that masks the padding. Plain Python and NumPy: no
    network.

    Parameters
    ----------
    max_tokens : int, default=None
        The size of the vocabulary, padding and out-of-vocabulary ids
        included (as Keras counts it): the ``max_tokens - 2`` most frequent
        tokens are kept, ties broken by the token (sorted), so the vocabulary
        does not depend on the order of the texts. ``None``: every token
        seen ``min_frequency`` times.

    min_frequency : int, default=1
        Tokens seen fewer times in the training texts (all occurrences
        counted) are left out of the vocabulary: they become id 1.

    output_sequence_length : int, default=None
        The number of ids of each text: shorter texts are padded with 0,
        longer ones cut (``padding``, ``truncating``). ``None``: the longest
        text of each ``transform`` call (at least one step); the sequence
        estimators take any width at ``predict``.

    output : {'int', 'ragged'}, default='int'
        ``'int'``: one padded array ``(n_texts, steps)``. ``'ragged'``: a
        list of 1-D arrays, each text's ids unpadded (cut to
        ``output_sequence_length`` when given), which the sequence
        estimators also take.

    padding : {'post', 'pre'}, default='post'
        Where a shorter text is padded: after its ids (Keras's
        ``TextVectorization``) or before.

    truncating : {'post', 'pre'}, default='post'
        Which ids of a longer text are cut: the last ones or the first ones.

    %(analyzer)s
    dtype : {'int32', 'int64'}, default='int32'
        The dtype of the ids.

    Attributes
    ----------
    vocabulary_ : dict of str to int
        Each token of the vocabulary and its id (from 2, most frequent first).

    vocabulary_size_ : int
        The number of ids, padding and out-of-vocabulary included
        (``len(vocabulary_) + 2``): the ``input_dim`` of an ``Embedding``
        that takes them.

    See Also
    --------
    pad_sequences : Sequences of different lengths as one padded array.
    sklearn.feature_extraction.text.CountVectorizer : The same tokens as counts
        (a bag of words).

    Notes
    -----
    Keras's ``TextVectorization`` strips punctuation and splits on white
    space; this one tokenizes as scikit-learn's vectorizers do (its default
    ``token_pattern`` drops one-letter words), so that a bag-of-words
    baseline and the network read the same tokens. N-grams of a text come
    after its single tokens, as ``CountVectorizer``'s analyzer returns them.

    Examples
    --------
    >>> from sknet.text import TextVectorizer
    >>> texts = ["the cat sat", "the dog sat down", "a cat"]
    >>> vectorizer = TextVectorizer(max_tokens=5).fit(texts)
    >>> vectorizer.vocabulary_
    {'cat': 2, 'sat': 3, 'the': 4}
    >>> vectorizer.transform(["the cat sat", "the bird"])
    array([[4, 2, 3],
           [4, 1, 0]], dtype=int32)
    >>> vectorizer.inverse_transform([[4, 1, 0]])
    [array(['the', '[UNK]'], dtype=object)]
    """

    _parameter_constraints: dict = {
        "max_tokens": [Interval(Integral, 3, None, closed="left"), None],
        "min_frequency": [Interval(Integral, 1, None, closed="left")],
        "output_sequence_length": [Interval(Integral, 1, None, closed="left"), None],
        "output": [StrOptions({"int", "ragged"})],
        "padding": [StrOptions({"post", "pre"})],
        "truncating": [StrOptions({"post", "pre"})],
        "analyzer": [StrOptions({"word", "char", "char_wb"}), callable],
        "lowercase": ["boolean"],
        "strip_accents": [StrOptions({"ascii", "unicode"}), None, callable],
        "token_pattern": [str, None],
        "ngram_range": [tuple],
        "stop_words": [StrOptions({"english"}), list, None],
        "dtype": [StrOptions({"int32", "int64"}), type],
    }

    def __init__(
        self,
        *,
        max_tokens=None,
        min_frequency=1,
        output_sequence_length=None,
        output="int",
        padding="post",
        truncating="post",
        analyzer="word",
        lowercase=True,
        strip_accents=None,
        token_pattern=r"(?u)\b\w\w+\b",
        ngram_range=(1, 1),
        stop_words=None,
        dtype="int32",
    ):
        self.max_tokens = max_tokens
        self.min_frequency = min_frequency
        self.output_sequence_length = output_sequence_length
        self.output = output
        self.padding = padding
        self.truncating = truncating
        self.analyzer = analyzer
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.token_pattern = token_pattern
        self.ngram_range = ngram_range
        self.stop_words = stop_words
        self.dtype = dtype

    def _id_dtype(self):
        dtype = np.dtype(self.dtype)
        if dtype.kind not in "iu" or dtype.itemsize < 4:
            raise ValueError(
                f"dtype must be a 32- or 64-bit integer type (int32, int64), got {self.dtype!r}"
            )
        return dtype

    def build_analyzer(self):
        """The callable that turns a text into its tokens (``CountVectorizer``'s).

        Returns
        -------
        analyzer : callable
            ``analyzer(text) -> list of str``.
        """
        return CountVectorizer(
            analyzer=self.analyzer,
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            token_pattern=self.token_pattern,
            ngram_range=self.ngram_range,
            stop_words=self.stop_words,
        ).build_analyzer()

    def _tokens(self, X):
        analyze = self.build_analyzer()
        return [analyze(doc) for doc in _documents(X)]

    def _learn(self, tokens):
        counts = Counter()
        for doc in tokens:
            counts.update(doc)
        kept = [token for token, count in counts.items() if count >= self.min_frequency]
        kept.sort(key=lambda token: (-counts[token], token))
        if self.max_tokens is not None:
            kept = kept[: self.max_tokens - 2]
        self.vocabulary_ = {token: i + 2 for i, token in enumerate(kept)}
        self.vocabulary_size_ = len(kept) + 2
        self._lookup = np.asarray([PADDING_TOKEN, OOV_TOKEN, *kept], dtype=object)

    def fit(self, X, y=None):
        """Learn the vocabulary of the texts ``X``.

        Parameters
        ----------
        X : iterable of str
            The training texts (a list, an array or a pandas Series).
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted vectorizer.
        """
        self.fit_transform(X)
        return self

    def fit_transform(self, X, y=None):
        """Learn the vocabulary of ``X`` and return its texts' ids (each text read once).

        Parameters
        ----------
        X : iterable of str
            The training texts.
        y : None
            Ignored.

        Returns
        -------
        ids : ndarray of shape (n_texts, steps) or list of ndarray
            As :meth:`transform` returns them.
        """
        self._validate_params()
        dtype = self._id_dtype()
        tokens = self._tokens(X)
        self._learn(tokens)
        return self._ids(tokens, dtype)

    def transform(self, X):
        """The token ids of each text, padded or cut to ``output_sequence_length``.

        Parameters
        ----------
        X : iterable of str
            The texts.

        Returns
        -------
        ids : ndarray of shape (n_texts, steps) or list of ndarray
            ``output='int'``: one array, 0 for padding and 1 for a token out of
            the vocabulary, ``steps`` the ``output_sequence_length`` (or the
            longest text's). ``output='ragged'``: one 1-D array per text.
        """
        check_is_fitted(self)
        return self._ids(self._tokens(X), self._id_dtype())

    def _ids(self, tokens, dtype):
        get = self.vocabulary_.get
        sequences = [np.fromiter((get(t, OOV_ID) for t in doc), dtype, len(doc)) for doc in tokens]
        width = self.output_sequence_length
        if self.output == "ragged":
            return (
                sequences
                if width is None
                else [_cut(s, width, self.truncating) for s in sequences]
            )
        if width is None:
            width = max((len(s) for s in sequences), default=0) or 1
        return pad_sequences(
            sequences, width, dtype=dtype, padding=self.padding, truncating=self.truncating
        )

    def inverse_transform(self, X):
        """The tokens of token ids, padding left out.

        Parameters
        ----------
        X : array-like of shape (n_texts, steps) or list of array-like
            Token ids, padded or not.

        Returns
        -------
        tokens : list of ndarray of str
            Each text's tokens in order; ``'[UNK]'`` for id 1.
        """
        check_is_fitted(self)
        return [
            self._lookup[_checked_ids(row, i, self.vocabulary_size_)] for i, row in enumerate(X)
        ]

    def get_vocabulary(self):
        """Every token by its id: ``''`` (padding), ``'[UNK]'``, then the vocabulary.

        Returns
        -------
        vocabulary : list of str
            ``get_vocabulary()[i]`` is the token of id ``i`` (Keras's order).
        """
        check_is_fitted(self)
        return self._lookup.tolist()

    def _names_its_columns(self):
        return self.output == "int" and self.output_sequence_length is not None

    @available_if(_names_its_columns)
    def get_feature_names_out(self, input_features=None):
        """The output's columns, one per step: ``textvectorizer0``, ``textvectorizer1``, ...

        Only with ``output='int'`` and an ``output_sequence_length``: the
        width is otherwise each call's own.

        Parameters
        ----------
        input_features : None
            Ignored (the input is texts).

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self)
        prefix = type(self).__name__.lower()
        return np.asarray(
            [f"{prefix}{i}" for i in range(self.output_sequence_length)], dtype=object
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.two_d_array = False
        tags.transformer_tags.preserves_dtype = []
        return tags


def _cut(ids, width, truncating):
    """``ids`` cut to ``width``: its last ones (``'post'``) or its first ones."""
    if len(ids) <= width:
        return ids
    return ids[:width] if truncating == "post" else ids[len(ids) - width :]


def _checked_ids(row, i, size):
    """Row ``i``'s ids other than padding, as indices; a ValueError unless ids in [0, size)."""
    ids = np.asarray(row)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(
            f"X must hold token ids (integers), one sequence a row; row {i} is {row!r}"
        )
    if ids.size and (ids.min() < 0 or ids.max() >= size):
        raise ValueError(
            f"token ids must be in [0, {size}), got values from {ids.min()} to {ids.max()} "
            f"in row {i}"
        )
    return ids[ids != PADDING_ID].astype(np.intp)


TextVectorizer.__doc__ = (
    TextVectorizer.__doc__.replace("    %(analyzer)s\n", ANALYZER_DOC.strip("\n") + "\n\n")
    if TextVectorizer.__doc__
    else None
)
