"""The walk along the chain: check each record's seal, replay it, note damage.

Recovery walks from the newest snapshot, ``journal verify`` and ``clear-halt`` from the
genesis record; each record is replayed through :class:`~controller.journal.replay.Replay`
(so a record is decided under the rules in force when it was journaled). The walk keeps
the *verified prefix*: the records from genesis whose seals and commands all check, with
the state after them.

Damage breaks the prefix: a record missing, a seal that does not check, a record that
cannot be read. Past it the walk still checks seals (to report every problem and to find
a ``clear_halt`` record) but folds nothing until a ``clear_halt`` whose resume point and
state the prefix proves. A *snapshot* that is not what its record's commands give is
damage too (it is reported, and halts the table) but it does not break the prefix: the
records' seals still prove the commands, so the prefix goes on with the state the
commands give, never with the snapshot's. A snapshot altered without the key is found by
its record's seal, which then checks with the state the records give; one written with
the key but disagreeing with the records is found by comparing the two.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.commands import Command, Roll
from controller.core.config import FireBetRules
from controller.core.events import Event
from controller.core.state import TableState
from controller.journal import store
from controller.journal.recipe import (
    GENESIS,
    ROLL_TEXT,
    RecordKind,
    body_text,
    canonical,
    decode_body,
    iso,
    seal,
    sealer,
)
from controller.journal.replay import (
    DECODE_ERRORS,
    Held,
    RecordError,
    Replay,
    resume_state_of,
)
from controller.journal.store import Row
from controller.journal.system import RulesRecord, read_rules

Problem = tuple[int | None, str]
_RUN = 512  # sealed records folded together at most (the walk's memory stays flat)


@dataclass
class Walk:
    """A walk in progress: the replay of the verified prefix so far and the problems."""

    key: bytes
    replay: Replay
    prev: bytes = GENESIS  # the stored MAC of the record before the next one
    expect: int = 1
    good: int = 0  # the last record of the verified prefix
    broken: bool = False  # damage broke the prefix: nothing more is folded
    problems: list[Problem] = field(default_factory=list)
    acknowledged: list[tuple[int | None, str, int]] = field(default_factory=list)
    snapshots: int = 0
    records: int = 0
    snapshots_aside: list[int] = field(default_factory=list)  # not what the records give

    @classmethod
    def start(cls, key: bytes, rules: FireBetRules) -> Walk:
        """A walk from the genesis record, under ``rules`` until the first ``rules`` record."""
        return cls(key, Replay(rules))

    @classmethod
    def from_anchor(
        cls, key: bytes, replay: Replay, row: Row, prev: bytes, state_text: str | None
    ) -> tuple[Walk, Problem | None]:
        """A walk starting after the snapshot at ``row`` (whose predecessor's MAC is
        ``prev``); ``replay`` has the rules in force there (its state is replaced by the
        snapshot's)."""
        walk = cls(key, replay, prev=prev, expect=row.record)
        if state_text is None:
            return walk, (row.record, f"the snapshot of record {row.record} is missing")
        if seal(key, prev, *row[:5], state_text) != row.mac:
            return walk, (row.record, bad_seal(row))
        try:
            replay.resume(TableState.from_dict(json.loads(state_text)))
        except DECODE_ERRORS as exc:
            return walk, (row.record, f"the snapshot of record {row.record} cannot be read: {exc}")
        walk.prev = row.mac
        walk.expect, walk.good = row.record + 1, row.record
        return walk, None

    @property
    def state(self) -> TableState:
        """The state after the verified prefix."""
        return self.replay.state

    def run(
        self, rows: Iterable[tuple[Any, ...]], snaps: Mapping[int, str], *, stop_at_damage: bool
    ) -> None:
        """Walk ``rows`` (plain tuples in :class:`Row` order, bodies as stored or as text)
        in order; ``snaps`` is the state text by record. Command records without a
        snapshot, in an intact chain, take the fast path: the same checks as :meth:`step`
        (each seal, then the commands folded through the rules), with the key's pads
        hashed once (:func:`sealer`) and the commands of up to ``_RUN`` sealed records
        folded together (:meth:`_fold_run`)."""
        mac_of = sealer(self.key)
        rows = iter(rows)
        while True:
            prev, expect = self.prev, self.expect
            sealed: list[tuple[Any, ...]] = []
            commands: list[Command] = []
            slow: tuple[Any, ...] | None = None
            fast = not self.broken
            for raw in rows:
                number, at, actor, kind, body, snap, mac = raw
                if not snap and number == expect and kind == "command" and fast:
                    at_text = iso(at)
                    # a packed reader roll (format 3): its text and its command from one divmod
                    packed = type(body) is int and body >= 0
                    if packed:
                        seq, dice = divmod(body, 36)
                        d1, d2 = dice // 6 + 1, dice % 6 + 1
                        said = f'{ROLL_TEXT}{d1},"d2":{d2},"seq":{seq}}}'
                    else:
                        said = body if type(body) is str else body_text(body)
                    text = f"{number}\n{at_text}\n{actor}\ncommand\n0\n{said}"
                    if mac_of(prev + text.encode()) == mac:
                        try:
                            command = (
                                Roll(d1, d2, "reader", seq, actor=actor, at=at_text)
                                if packed
                                else decode_body(body, actor, at, at_text)
                            )
                        except DECODE_ERRORS:
                            pass  # the slow path says what is wrong
                        else:
                            sealed.append(raw)
                            commands.append(command)
                            prev, expect = mac, number + 1
                            if len(sealed) < _RUN:
                                continue
                            break
                slow = raw
                break
            else:
                if not sealed:
                    return  # every row walked
            if sealed and not self._fold_run(sealed, commands, snaps, stop_at_damage):
                return
            if slow is not None:
                self.step(store.as_row(slow), snaps.get(slow[0]))
                if stop_at_damage and self.problems:
                    return

    def _fold_run(
        self,
        sealed: list[tuple[Any, ...]],
        commands: list[Command],
        snaps: Mapping[int, str],
        stop_at_damage: bool,
    ) -> bool:
        """Fold the commands of ``sealed`` (consecutive records whose seals check, after the
        walk so far) through the replay (:meth:`Replay.fold`). A command the rules cannot
        fold sends its record to :meth:`step` (which names the damage) and the records
        after it along the walk again. False when the walk should stop there."""
        done = self.replay.fold(commands)
        if done:
            last = sealed[done - 1]
            self.records += done
            self.prev = last[6]
            self.good, self.expect = last[0], last[0] + 1
        if done == len(commands):
            return True
        self.step(store.as_row(sealed[done]), None)
        if stop_at_damage and self.problems:
            return False
        self.run(sealed[done + 1 :], snaps, stop_at_damage=stop_at_damage)
        return not (stop_at_damage and self.problems)

    def step(self, row: Row, state_text: str | None) -> None:
        """Check one record and fold it into the state (or note what is wrong)."""
        number = row.record
        self.records += 1
        if number != self.expect:
            self._break(self.expect, _gap(self.expect, number - 1))
        if row.snap:
            self.snapshots += 1
        if row.snap and state_text is None:
            self._break(number, f"the snapshot of record {number} is missing")
        elif seal(self.key, self.prev, *row[:5], state_text if row.snap else None) != row.mac:
            if number == self.expect and not self._snapshot_altered(row):
                self._break(number, bad_seal(row))
        elif row.kind == RecordKind.CLEAR_HALT:
            self._acknowledge(row, state_text)
        elif not self.broken:
            self._fold(row, state_text)
        self.prev, self.expect = row.mac, number + 1

    def _break(self, record: int | None, reason: str) -> None:
        self.problems.append((record, reason))
        self.broken = True

    def _fold(self, row: Row, state_text: str | None) -> None:
        try:
            after = self.replay.step(*row[:5]).after
        except RecordError as exc:
            self._break(row.record, str(exc))
            return
        self.good = row.record
        if state_text is not None and row.snap and state_text != canonical(after.to_dict()):
            self.problems.append(
                (row.record, f"the snapshot of record {row.record} disagrees with the records "
                 "before it (the game goes on from the state the records give)")
            )  # fmt: skip
            self.snapshots_aside.append(row.record)

    def _snapshot_altered(self, row: Row) -> bool:
        """A snapshot record whose seal fails with its stored snapshot: does the seal
        check with the state the records give? Then the record is proven and folded, and
        only its stored snapshot is damage."""
        if not row.snap or self.broken or row.kind == RecordKind.CLEAR_HALT:
            return False
        before = self.replay.copy()
        try:
            after = before.step(*row[:5]).after
        except RecordError:
            return False
        if seal(self.key, self.prev, *row[:5], canonical(after.to_dict())) != row.mac:
            return False
        self.replay = before
        self.good = row.record
        self.problems.append(
            (row.record, f"the snapshot of record {row.record} was altered: the record's "
             "seal proves the state its records give, not the stored one")
        )  # fmt: skip
        self.snapshots_aside.append(row.record)
        return True

    def _acknowledge(self, row: Row, state_text: str | None) -> None:
        """A sealed clear-halt: it acknowledges the damage before it when it resumed from
        exactly the verified prefix and its state (it is the new anchor)."""
        try:
            data: dict[str, Any] = json.loads(row.body)
            resume_from = int(data["resume_from"])
            resume = canonical(data["resume_state"])
            state = resume_state_of(data)
        except (*DECODE_ERRORS, RecordError) as exc:
            self._break(row.record, f"the clear-halt record cannot be decoded: {exc!r}")
            return
        if state_text is not None and state_text != resume:
            self._break(row.record, "the clear-halt's snapshot is not its resume state")
            return
        if resume_from != self.good or resume != canonical(self.state.to_dict()):
            self._break(
                row.record, f"the clear-halt resumed from record {resume_from}, which the "
                f"chain does not prove (the verified prefix ends at record {self.good})",
            )  # fmt: skip
            return
        self.acknowledged += [(r, why, row.record) for r, why in self.problems]
        self.problems.clear()
        self.broken = False
        self.good = row.record
        self.replay.resume(state)


def replay_at(
    db: sqlite3.Connection, number: int, rules: FireBetRules, key: bytes | None = None
) -> tuple[Replay, Problem | None]:
    """A replay under the rules in force after record ``number``: those of the newest
    ``rules`` record at or before it (``rules`` when there is none). With ``key``, that
    record's seal is checked (a problem naming it when it does not check)."""
    row = store.rules_row(db, number)
    if row is None:
        return Replay(rules), None
    if key is not None:
        before = store.before(db, row.record)
        prev = before.mac if before is not None else GENESIS
        text = store.snapshot(db, row.record) if row.snap else None
        if seal(key, prev, *row[:5], text) != row.mac:
            return Replay(rules), (row.record, bad_seal(row))
    try:
        found = read_rules(row.body)
        held = _held(db, found, rules)
    except RecordError as exc:
        return Replay(rules), (row.record, str(exc))
    return Replay(found.rules, rules_record=row.record, settings=found.settings, held=held), None


def _held(db: sqlite3.Connection, found: RulesRecord, rules: FireBetRules) -> Held | None:
    """The rules the hand ``found`` waited for opened under (None: it waited for none):
    those of the newest ``rules`` record before it that did not wait for the same hand
    (``rules`` before the first). Whether that hand is still in play is the state's."""
    hand = found.holds_for_hand
    if hand is None:
        return None
    previous = found.previous
    while previous is not None:
        row = store.rules_row(db, previous)
        if row is None or row.record != previous:
            raise RecordError(f"the rules record names record {previous} before it: not one")
        before = read_rules(row.body)
        if before.holds_for_hand != hand:
            return Held(before.rules, row.record, hand)
        previous = before.previous
    return Held(rules, None, hand)


def start_at_anchor(
    db: sqlite3.Connection, key: bytes, rules: FireBetRules, number: int
) -> tuple[Walk, Problem | None]:
    """A walk after the snapshot at record ``number`` (0: from genesis), checked against
    its seal, under the rules in force there."""
    if not number:
        return Walk.start(key, rules), None
    row = store.row(db, number)
    if row is None:
        return Walk.start(key, rules), (number, f"record {number} is missing")
    replay, problem = replay_at(db, number, rules, key)
    if problem is not None:
        return Walk(key, replay), problem
    before = store.before(db, number)
    prev = before.mac if before is not None else GENESIS
    return Walk.from_anchor(key, replay, row, prev, store.snapshot(db, number))


def replay_before(
    db: sqlite3.Connection,
    rules: FireBetRules,
    number: int,
    seen: Callable[[int, Sequence[Event]], None] | None = None,
) -> tuple[Replay, bool]:
    """A replay standing just before record ``number`` (after every record below it), from
    the newest snapshot before it, each record on the way replayed (no seal is checked: a
    reader's replay, not a verifier's), and whether its state is known: not when a record
    on the way is missing or cannot be read (what comes after it cannot be told until the
    next snapshot or ``clear_halt``; the walk of ``journal verify`` names the damage). The
    rules in force are followed either way. ``seen``: called with each record replayed on
    the way and its events."""
    anchor = next(store.anchors(db, before=number), 0)
    replay, _ = replay_at(db, anchor, rules)
    known = True
    if anchor:
        try:
            replay.resume(TableState.from_dict(json.loads(store.snapshot(db, anchor) or "")))
        except DECODE_ERRORS:
            known = False
    expect = anchor + 1
    for row in store.rows(db, anchor + 1, number - 1):
        known = known and row.record == expect
        expect = row.record + 1
        try:
            step = replay.step(*row[:5])
        except RecordError:
            known = False
            continue
        if step.kind == RecordKind.CLEAR_HALT:
            known = True  # the game resumes on the state it names
        if seen is not None:
            seen(row.record, step.events)
    return replay, known and expect == number


def _gap(first: int, last: int) -> str:
    if first == last:
        return f"record {first} is missing"
    return f"records {first}..{last} are missing"


def bad_seal(row: Row) -> str:
    """Why ``row`` does not check, in a technician's words."""
    if row.snap:
        return (
            f"record {row.record} or its snapshot does not match its seal "
            "(edited, torn, or written without the table's key)"
        )
    return (
        f"record {row.record} does not match its seal "
        "(edited, torn, or written without the table's key)"
    )


def screen_seals(db: sqlite3.Connection, key: bytes, first: int, last: int) -> int | None:
    """The first of records ``first``..``last`` that is missing or whose seal does not check
    with its stored MAC (and snapshot), else None: a cheap screen (no record is replayed)
    for the running table's watch; :func:`damage_at` then names what is wrong in the
    walk's own words. Call it inside a read transaction (one consistent view)."""
    if first > last:
        return None
    before_row = store.before(db, first)
    prev = before_row.mac if before_row is not None else GENESIS
    snaps = dict(
        db.execute(
            "SELECT record, state FROM snapshots WHERE record BETWEEN ? AND ?", (first, last)
        ).fetchall()
    )
    expect = first if before_row is None or before_row.record == first - 1 else None
    if expect is None:
        return first  # the record before ``first`` is missing: the gap starts here
    mac_of = sealer(key)  # the key's pads hashed once for the whole screen
    for number, at, actor, kind, body, snap, mac in db.execute(
        f"SELECT {store.COLUMNS} FROM records WHERE record BETWEEN ? AND ? ORDER BY record",
        (first, last),
    ):
        if number != expect:
            return expect
        if snap:
            text = snaps.get(number)
            if text is None or seal(key, prev, number, at, actor, kind, body, text) != mac:
                return int(number)
        elif mac_of(prev + f"{number}\n{iso(at)}\n{actor}\n{kind}\n0\n{body}".encode()) != mac:
            return int(number)  # (the seal's message without a snapshot, as run() makes it)
        prev, expect = mac, expect + 1
    return None if expect > last else expect


def damage_at(
    db: sqlite3.Connection, key: bytes, rules: FireBetRules, number: int
) -> Problem | None:
    """What the walk finds at or before record ``number`` when it starts at the newest
    snapshot before it (as recovery starts at the newest one): its first problem, in the
    words recovery and ``journal verify`` use, or None when it finds nothing."""
    anchor = next(store.anchors(db, before=number), 0)
    walk, problem = start_at_anchor(db, key, rules, anchor)
    if problem is not None:
        return problem
    walk.run(
        db.execute(
            f"SELECT {store.COLUMNS} FROM records WHERE record BETWEEN ? AND ? ORDER BY record",
            (walk.expect, number),
        ),
        dict(
            db.execute(
                "SELECT record, state FROM snapshots WHERE record BETWEEN ? AND ?",
                (walk.expect, number),
            ).fetchall()
        ),
        stop_at_damage=True,
    )
    if walk.problems:
        return walk.problems[0]
    if walk.expect <= number:  # the walk ran out before it: records are missing
        return (walk.expect, _gap(walk.expect, number))
    return None
