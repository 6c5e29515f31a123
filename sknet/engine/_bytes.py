"""Bytes as people write them (``'8GB'``, ``'512 MiB'``) and as sknet prints them."""

import math
import re
from numbers import Integral

_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BYTES = re.compile(
    r"\s*(?P<number>[-+]?(?:[0-9.]*[0-9][0-9.]*(?:e[-+]?[0-9]+)?|nan|inf(?:inity)?))"
    r"\s*(?:(?P<unit>[kmgt])(?P<binary>i?))?b?\s*",
    re.IGNORECASE,
)


def parse_bytes(value, name="max_device_memory"):
    """Bytes from an int or a string such as ``'8GB'``, ``'512 MiB'`` or ``'1.5e9'``.

    ``k``, ``M``, ``G`` and ``T`` are powers of 1000, ``Ki``, ``Mi``, ``Gi``
    and ``Ti`` powers of 1024; the ``B`` is optional. Fractions of a byte are
    dropped.

    Raises
    ------
    TypeError
        If ``value`` is neither an int nor a string.
    ValueError
        If the string is not a number of bytes, is not finite, or the value
        is less than one byte.

    Examples
    --------
    >>> parse_bytes("512 MiB"), parse_bytes("1.5e3"), parse_bytes(" 8 GB ")
    (536870912, 1500, 8000000000)
    """
    if isinstance(value, bool) or not isinstance(value, (Integral, str)):
        raise TypeError(
            f"{name} must be an int or a string such as '8GB' or '512MiB', got {value!r}"
        )
    number = int(value) if isinstance(value, Integral) else _bytes_in(value, name)
    if number < 1:
        raise ValueError(f"{name} must be at least 1 byte, got {value!r}")
    return number


def _bytes_in(text, name):
    """The bytes a string says, for :func:`parse_bytes` (may be below one)."""
    match = _BYTES.fullmatch(text)
    try:
        amount = float(match["number"])
    except (TypeError, ValueError):  # no match at all, or a number such as '1..2'
        raise ValueError(
            f"{name} must be a number of bytes or a string such as '8GB' or '512MiB', got {text!r}"
        ) from None
    unit = (match["unit"] or "").lower()
    amount *= 1024 ** "_kmgt".index(unit) if match["binary"] else _UNITS[unit]
    if math.isnan(amount):
        raise ValueError(f"{name} must be a number of bytes, got {text!r} (not a number)")
    if amount == math.inf:
        raise ValueError(f"{name} is too large: {text!r} is not a finite number of bytes")
    return -1 if amount < 1 else int(amount)


def format_bytes(n):
    """``1536`` -> ``'1.5 KiB'``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def limit_string(n):
    """A ``max_device_memory`` string of at least ``n`` bytes: ``1536`` -> ``'1.5KiB'``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{math.ceil(n / size * 10) / 10:g}{unit}"
    return f"{int(math.ceil(n))}B"
