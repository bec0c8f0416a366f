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

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.core.config import FireBetRules
from controller.core.state import TableState
from controller.journal import store
from controller.journal.halt import Halt, Resumption
from controller.journal.journal import Journal
from controller.journal.parallel import counted, verify_segments
from controller.journal.recipe import GENESIS
from controller.journal.record import Record
from controller.journal.replay import Replay
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
) -> VerifyReport:
    """Check the whole (recovered) journal from genesis: files, seals, snapshots, rules,
    head. ``processes`` > 1 checks the segments between snapshots on that many cores
    (:mod:`controller.journal.parallel`); any damage is then walked again on one core for
    the exact report. ``progress(done, total)`` hears the records checked so far, now and
    then (``journal verify`` draws it on a terminal)."""
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
                rows = counted(rows, last.record, progress)
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
        walk = Walk.start(key, rules)
        walk.run(store.raw_rows(db), store.snapshots(db), stop_at_damage=False)
        past = [n for n in store.anchors(db) if n > walk.good]
        aside = tuple(sorted({*past, *walk.snapshots_aside}))
        resumption = Resumption(walk.good, walk.state, max(last_known, walk.good), aside)
        return walk.replay, resumption.payload(halt, note)

    done = journal.resume(actor, prove)
    if done is None:
        return None
    replay, record = done
    return replay, record
