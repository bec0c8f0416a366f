"""Format 3's packed body (recipe.pack_body): the common reader roll as one integer and
back, the same in Python and in SQL, and nothing else packed (issue 31)."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from controller.journal.recipe import BODY_SQL, body_text, decode_body, pack_body

ROLL = '{{"command":"roll","d1":{},"d2":{},"seq":{}}}'


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 10**15))
def test_a_reader_roll_packs_to_one_integer_and_back(d1: int, d2: int, seq: int) -> None:
    text = ROLL.format(d1, d2, seq)
    packed = pack_body(text)
    assert isinstance(packed, int) and packed == seq * 36 + (d1 - 1) * 6 + d2 - 1
    assert body_text(packed) == text
    db = sqlite3.connect(":memory:")
    assert db.execute(f"SELECT {BODY_SQL} FROM (SELECT ? AS body)", (packed,)).fetchone() == (text,)
    roll = decode_body(packed, "reader", 0, "2026-12-04T04:00:00.000+00:00")
    assert (roll.d1, roll.d2, roll.seq, roll.source) == (d1, d2, seq, "reader")  # type: ignore[attr-defined]


def test_any_other_body_is_stored_as_its_text() -> None:
    for text in (
        ROLL.format(7, 1, 3),  # a die the reader never sends
        ROLL.format(0, 1, 3),
        ROLL.format(1, 1, "03"),  # not a plain decimal: the text is what was sealed
        ROLL.format(1, 1, -3),
        ROLL.format(1, 1, "\u0663"),  # a digit, but not ASCII
        '{"command":"roll","d1":1,"d2":1,"seq":3,"source":"manual"}',
        '{"command":"roll","d1":1,"d2":1}',
        '{"amount":5,"command":"bet","position":1}',
        '{"format":3}',
    ):
        assert pack_body(text) == text
        assert body_text(text) == text
