"""The values of ``gamma`` and ``n_components`` that may be lists, read without data.

A ``gamma`` is a number, ``"auto"``, ``"auto*F"`` or a grid of these (a list, or a
comma list at the command line: ``auto*0.25,auto,auto*4``); an ``n_components`` is a
positive int or a list of them (``500,1000,2000``).  Every reader of these values (the
maps, the memory plan, the search, the command line before anything heavier than numpy
is imported) parses them here.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np


def is_listed(value) -> bool:
    """Whether a parameter that may be a list is one: a list, tuple or array, or a string
    with a comma (the command line's ``500,1000`` or ``auto*0.5,auto``).  Its items are
    not checked (:func:`gamma_items`, :func:`component_sizes`)."""
    return isinstance(value, (list, tuple, np.ndarray)) or (isinstance(value, str) and "," in value)


def listed_items(value):
    """The items of a listed ``value`` (:func:`is_listed`) as a list: a string split at its
    commas, an array's elements flattened; None for one value."""
    if not is_listed(value):
        return None
    if isinstance(value, str):
        return value.split(",")
    return list(np.asarray(value, dtype=object).ravel()) if isinstance(value, np.ndarray) else list(value)


def gamma_items(gamma):
    """``(items, is_grid)`` of a ``gamma`` parameter; each item a float > 0, ``"auto"``
    or ``("auto", factor)``.

    A number, ``"auto"`` or ``"auto*F"`` is one item (``is_grid`` False); a grid
    (:func:`is_listed`) is a list of them.  Raises a ``ValueError`` naming the
    first bad item.
    """
    values = listed_items(gamma)
    if values is None:
        return [_item(gamma, None)], False
    if not values:
        raise ValueError("gamma is an empty grid; give at least one value (a number > 0, 'auto' "
                         "or 'auto*F').")
    return [_item(v, i + 1) for i, v in enumerate(values)], True


def _item(value, position):
    where = "gamma" if position is None else f"gamma grid item {position}"
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError(f"{where} is empty; each item is a number > 0, 'auto' or 'auto*F'.")
        if text == "auto":
            return "auto"
        if text.startswith("auto*"):
            factor = _number(text[5:])
            if factor is None or not factor > 0 or not math.isfinite(factor):
                raise ValueError(f"{where} ({value!r}): 'auto*' needs a finite number > 0 after the "
                                 "'*', e.g. 'auto*0.5'.")
            return ("auto", factor)
        number = _number(text)
        if number is None:
            raise ValueError(f"{where} ({value!r}) is not a number, 'auto' or 'auto*F'.")
        value = number
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{where} ({value!r}) is not a number, 'auto' or 'auto*F'.")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where} ({value!r}): gamma must be a finite number > 0.")
    return float(value)


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def item_label(item):
    """How a grid item is written: ``0.5``, ``auto``, ``auto*0.25``."""
    if isinstance(item, float):
        return f"{item:g}"
    return "auto" if item == "auto" else f"auto*{item[1]:g}"


def item_value(item):
    """A grid item as the ``gamma`` of a map fitted with it alone: the float, ``"auto"`` or
    ``"auto*F"``."""
    return item if isinstance(item, float) else item_label(item)


def component_sizes(value):
    """The sizes of an ``n_components`` value as a sorted tuple of unique positive ints.

    ``value`` is an int, a list, tuple or 1-D array of ints, or a string of comma
    separated ints (``"500,1000,2000"``, as the command line gives it); ``1000`` is
    ``(1000,)``.  A bad or empty item is a one-line ``ValueError`` naming it.
    """
    items = listed_items(value)
    listed = items is not None and not (isinstance(value, np.ndarray) and value.ndim != 1)
    items = items if listed else [value]
    if not items:
        raise ValueError("n_components is an empty list; give a positive int or a list of them, "
                         "e.g. 500,1000,2000.")
    sizes = set()
    for i, item in enumerate(items):
        size = _positive_int(item)
        if size is None:
            where = f"n_components item {i + 1}" if listed else "n_components"
            raise ValueError(f"{where} ({item!r}) is not a positive int; give a positive int or a "
                             "list of them, e.g. 500,1000,2000.")
        sizes.add(size)
    return tuple(sorted(sizes))


def _positive_int(item):
    """``item`` as an int > 0 (an int, or a string of digits), else None."""
    if isinstance(item, str):
        text = item.strip()
        item = int(text) if text.isdigit() and text.isascii() else None
    if isinstance(item, bool) or not isinstance(item, Integral) or item < 1:
        return None
    return int(item)
