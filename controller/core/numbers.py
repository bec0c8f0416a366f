"""Numbers as people type them: ASCII digits only.

Python's ``int()`` and ``str.isdigit()`` take any Unicode digit (``٣`` is 3, ``²``
passes ``isdigit`` and then fails ``int``). Scripts, configuration keys and command
arguments accept only ``0``-``9``: anything else is bad input, never a number.
"""

from __future__ import annotations

import re

_WHOLE = re.compile(r"[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?|\.[0-9]+", re.ASCII)

WHOLE_NUMBER = "a whole number (digits 0-9)"


def whole_number(text: str) -> int | None:
    """The value of ``text`` when it is ASCII digits only; None for anything else."""
    return int(text) if _WHOLE.fullmatch(text) else None


def decimal_number(text: str) -> float | None:
    """The value of ``text`` when it is ASCII digits with at most one decimal point."""
    return float(text) if _DECIMAL.fullmatch(text) else None
