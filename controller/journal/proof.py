"""What a halted journal can prove: the figures before the break, and what rests past it.

A halt names the first record its check found damaged: **the break**. The records before
it checked (their seals, from the check's starting point); the break and every record
after it are not proven by the chain (an edited record says what the editor wrote, and
everything folded after it rests on it). So every reader of a halted journal (``history``,
``export``, ``status``, the ``clear-halt`` preview) marks each hand, wager and payout that
rests on a record at or past the break as **unverified**, never states it as fact, and
shows beside it the last verified figure, the one the records before the break give,
where one exists (``docs/journal.md``, "What a halted table shows").

A halt that names no record (a journal file removed, the head file gone) proves no record:
``break`` is None and every figure is unverified.

Pure: hand logs (:mod:`controller.journal.handlog`) in, marked hand logs out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.journal.handlog import Hand

FIGURES = ("points", "unique_points", "result", "odds_to_one", "payouts", "wagers")
"""A hand's figures a ``last_verified`` carries (the hand as the verified records left it)."""


@dataclass(frozen=True)
class Break:
    """Where a halted journal stops proving: ``record`` is the first record not proven
    (None: no record is, the files themselves are damaged)."""

    record: int | None

    @property
    def first(self) -> int:
        """The first record not proven (1 when none is)."""
        return self.record if self.record is not None else 1

    @property
    def verified_through(self) -> int:
        """The last record proven (0: none)."""
        return self.first - 1

    def proves(self, record: int | None) -> bool:
        """Whether ``record`` is before the break (None: nothing rests on a record)."""
        return record is None or record < self.first


def hand_verified(hand: Hand, at: Break) -> bool:
    """Whether everything a hand shows (rolls, points, wagers, result, payouts, actions)
    rests on records before the break: the last record that touched it is before it."""
    return at.proves(hand["last_record"])


def last_verified(hand: Hand | None, at: Break) -> dict[str, Any] | None:
    """A hand's figures as the records before the break left them (None: it had none)."""
    if hand is None or at.verified_through < 1:
        return None
    return {"record": at.verified_through, **{k: hand[k] for k in FIGURES}}


def mark(hand: Hand, at: Break, before: Hand | None) -> Hand:
    """``hand`` with ``verified``, ``break`` and ``last_verified`` (``before``: the same
    hand after the last record before the break, None when it had not begun); each action
    and roll of it at or past the break gets ``"verified": false``."""
    verified = hand_verified(hand, at)
    out = dict(hand)
    out["verified"] = verified
    out["break"] = at.record
    out["last_verified"] = None if verified else last_verified(before, at)
    for key in ("actions", "roll_log"):
        if key in out:
            out[key] = [
                entry if at.proves(entry.get("record")) else entry | {"verified": False}
                for entry in out[key]
            ]
    return out
