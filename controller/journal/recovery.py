"""Recovery, the full check and clear-halt: the journal's records replayed along the chain.

:func:`recover` opens a journal and replays its tail from the newest snapshot (the
rules in force there are those of the newest ``rules`` record at or before it, its seal
checked too); :func:`verify` checks every record from genesis (on every core when there
is much to check: :mod:`controller.journal.parallel`); :func:`clear_halt` resumes a
halted table from the longest prefix that verifies from genesis, on the state that
prefix proves. Each walks the chain with :class:`~controller.journal.walk.Walk`, which
replays each record through :class:`~controller.journal.replay.Replay`; the files, the
head file and the halt are :class:`~controller.journal.journal.Journal`'s.
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from controller.core.config import FireBetRules
from controller.core.events import BetAccepted, BetCancelled, RollVoided, Settlement
from controller.core.state import TableState
from controller.journal import store
from controller.journal.halt import Halt, Resumption
from controller.journal.handlog import Hand, HandLog
from controller.journal.journal import Journal
from controller.journal.parallel import PROGRESS_EVERY, counted, verify_segments
from controller.journal.proof import Break, mark
from controller.journal.recipe import GENESIS, RecordKind
from controller.journal.record import Record
from controller.journal.replay import RecordError, Replay
from controller.journal.walk import Problem, Walk, start_at_anchor


@dataclass(frozen=True)
class Recovered:
    """The outcome of :func:`recover`: where the replay stands after the last record (its
    state and the rules in force), the newest record and the halt in force."""

    replay: Replay
    last_record: int
    halted: Halt | None

    @property
    def state(self) -> TableState:
        """The table's state after the last record."""
        return self.replay.state


@dataclass
class VerifyReport:
    """The outcome of a full check from genesis (:func:`verify`)."""

    records: int = 0
    last_hash: str = GENESIS.hex()
    snapshots: int = 0
    problems: list[Problem] = field(default_factory=list)
    acknowledged: list[tuple[int | None, str, int]] = field(default_factory=list)
    halted: Halt | None = None

    @property
    def ok(self) -> bool:
        """True when no damage is left that a clear-halt did not acknowledge."""
        return not self.problems

    def summary(self) -> str:
        """One line for the technician."""
        if not self.ok:
            record, reason = self.problems[0]
            where = f"record {record}" if record is not None else "the files"
            more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            return f"journal DAMAGED at {where}: {reason}{more}"
        text = (
            f"journal OK: {self.records} records, {self.snapshots} snapshots, "
            f"chain head {self.last_hash[:16]}"
        )
        if self.acknowledged:
            text += f", {len(self.acknowledged)} earlier damage(s) set aside by clear-halt"
        if self.halted is not None:
            text += f"; HALTED: {self.halted.describe()}"
        return text


def recover(journal: Journal, rules: FireBetRules) -> Recovered:
    """Open ``journal`` (a fresh one only in a state directory that never held one), check
    its files, replay the tail from the newest snapshot and check the head; damage halts
    the table. ``rules``: in force before the first ``rules`` record."""

    def tail(db: sqlite3.Connection, key: bytes) -> tuple[Replay, Problem | None]:
        anchor = next(store.anchors(db), 0)
        walk, problem = start_at_anchor(db, key, rules, anchor)
        if problem is None:
            walk.run(
                store.raw_rows(db, walk.expect),
                store.snapshots(db, after=walk.expect - 1),
                stop_at_damage=True,
            )
            problem = walk.problems[0] if walk.problems else None
        return walk.replay, problem

    opened = journal.reopen(tail)
    replay = opened.tail if isinstance(opened.tail, Replay) else Replay(rules)
    return Recovered(replay, opened.last_record, opened.halted)


def verify(
    journal: Journal,
    rules: FireBetRules,
    *,
    processes: int = 1,
    progress: Callable[[int, int], None] | None = None,
    progress_every: int = PROGRESS_EVERY,
) -> VerifyReport:
    """Check the whole (recovered) journal from genesis: files, seals, snapshots, rules,
    head. ``processes`` > 1 checks the segments between snapshots on that many cores
    (:mod:`controller.journal.parallel`); any damage is then walked again on one core for
    the exact report. ``progress(done, total)`` hears the records checked so far, now and
    then, every ``progress_every`` records on one core (``journal verify`` draws it on a
    terminal; the service's check paces itself with it)."""
    report = VerifyReport(halted=journal.halted)

    def walk_all(db: sqlite3.Connection, key: bytes) -> tuple[Walk, None]:
        walk = Walk.start(key, rules)
        last = store.last_row(db)
        split = None
        if processes > 1 and last is not None and journal.damage is None:
            anchors = sorted(store.anchors(db))
            split = verify_segments(
                journal.path, key, rules, anchors, last.record, processes, progress=progress
            )
        if split is None:
            rows: Iterable[tuple[Any, ...]] = store.raw_rows(db)
            if progress is not None and last is not None:
                rows = counted(rows, last.record, progress, progress_every)
            walk.run(rows, store.snapshots(db), stop_at_damage=False)
        else:
            walk.records, walk.snapshots = split
            walk.prev = last.mac if last is not None else GENESIS
        return walk, None

    walk, others = journal.check(walk_all)
    problems = [*walk.problems, *others] if isinstance(walk, Walk) else others
    if journal.damage is not None and journal.damage not in problems:
        problems.insert(0, journal.damage)
    if isinstance(walk, Walk):
        report.records, report.snapshots = walk.records, walk.snapshots
        report.last_hash = walk.prev.hex()
        report.acknowledged = walk.acknowledged
    report.problems = problems
    return report


@dataclass(frozen=True)
class SetAside:
    """What a clear-halt sets aside, besides the record numbers: the hands the records past
    the verified prefix touched (as :mod:`controller.journal.handlog` shows a hand), the
    fire bets they took and the payouts they settled, all of which come off the game,
    ``history`` and the meters. Their seals are not checked (they are set aside because
    the chain does not prove them): this is what they *say*, for the technician to weigh."""

    body: dict[str, Any]  # the clear_halt record's body
    hands: list[Hand] = field(default_factory=list)
    wagered: int = 0  # fire bets taken in the records set aside (dollars)
    paid: int = 0  # payouts settled in them
    unreadable: int = 0  # records set aside whose meaning cannot be read

    def to_dict(self) -> dict[str, Any]:
        """The preview's JSON (the reply of ``clear-halt`` asked to preview)."""
        return {
            "resume_from": self.body["resume_from"],
            "set_aside": self.body["set_aside"],
            "hands": [{key: hand[key] for key in ("hand", *_ASIDE_KEYS)} for hand in self.hands],
            "break": self.body["resume_from"] + 1,  # nothing from here on is proven
            "wagered": self.wagered,  # what the records set aside say: unverified
            "paid": self.paid,
            "unreadable": self.unreadable,
        }


_ASIDE_KEYS = (
    "points", "unique_points", "result", "odds_to_one", "payouts", "wagers", "rolls",
    "verified", "break", "last_verified",
)  # fmt: skip


def _prove(
    db: sqlite3.Connection, key: bytes, rules: FireBetRules, halt: Halt, last_known: int, note: str
) -> tuple[Replay, SetAside]:
    """The one walk of a clear-halt: from genesis, the longest verified prefix, what it
    resumes on and what it sets aside (the records past the prefix replayed from its state,
    seals unchecked, into hand logs: their hands, bets and payouts)."""
    walk = Walk.start(key, rules)
    walk.run(store.raw_rows(db), store.snapshots(db), stop_at_damage=False)
    past = [n for n in store.anchors(db) if n > walk.good]
    aside = tuple(sorted({*past, *walk.snapshots_aside}))
    resumption = Resumption(walk.good, walk.state, max(last_known, walk.good), aside)
    found = SetAside(resumption.payload(halt, note))
    replay, log = walk.replay.copy(), HandLog()
    log.begin(replay.state, walk.good)
    before = copy.deepcopy(log.hands)  # the hand in play as the verified prefix leaves it
    wagered = paid = unreadable = 0
    for row in store.rows(db, walk.good + 1):
        if row.kind == RecordKind.CLEAR_HALT:
            continue  # an earlier clear-halt past the prefix: it resumed on what is set aside
        try:
            step = replay.step(*row[:5])
        except RecordError:
            unreadable += 1
            continue
        log.take(step)
        for event in step.events:
            if isinstance(event, BetAccepted):
                wagered += event.amount
            elif isinstance(event, BetCancelled):
                wagered -= event.amount
            elif isinstance(event, Settlement):
                paid += sum(event.payouts.values())
            elif isinstance(event, RollVoided) and event.reversed_settlement is not None:
                paid -= sum(event.reversed_settlement.payouts.values())
    at = Break(walk.good + 1)  # everything set aside is past the break: none of it proven
    touched = [
        mark(h, at, before.get(n)) for n, h in sorted(log.hands.items())
        if h["rolls"] or h["actions"] or h["result"] is not None
    ]  # fmt: skip
    if resumption.records_aside is None:
        touched = []
    return walk.replay, replace(
        found, hands=touched, wagered=wagered, paid=paid, unreadable=unreadable
    )


def clear_halt(
    journal: Journal, rules: FireBetRules, actor: str, *, note: str = ""
) -> tuple[Replay, Record] | None:
    """Lift ``halted`` (journaled with who); None when the journal was not halted.

    The game resumes from the longest prefix that verifies from the genesis record, on
    the state it proves; the ``clear_halt`` record names what was set aside (records,
    snapshots). What it gives back: where the replay stands then, and the record."""

    def prove(
        db: sqlite3.Connection, key: bytes, halt: Halt, last_known: int
    ) -> tuple[Replay, dict[str, object]]:
        replay, aside = _prove(db, key, rules, halt, last_known, note)
        return replay, aside.body

    done = journal.resume(actor, prove)
    if done is None:
        return None
    replay, record = done
    assert record is not None
    return replay, record


def preview_clear_halt(journal: Journal, rules: FireBetRules) -> SetAside | None:
    """What :func:`clear_halt` would set aside, by the same walk, journaling nothing (the
    halt stays); None when the journal is not halted."""
    found: list[SetAside] = []

    def prove(
        db: sqlite3.Connection, key: bytes, halt: Halt, last_known: int
    ) -> tuple[None, dict[str, Any]]:
        _replay, aside = _prove(db, key, rules, halt, last_known, "")
        found.append(aside)
        return None, aside.body

    if journal.resume("preview", prove, write=False) is None:
        return None
    return found[0]
