"""The system records' bodies: written and read here, and nowhere else.

A ``start``, ``rules`` or ``mode`` record says something about the table rather than the
game (docs/journal.md, "Record kinds"). The service writes their bodies with the
``*_body`` functions; everything that reads one (the replay, the walk's anchor, the
floor's pay tables and its second opinion, the tests) reads it with the ``read_*``
functions, so a field is named once (a body that cannot be read is a
:class:`~controller.journal.recipe.RecordError` naming what is wrong). A ``mode`` record
is read by nobody: it changes nothing in the game and is shown as it is stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.core.config import FireBetRules, rules_from_settings
from controller.journal.recipe import DECODE_ERRORS, RecordError


# start -------------------------------------------------------------------------------------
def start_body(pid: int, program: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a ``start`` record: the service's process and its program check."""
    return {"pid": pid, "program": dict(program)}


# rules -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RulesRecord:
    """A ``rules`` record read: the rules it puts in force, the settings it carries
    (``table``, ``firebet``, ``program``, ...: what the next rules record is compared
    with) and who started the service with which file."""

    rules: FireBetRules
    settings: dict[str, Any] = field(repr=False)
    changed: Mapping[str, Any] | None = None
    previous: int | None = None
    config: str | None = None
    started_by: str | None = None
    holds_for_hand: int | None = None  # journaled while that hand's wagers rode

    @property
    def program(self) -> str | None:
        """The program digest the start played under (None: not recorded)."""
        program = self.settings.get("program")
        return program if isinstance(program, str) else None


def rules_body(
    settings: Mapping[str, Any],
    *,
    changed: Mapping[str, Any],
    previous: int | None,
    config: str | None,
    started_by: str,
    holds_for_hand: int | None = None,
) -> dict[str, Any]:
    """The body of a ``rules`` record: the ``settings`` a start plays under
    (:func:`~controller.core.config.rules_settings` and the program's digest), what
    ``changed`` since the rules record ``previous``, and who started the service
    (``started_by``) with which ``config`` file. ``holds_for_hand``: journaled while
    that hand's wagers rode, the rules take effect at the next hand (the key is written
    only then, so every older record reads as it did)."""
    held = {"holds_for_hand": holds_for_hand} if holds_for_hand is not None else {}
    return dict(settings) | {
        "changed": dict(changed),
        "previous": previous,
        "config": config,
        "started_by": started_by,
        **held,
    }


def read_rules(body: str | Mapping[str, Any]) -> RulesRecord:
    """A ``rules`` record's body (its stored text or parsed); a :class:`RecordError`
    naming what is wrong when it is not one."""
    try:
        data = json.loads(body) if isinstance(body, str) else dict(body)
        if not isinstance(data, dict):
            raise TypeError("a rules record is a JSON object")
        rules = rules_from_settings(data)
    except DECODE_ERRORS as exc:
        raise RecordError(f"the rules record cannot be read: {exc!r}") from None
    previous = data.get("previous")
    config = data.get("config")
    started_by = data.get("started_by")
    changed = data.get("changed")
    holds = data.get("holds_for_hand")
    if holds is not None and (not isinstance(holds, int) or isinstance(holds, bool) or holds < 1):
        raise RecordError(f"the rules record's holds_for_hand is not a hand number: {holds!r}")
    return RulesRecord(
        rules,
        data,
        changed if isinstance(changed, Mapping) else None,
        previous if isinstance(previous, int) and not isinstance(previous, bool) else None,
        config if isinstance(config, str) else None,
        started_by if isinstance(started_by, str) else None,
        holds,
    )


def pending_why(hand: int, in_force: int | None) -> str:
    """Why a ``rules`` record waits, in a technician's words (``status``, ``doctor``, the
    log): the hand in play and the rules record it keeps (None: the defaults)."""
    kept = f"record {in_force}" if in_force is not None else "the defaults"
    return (
        f"it was journaled while hand {hand}'s fire bets rode: hand {hand} keeps the rules "
        f"it opened under ({kept}) to its settlement; the new rules take effect when the "
        "next hand's betting opens"
    )


# mode --------------------------------------------------------------------------------------
def diagnostics_body(on: bool) -> dict[str, Any]:
    """The body of a ``mode`` record that turns diagnostics mode on or off."""
    return {"diagnostics": on}


def storage_over_body(was: str) -> dict[str, Any]:
    """The body of a ``mode`` record that ends a storage fault (``was``: the fault)."""
    return {"storage_fault": None, "was": was}
