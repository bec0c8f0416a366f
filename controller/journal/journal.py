"""The journal of one table, as the service and the tools use it.

:class:`Journal` adds to the writer (:mod:`controller.journal.writer`: open,
recover; :mod:`controller.journal.appending`: append, halt) what a technician
and an auditor need: the full check from genesis, clear-halt from the longest
verified prefix, records, history.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from controller.core.engine import Engine
from controller.core.errors import JournalIntegrityError, JournalWriteError
from controller.journal import files as F
from controller.journal import store
from controller.journal.appending import ReadOnly
from controller.journal.halt import Halt, Resumption
from controller.journal.opening import Damage, check_head, check_present
from controller.journal.parallel import verify_segments
from controller.journal.recipe import FORMAT, GENESIS, to_ms
from controller.journal.record import Record, parse_time
from controller.journal.walk import Problem, Walk
from controller.journal.writer import JournalWriter


@dataclass
class VerifyReport:
    """The outcome of a full check from genesis (:meth:`Journal.verify`)."""

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


class Journal(JournalWriter):
    """The journal of one table. Thread-safe: every call takes one lock."""

    # halting -----------------------------------------------------------------------------
    def clear_halt(self, actor: str, *, note: str = "") -> Record | None:
        """Lift ``halted`` (journaled with who); None when the journal was not halted.

        The game resumes from the longest prefix that verifies from the genesis record;
        the ``clear_halt`` record names what was set aside (records, snapshots).
        """
        with self._mutex:
            if self._halted is None:
                return None
            if self.read_only is ReadOnly.OPENED:
                raise JournalWriteError(self.path, "opened read-only")
            halt = self._halted
            self._close_files()
            self._damage = None
            try:
                self._open()
            except (Damage, sqlite3.DatabaseError, JournalIntegrityError) as exc:
                self._close_files()
                reason = exc.problem[1] if isinstance(exc, Damage) else str(exc)
                raise JournalIntegrityError(
                    None,
                    f"cannot resume: {reason}. firebet journal init moves the damaged files "
                    "aside and starts a new journal (see docs/runbook.md)",
                ) from exc
            resumption = self._resumption()
            self._last = resumption.last_known
            payload = resumption.payload(halt, note)
            written = self._write("clear_halt", actor, payload, resumption.state, snapshot=True)
            self._state = resumption.state
            self._halted = None
            self.marker.unlink(missing_ok=True)
            F.fsync_dir(self.path.parent)
            self._start_writer()
            self._head_write(written.record, bytes.fromhex(written.hash))
            return written

    def _resumption(self) -> Resumption:
        db = self._require_db()
        db.execute("BEGIN")
        try:
            walk = Walk(self._key, self._engine)
            walk.run(store.raw_rows(db), store.snapshots(db), stop_at_damage=False)
            last = store.last_row(db)
            stored = last.record if last is not None else 0
            if last is not None:
                self._last_mac = last.mac
            head = F.read_head(self.files.head, self._key)
            lost = head.record if isinstance(head, F.Head) and head.sealed else 0
            aside = tuple(n for n in store.anchors(db) if n > walk.good)
        finally:
            db.execute("ROLLBACK")
        return Resumption(walk.good, walk.state, max(stored, lost, walk.good), aside[::-1])

    # reading ---------------------------------------------------------------------------
    def attach(self) -> None:
        """Open the file to read raw records, without the key or recovery (export of any
        journal, damaged ones too)."""
        with self._mutex:
            if self._db is not None:
                return
            try:
                check_present(self.files)
                db = store.connect(self.path, read_only=True)
            except Damage as exc:
                raise JournalIntegrityError(*exc.problem) from exc
            except sqlite3.Error as exc:
                raise JournalIntegrityError(
                    None, f"{self.path.name} cannot be read: {exc}"
                ) from exc
            try:
                found = store.meta(db).get("format")
            except sqlite3.Error:
                found = None
            if found != str(FORMAT):
                db.close()
                raise JournalIntegrityError(
                    None,
                    f"{self.path.name} is not a format-{FORMAT} journal (format {found}): "
                    "firebet journal migrate moves a format-1 journal forward",
                )
            self._db = db

    def records(self, since: str | None = None) -> Iterator[Record]:
        """Every record in order (from time ``since``, ISO 8601, when given)."""
        with self._mutex:
            db = self._require_db()
            snaps = store.snapshots(db)
            rows = store.rows(db)
        cutoff = to_ms(parse_time(since).isoformat()) if since else None
        prev = GENESIS
        for row in rows:
            if cutoff is None or row.at >= cutoff:
                yield Record.from_row(row, prev, snaps.get(row.record) if row.snap else None)
            prev = row.mac

    def batch(self, after: int, limit: int) -> list[Record]:
        """At most ``limit`` records numbered above ``after``, in order (a bounded read)."""
        with self._mutex:
            db = self._require_db()
            rows = db.execute(
                f"SELECT {store.COLUMNS} FROM records WHERE record > ? ORDER BY record LIMIT ?",
                (after, limit),
            ).fetchall()
            if not rows:
                return []
            before = store.before(db, rows[0][0])
            snaps = store.snapshots(db, after=after) if any(r[5] for r in rows) else {}
        out, prev = [], before.mac if before is not None else GENESIS
        for raw in rows:
            row = store.Row(*raw)
            out.append(Record.from_row(row, prev, snaps.get(row.record) if row.snap else None))
            prev = row.mac
        return out

    def request_tags(self, last: int) -> list[tuple[int, str]]:
        """``(record, tag)`` of the control-socket requests among the newest ``last``
        records (a command's ``request``): what a service started again must not apply
        twice when the request comes again (a bounded read, flat in the journal's length)."""
        with self._mutex:
            db = self._require_db()
            top = store.last_row(db)
            if top is None:
                return []
            rows = db.execute(
                "SELECT record, body FROM records WHERE record > ? AND kind = 'command' "
                "AND instr(body, '\"request\":') > 0 ORDER BY record",
                (top.record - last,),
            ).fetchall()
        out = []
        for number, body in rows:
            try:
                tag = json.loads(body).get("request")
            except (ValueError, AttributeError):
                continue  # the walk names a damaged record; here it only is not a retry
            if isinstance(tag, str) and tag:
                out.append((number, tag))
        return out

    def anchor_before(self, number: int) -> tuple[int, str] | None:
        """The newest snapshot at a record before ``number``: ``(record, state text)``, the
        state after that record; None when there is none (fold from genesis)."""
        with self._mutex:
            db = self._require_db()
            for anchor in store.anchors(db, before=number):
                text = store.snapshot(db, anchor)
                if text is not None:
                    return anchor, text
            return None

    def rules_before(self, number: int) -> Record | None:
        """The newest ``rules`` record before record ``number`` (the rules a start journaled)."""
        with self._mutex:
            db = self._require_db()
            found = db.execute(
                f"SELECT {store.COLUMNS} FROM records WHERE kind = 'rules' AND record < ? "
                "ORDER BY record DESC LIMIT 1",
                (number,),
            ).fetchone()
            if found is None:
                return None
            row = store.Row(*found)
            before = store.before(db, row.record)
        return Record.from_row(row, before.mac if before is not None else GENESIS)

    def last(self) -> Record | None:
        """The newest record (None in an empty file)."""
        with self._mutex:
            db = self._require_db()
            row = store.last_row(db)
            if row is None:
                return None
            before = store.before(db, row.record)
        return Record.from_row(row, before.mac if before is not None else GENESIS)

    def verify(self, engine: Engine | None = None, *, processes: int = 1) -> VerifyReport:
        """Check the whole journal from genesis: files, seals, snapshots, rules, head.

        ``processes`` > 1 checks the segments between snapshots on that many cores
        (:mod:`controller.journal.parallel`); any damage is then walked again on one
        core for the exact report."""
        report = VerifyReport(halted=self._halted)
        engine = engine or self._engine
        with self._mutex:
            if self._db is None:
                report.problems.append(self._damage or (None, "the journal is not open"))
                return report
            db = self._db
            walk = Walk(self._key, engine)
            try:
                db.execute("BEGIN")
                last = store.last_row(db)
                split = None
                if processes > 1 and last is not None and self._damage is None:
                    anchors = sorted(store.anchors(db))
                    split = verify_segments(
                        self.path, self._key, engine.rules, anchors, last.record, processes
                    )
                if split is None:
                    walk.run(store.raw_rows(db), store.snapshots(db), stop_at_damage=False)
                else:
                    walk.records, walk.snapshots = split
                    walk.prev = last.mac if last is not None else GENESIS
                db.execute("ROLLBACK")
                if last is None:
                    walk.problems.append((None, f"{self.path.name} holds no records (emptied)"))
                else:  # after the walk's view: the head may be newer, never older
                    head = check_head(self.files, self._key, db, last, self._wal_found)
                    if isinstance(head, tuple):
                        walk.problems.append(head)
            except sqlite3.DatabaseError as exc:
                walk.problems.append((None, f"{self.path.name} cannot be read: {exc}"))
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        if self._damage is not None and self._damage not in walk.problems:
            walk.problems.insert(0, self._damage)
        report.records, report.snapshots = walk.records, walk.snapshots
        report.last_hash = walk.prev.hex()
        report.problems, report.acknowledged = walk.problems, walk.acknowledged
        return report

    def history(self, hands: int) -> list[dict[str, Any]]:
        """The last ``hands`` hands (the one in play last), as ``history --json`` prints them."""
        from controller.journal.history import history

        with self._mutex:
            return history(self._require_db(), self._engine, hands)
