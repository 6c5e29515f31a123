"""Tables before a network: what a tabular fit learns from its training rows.

What it holds: :class:`TabularEncoder`, a scikit-learn transformer that
learns a table's column plan (numeric or categorical columns, scalings and
medians, quantile bins, missing-value indicators, category codes with a code
for missing and one for unknown) and turns a table into one float matrix;
and the mergeable summaries of a table's partitions (:mod:`sknet.tabular._summaries`:
exact counts, quantile sketches with a stated rank error) that a plan is
learned from where the partitions live.
Plain NumPy, with pandas read when a DataFrame comes: no network code,
usable alone. It is a room of its own rather than a module of
:mod:`sknet.estimators` so that it stays importable and testable without
anything that trains, and so that the import rules keep it that way.

What it may import: nothing of sknet (NumPy, SciPy, scikit-learn; pandas
lazily).
"""

from sknet.tabular._encoder import TabularEncoder

__all__ = ["TabularEncoder"]
