"""
==========================================================
A DataFrame as it is: categories, missing values, boosting
==========================================================

:class:`~sknet.TabularRegressor` takes a pandas DataFrame with numbers,
categories and missing values, and learns from its training rows how each
column enters the network (``encoder_``). Here, scikit-learn's diabetes
table (442 patients, progression of the disease a year on), with its ``sex``
column as text and a tenth of two measurements blanked out, as a real table
would have them. We compare it with
:class:`~sklearn.ensemble.HistGradientBoostingRegressor` (native categories)
and with sknet's MLP behind the preprocessing a user writes, on the same
split, then read the fit's ``history_``.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.compose import make_column_transformer
from sklearn.datasets import load_diabetes
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sknet import MLPRegressor, TabularRegressor

table = load_diabetes(as_frame=True, scaled=False).frame
table["sex"] = np.where(table["sex"] > 1.5, "male", "female")  # text, as a file has it
rng = np.random.RandomState(0)
for column in ("bmi", "bp"):
    table.loc[rng.rand(len(table)) < 0.1, column] = np.nan
y = np.log(table.pop("target"))
X_train, X_test, y_train, y_test = train_test_split(table, y, random_state=0)
kinds = ", ".join(sorted({str(dtype) for dtype in X_train.dtypes}))
print(f"{X_train.shape[1]} columns ({kinds}), {X_train.isna().sum().sum()} missing values")

# %%
# The table as it is, into the network
model = TabularRegressor(random_state=0).fit(X_train, y_train)
plan = model.encoder_
print("categorical columns:", list(plan.feature_names_in_[plan.categorical_features_]))
print("their categories:", [list(c) for c in plan.categories_])
print("missing-value indicators for:", list(plan.feature_names_in_[plan.indicator_features_]))


def rmse(estimator, X):
    return np.sqrt(mean_squared_error(y_test, estimator.predict(X)))


# %%
# The same split for boosting (categories as ``category``) and an MLP behind the
# imputation, scaling and one-hot encoding it needs
boosting = HistGradientBoostingRegressor(categorical_features="from_dtype", random_state=0)
as_category = {"sex": "category"}
boosting.fit(X_train.astype(as_category), y_train)
mlp = make_pipeline(
    make_column_transformer(
        (OneHotEncoder(), ["sex"]),
        remainder=make_pipeline(SimpleImputer(add_indicator=True), StandardScaler()),
    ),
    MLPRegressor(max_iter=500, random_state=0),
).fit(X_train, y_train)
scores = {
    "TabularRegressor (the DataFrame)": rmse(model, X_test),
    "HistGradientBoostingRegressor": rmse(boosting, X_test.astype(as_category)),
    "MLPRegressor (after a ColumnTransformer)": rmse(mlp, X_test),
}
for name, score in scores.items():
    print(f"{name:<42} test RMSE of the log progression: {score:.4f}")

# %%
# ``history_`` has one row per epoch: the training loss, the loss on the rows
# held out for early stopping (the standardized target's half squared error)
# and the epoch's duration. Training stopped when the validation loss had not
# improved for ``n_iter_no_change`` epochs, and the weights of its best epoch
# were put back.
epochs = [row["epoch"] for row in model.history_]
best = epochs[int(np.argmax(model.validation_scores_))]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(epochs, [row["train_loss"] for row in model.history_], label="training loss")
ax.plot(epochs, [row["valid_loss"] for row in model.history_], label="validation loss")
ax.axvline(best, color="gray", linestyle=":", label=f"best epoch ({best}), kept")
ax.set_xlabel("epoch")
ax.set_ylabel("loss (standardized target)")
ax.legend()
fig.tight_layout()
print(f"{model.n_iter_} epochs, the best was epoch {best}")
