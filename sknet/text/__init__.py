"""Text and sequences before a network: raw text to token ids, ragged sequences to arrays.

What it holds: :class:`TextVectorizer`, a scikit-learn transformer that
learns a vocabulary from the training texts (scikit-learn's analyzers, a size
limit, a minimum frequency; id 0 for padding, 1 for a token out of the
vocabulary) and turns texts into padded token ids, or a ragged list of them;
:func:`pad_sequences`, sequences of different lengths as one padded array;
:func:`padding_mask`, which steps of a padded array are real. The sequence
estimators take what these give: a padded array of any width, or a ragged
list, with ``padding_value`` masking the padding. Plain Python and NumPy, no
network code, usable alone: a room of its own, like :mod:`sknet.tabular`, so
that the import rules keep it so.

What it may import: nothing of sknet (NumPy, scikit-learn).
"""

from sknet.text._sequences import pad_sequences, padding_mask
from sknet.text._vectorizer import TextVectorizer

__all__ = ["TextVectorizer", "pad_sequences", "padding_mask"]
