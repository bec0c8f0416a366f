"""The rule for a table's id: one home for the table's config, the floor link and the floor.

A table publishes under ``<prefix>/<table id>/...`` on the floor broker and the floor
keys everything it stores by the id, so the id is one plain topic level of bounded
length. The table refuses at config load an id the floor would drop
(:func:`controller.core.config.load_config`), the wire takes a topic's id only when it
keeps this rule (:func:`controller.wire.messages.split_topic`), and ``floor.toml``'s
``[tables.<id>]`` keys are held to it too.
"""

from __future__ import annotations

import re

MAX_TABLE_ID = 64
"""Characters in a table id, at most."""
TABLE_ID = re.compile(rf"[A-Za-z0-9_.-]{{1,{MAX_TABLE_ID}}}")
TABLE_ID_RULE = f"a table id is 1 to {MAX_TABLE_ID} letters, digits, '-', '_' or '.'"
"""The rule in words, for every message that refuses an id."""


def is_table_id(text: str) -> bool:
    """Whether ``text`` keeps the rule."""
    return TABLE_ID.fullmatch(text) is not None


def table_id_problem(text: str) -> str | None:
    """What is wrong with ``text`` as a table id (None: nothing), naming the rule."""
    if is_table_id(text):
        return None
    shown = text if len(text) <= 40 else text[:40] + "..."
    too_long = len(text) > MAX_TABLE_ID
    what = f"{len(text)} characters long" if too_long else "not a plain topic level"
    return f"{shown!r} is {what}: {TABLE_ID_RULE} (it is a topic level on the floor broker)"
