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
    """``owner.<name>`` with ``values`` set: entries replaced first, then set inside.

    As scikit-learn's ``set_params`` does: ``layers__0=Dense(3)`` replaces the
    entry before ``layers__0__units=5`` is set in it, whatever their order;
    everything set inside one entry goes to its ``set_params`` at once (so its
    own lists follow the same rule). Entries set inside are clones: neither the
    list's layers nor a replacement passed here are modified.
    """
    items = getattr(owner, name, None)  # an estimator without the parameter has none
    if not isinstance(items, (list, tuple)):
        raise ValueError(
            f"Cannot set {sorted(values)}: this {type(owner).__name__} has no `{name}` list."
        )
    items, inside = list(items), {}
    for key, value in values.items():
        _, index, *rest = key.split("__", 2)
        if not index.isdigit() or int(index) >= len(items):
            raise ValueError(f"Invalid parameter {key!r}: `{name}` has {len(items)} entries.")
        if rest:
            inside.setdefault(int(index), {})[rest[0]] = value
        else:
            items[int(index)] = value
    for i, params in inside.items():
        items[i] = clone(items[i]).set_params(**params)  # never the caller's layer objects
    return items
