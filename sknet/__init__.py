"""sknet: scikit-learn neural-network estimators on NumPy and CuPy."""

__version__ = "0.1.0"

from sknet._convnet import ConvNetClassifier  # noqa: E402
from sknet._mlp import MLPClassifier, MLPRegressor  # noqa: E402

__all__ = ["ConvNetClassifier", "MLPClassifier", "MLPRegressor", "__version__"]
