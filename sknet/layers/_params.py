"""Nested ``<list>__<i>__<param>`` parameters, for parameters that hold lists of layers."""

from sklearn.base import clone


class NestedListParams:
    """Nested ``<list>__<i>__<param>`` parameters for list-of-layers parameters.

    ``GridSearchCV`` can then search the entries of a ``layers`` list (of an
    estimator or of a container layer), at any depth:
    ``layers__0__layers__1__filters``. Objects in the list are never modified:
    setting a nested parameter replaces the entry with a modified clone.
    List it first in the bases; ``_list_params`` names the list parameters.
    """

    _list_params = ("layers",)

    def get_params(self, deep=True):
        params = super().get_params(deep=deep)  # other nested objects (a loss)
        if deep:
            for name in self._list_params:
                items = params.get(name)
                if not isinstance(items, (list, tuple)):
                    continue
                for i, item in enumerate(items):
                    params[f"{name}__{i}"] = item
                    if hasattr(item, "get_params"):
                        for key, value in item.get_params(deep=True).items():
                            params[f"{name}__{i}__{key}"] = value
        return params

    def set_params(self, **params):
        nested = {}
        for name in self._list_params:
            nested[name] = {k: params.pop(k) for k in list(params) if k.startswith(name + "__")}
        super().set_params(**params)
        for name, values in nested.items():
            if values:
                setattr(self, name, _set_in_list(self, name, values))
        return self


def _set_in_list(owner, name, values):
    items = getattr(owner, name)
    if not isinstance(items, (list, tuple)):
        raise ValueError(
            f"Cannot set {sorted(values)}: this {type(owner).__name__} has no `{name}` list."
        )
    items, copied = list(items), set()
    for key, value in values.items():
        _, index, *rest = key.split("__", 2)
        if not index.isdigit() or int(index) >= len(items):
            raise ValueError(f"Invalid parameter {key!r}: `{name}` has {len(items)} entries.")
        i = int(index)
        if not rest:
            items[i], copied = value, copied | {i}
            continue
        if i not in copied:  # never modify the caller's layer objects
            items[i], copied = clone(items[i]), copied | {i}
        items[i].set_params(**{rest[0]: value})
    return items
