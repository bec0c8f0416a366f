"""A text cell of a CSV file that a spreadsheet opens as text, never as a formula (CSV
injection): the table's export and the floor's shift figures both write through it."""

from __future__ import annotations

import re

FORMULA_START = re.compile(r"(^|[\s;,|])(?=[=+\-@])")
"""Where a spreadsheet could read a formula: a formula character at the start of the cell
or of any part it may split the cell into (at a ``;``, ``,``, ``|`` or a space)."""


def spreadsheet_cell(text: str) -> str:
    """``text`` as a cell a spreadsheet will not take for a formula: a ``'`` before every
    formula character that starts the cell or a part of it; tabs and line breaks become
    spaces. Text with none of them is returned unchanged."""
    flat = text.replace("\t", " ").replace("\r", " ").replace("\n", " ")
    return FORMULA_START.sub(r"\1'", flat)
