"""Plots of training, drawn with matplotlib (imported only when you plot)."""

__all__ = ["plot_learning_curves"]


def plot_learning_curves(estimator, ax=None):
    """Plot the training and validation loss, and the validation score, per epoch.

    Parameters
    ----------
    estimator : fitted sknet estimator
        Anything with a ``history_`` (every sknet estimator after ``fit``).
    ax : matplotlib Axes, default=None
        Where to draw the losses; a new figure when ``None``. The validation
        score, when there is one, goes on a second y axis on the right.

    Returns
    -------
    ax : matplotlib Axes
        The axes of the losses (the score's twin axes is ``ax.score_ax``).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")  # draw without a window
    >>> import matplotlib.pyplot as plt
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.plotting import plot_learning_curves
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), early_stopping=True, tol=1.0,
    ...                     n_iter_no_change=1, random_state=0, device="cpu")
    >>> clf = clf.fit(X[:200] / 16, y[:200])
    >>> ax = plot_learning_curves(clf)
    >>> ax.get_xlabel(), ax.get_ylabel(), ax.score_ax.get_ylabel()
    ('epoch', 'loss', 'validation score')
    >>> plt.close(ax.figure)
    """
    history = getattr(estimator, "history_", None)
    if not history:
        raise ValueError(f"{type(estimator).__name__} has no training history: fit it first")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    epochs = [row["epoch"] for row in history]
    ax.plot(epochs, [row["train_loss"] for row in history], label="train loss")
    valid_loss = [row["valid_loss"] for row in history]
    if any(v is not None for v in valid_loss):
        ax.plot(epochs, valid_loss, label="validation loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title(f"{type(estimator).__name__} learning curves")
    handles, labels = ax.get_legend_handles_labels()
    ax.score_ax = None
    scores = [row["valid_score"] for row in history]
    if any(s is not None for s in scores):
        score_ax = ax.twinx()
        (line,) = score_ax.plot(
            epochs, scores, color="tab:green", linestyle="--", label="validation score"
        )
        score_ax.set_ylabel("validation score")
        handles.append(line)
        labels.append(line.get_label())
        ax.score_ax = score_ax
    ax.legend(handles, labels, loc="center right")
    return ax
