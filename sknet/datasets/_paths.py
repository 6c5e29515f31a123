"""Where the loaders find their files: a path, or an environment variable."""

import os

MNIST_ENV_VAR = "SKNET_MNIST_DIR"
CIFAR10_ENV_VAR = "SKNET_CIFAR10_DIR"


def data_path(path, subset, env_var, needs):
    """Check ``subset``; ``path``, or the environment variable's value when None."""
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all', got {subset!r}")
    if path is None:
        path = os.environ.get(env_var)
        if not path:
            raise FileNotFoundError(
                f"{needs}: pass it as `path` or set the {env_var} environment variable."
            )
    return path
