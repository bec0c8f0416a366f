"""The floor's store: every table's records once each, its alerts, hands and checks.

One interface, :class:`Store`, with two engines behind it: :class:`SqliteStore`
(the embedded default, one file in the state directory) and
:class:`controller.floor.pgstore.PostgresStore` (``[store] url = "postgresql://..."``,
shared by two or more floor services, SPEC section 9). :func:`open_store` picks one.

One writer a service (its ingest thread) and any number of readers (the console).
A batch of messages is one transaction, committed durably before the broker is
told the messages arrived, so a floor restart loses nothing. Every write is
idempotent, so two services writing the same broker messages keep each
(table, record) once and each alert once (:meth:`Store.add_record`,
:meth:`Store.raise_alert` with its ``key``, :meth:`Store.claim_confirm`).

Tables
    ``records``   (table_id, record) once each, with the chain hash and the events the
                  table's engine decided, as received (the JSON and the digests packed
                  small: :mod:`controller.floor.packing`);
    ``tables``    one row per table: presence, last status, the audit checkpoint, the
                  bad messages counted and whether it is quarantined;
    ``hands``     the hand logs the audit sorted the records into;
    ``settled``   each settled hand's figures, by the time of the record that settled it
                  (:func:`controller.floor.figures.settled_hand`; the shift figures);
    ``alerts``    surveillance, integrity, audit and offline alerts and what became of them,
                  each with the key that makes it once (``akey``; NULL: no such key).
"""

from __future__ import annotations

import abc
import contextlib
import gzip
import itertools
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from controller.core.times import iso, to_ms
from controller.floor.figures import SettledHand, settled_hand
from controller.floor.packing import pack_digest, pack_text, unpack_digest, unpack_text
from controller.floor.vocabulary import OPEN_STATUSES, AlertKind, AlertStatus
from controller.wire.messages import FloorRecord

if TYPE_CHECKING:
    from controller.floor.settings import FloorSettings

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    table_id TEXT NOT NULL,
    record INTEGER NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    payload TEXT NOT NULL,
    chain TEXT NOT NULL,
    received TEXT NOT NULL,
    events TEXT,
    snapshot TEXT,
    PRIMARY KEY (table_id, record)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tables (
    table_id TEXT PRIMARY KEY,
    online INTEGER,
    online_at TEXT,
    program TEXT,
    announced INTEGER,
    state TEXT,
    state_at TEXT,
    contiguous INTEGER NOT NULL DEFAULT 0,
    audit TEXT,
    bad INTEGER NOT NULL DEFAULT 0,
    last_bad TEXT,
    quarantined TEXT
);
CREATE TABLE IF NOT EXISTS hands (
    table_id TEXT NOT NULL,
    hand INTEGER NOT NULL,
    log TEXT NOT NULL,
    PRIMARY KEY (table_id, hand)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS settled (
    table_id TEXT NOT NULL,
    hand INTEGER NOT NULL,
    record INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    unique_points INTEGER NOT NULL,
    wagered INTEGER NOT NULL,
    won INTEGER NOT NULL,
    paid INTEGER NOT NULL,
    PRIMARY KEY (table_id, hand)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS settled_at ON settled (at_ms);
CREATE INDEX IF NOT EXISTS records_rules ON records (table_id, record) WHERE kind = 'rules';
CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    hand INTEGER,
    record INTEGER,
    raised_at TEXT NOT NULL,
    detail TEXT NOT NULL,
    status TEXT NOT NULL,
    status_at TEXT,
    status_by TEXT,
    command_id TEXT,
    akey TEXT
);
CREATE INDEX IF NOT EXISTS alerts_open ON alerts (status, table_id);
"""
ALERT_KEYS = "CREATE UNIQUE INDEX IF NOT EXISTS alerts_once ON alerts (table_id, kind, akey)"

OPEN: tuple[str, ...] = tuple(OPEN_STATUSES)  # the statuses of an alert that needs a person
_MARKS = ", ".join("?" * len(OPEN))
OPEN_KEY = "open"  # the key of an alert kind a table has one of at a time (offline, quarantine)
EXPIRE_CHUNK = 5000  # rows archived and deleted a transaction (the writer is not held long)
INSERT_ROWS = 200  # records a statement when a batch is stored (:meth:`Store.add_records`)
RECORD_COLUMNS = "table_id, record, at, kind, actor, payload, chain, received, events, snapshot"
RESEND_AFTER_S = 30.0  # a confirm sent and not journaled this long may be sent again


@dataclass(frozen=True)
class Alert:
    """One alert as stored."""

    id: int
    table: str
    kind: AlertKind
    hand: int | None
    record: int | None
    raised_at: str
    detail: dict[str, Any]
    status: AlertStatus
    status_at: str | None
    status_by: str | None
    command_id: str | None


@dataclass(frozen=True)
class AlertGroup:
    """The open alerts of one kind at one table: the newest, and how many there are."""

    newest: Alert
    count: int
    first_record: int | None
    last_record: int | None
    whats: dict[str, int]  # for more than one: how many of each ``detail.what``


_ALERT_COLUMNS = (
    "id, table_id, kind, hand, record, raised_at, detail, status, status_at, status_by, command_id"
)


def _alert(row: Sequence[Any]) -> Alert:
    return Alert(
        row[0], row[1], AlertKind(row[2]), row[3], row[4], row[5], json.loads(row[6]),
        AlertStatus(row[7]), *row[8:11],
    )  # fmt: skip


@dataclass
class TableRow:
    """What the floor keeps about one table between restarts."""

    table: str
    online: bool | None = None
    online_at: str | None = None
    program: str | None = None
    announced: int | None = None
    state: dict[str, Any] | None = None
    state_at: str | None = None
    contiguous: int = 0
    audit: dict[str, Any] | None = None
    bad: int = 0  # messages counted bad (not stored), ever
    last_bad: str | None = None  # the newest one's reason
    quarantined: str | None = None  # why the table is quarantined (None: it is not)


class Rows(Protocol):
    """What a query gives back, from either engine (a DB-API cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


Notice = Callable[[set[str]], object]
"""Told the tables whose alerts another floor service changed (an empty set: any table)."""


class Store(abc.ABC):
    """The floor's store; the writer methods belong to one thread (the ingest's).

    The SQL below is written once, with ``?`` marks; an engine runs it on its
    writer (:meth:`_w`) or on the calling thread's reader (:meth:`_r`)."""

    trouble: tuple[type[Exception], ...] = ()
    """The engine's own failures (a full disk, a lost server): the messages of a batch
    that hit one are kept and tried again, not counted bad."""
    aborts: tuple[type[Exception], ...] = ()
    """The failures that undo the whole batch (its messages are then taken one at a time,
    :meth:`controller.floor.server.FloorService._alone`): the store's trouble, and with
    an engine whose savepoints cost a round trip each (PostgreSQL) any of its errors."""
    shared = False
    """Whether other floor services may write the same store at the same time."""
    what_sql = "json_extract(detail, '$.what')"
    """The engine's SQL for an alert's ``detail.what``."""

    def _stamp(self, at: str) -> Any:
        """The floor's own time ``at`` (ISO) as the engine keeps ``records.received``."""
        return at

    def _unstamp(self, value: Any) -> str:
        """``records.received`` as ISO again."""
        return str(value)

    @abc.abstractmethod
    def _w(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        """Run ``sql`` on the writer's connection."""

    @abc.abstractmethod
    def _r(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        """Run ``sql`` on the calling thread's read-only connection."""

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One durable transaction (the writer's)."""

    def pipeline(self) -> contextlib.AbstractContextManager[Any]:
        """Statements sent without waiting for each one's answer, until one is read (a
        batch's writes in few round trips); nothing for an engine in the process."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def savepoint(self) -> contextlib.AbstractContextManager[None]:
        """A part of the open transaction that is undone alone when it fails."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close every connection this store opened."""

    def describe(self) -> str:
        """Where the store is, for the log (never a password)."""
        return type(self).__name__

    def announce(self, tables: Iterable[str]) -> None:
        """Tell the other floor services sharing this store that the alerts of ``tables``
        changed (after the change is committed); nothing for a store no one shares."""
        return

    def hear(self, notice: Notice) -> None:
        """Call ``notice(tables)`` when another floor service announces a change; nothing
        for a store no one shares."""
        return

    # records -------------------------------------------------------------------------
    def chain(self, table: str, record: int) -> str | None:
        """The chain hash stored for (table, record), None when not stored."""
        row = self._w(
            "SELECT chain FROM records WHERE table_id = ? AND record = ?", (table, record)
        ).fetchone()
        return None if row is None else unpack_digest(row[0])

    def _record_row(self, rec: FloorRecord, received: str) -> tuple[Any, ...]:
        """A record's row as stored: its JSON and digests packed (:mod:`.packing`)."""
        return (
            rec.table, rec.record, rec.at, rec.kind, rec.actor,
            pack_text(json.dumps(rec.payload, sort_keys=True, separators=(",", ":"))),
            pack_digest(rec.chain), self._stamp(received),
            None if rec.events is None
            else pack_text(json.dumps(rec.events, separators=(",", ":"))),
            None if rec.snapshot is None else pack_digest(rec.snapshot),
        )  # fmt: skip

    def add_record(self, rec: FloorRecord, received: str) -> bool:
        """Store a record; False when (table, record) was stored already (by another floor
        service sharing the store: :meth:`chain` tells whether it is the same record)."""
        return bool(self.add_records([rec], received))

    def add_records(self, recs: Sequence[FloorRecord], received: str) -> set[tuple[str, int]]:
        """Store records, :data:`INSERT_ROWS` a statement (one round trip, not one a
        record); the (table, record) pairs stored, the others being stored already (by
        another floor service sharing the store). ``recs`` name each pair once."""
        stored: set[tuple[str, int]] = set()
        for start in range(0, len(recs), INSERT_ROWS):
            part = recs[start : start + INSERT_ROWS]
            marks = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(part))
            rows = self._w(
                f"INSERT INTO records ({RECORD_COLUMNS}) VALUES {marks} "
                "ON CONFLICT (table_id, record) DO NOTHING RETURNING table_id, record",
                [v for rec in part for v in self._record_row(rec, received)],
            ).fetchall()
            stored.update((str(r[0]), int(r[1])) for r in rows)
        return stored

    def stored_above(self, table: str, record: int) -> list[int]:
        """The numbers stored for ``table`` above ``record`` (the far side of a gap)."""
        rows = self._w(
            "SELECT record FROM records WHERE table_id = ? AND record > ? ORDER BY record",
            (table, record),
        )
        return [int(r[0]) for r in rows]

    def records(
        self, table: str, first: int, last: int, *, reader: bool = False
    ) -> list[FloorRecord]:
        """The stored records ``first..last`` of ``table``, in order (``reader``: on the
        calling thread's read-only connection, for a fold apart from the ingest thread)."""
        rows = (self._r if reader else self._w)(
            "SELECT record, at, kind, actor, payload, chain, events, snapshot FROM records "
            "WHERE table_id = ? AND record BETWEEN ? AND ? ORDER BY record",
            (table, first, last),
        )
        return [
            FloorRecord(table, int(r[0]), r[1], r[2], r[3], json.loads(unpack_text(r[4])),
                        unpack_digest(r[5]),
                        None if r[6] is None else json.loads(unpack_text(r[6])),
                        None if r[7] is None else unpack_digest(r[7]))
            for r in rows
        ]  # fmt: skip

    # tables --------------------------------------------------------------------------
    def table_rows(self) -> dict[str, TableRow]:
        """Every table the floor has heard of."""
        rows = self._w(
            "SELECT table_id, online, online_at, program, announced, state, state_at, "
            "contiguous, audit, bad, last_bad, quarantined FROM tables"
        )
        out: dict[str, TableRow] = {}
        for r in rows:
            out[r[0]] = TableRow(
                r[0],
                None if r[1] is None else bool(r[1]),
                r[2],
                r[3],
                r[4],
                json.loads(r[5]) if r[5] else None,
                r[6],
                int(r[7]),
                json.loads(r[8]) if r[8] else None,
                int(r[9] or 0),
                r[10],
                r[11],
            )
        return out

    def save_table(self, row: TableRow) -> None:
        """Write what the floor keeps about one table."""
        self._w(
            "INSERT INTO tables (table_id, online, online_at, program, announced, state, "
            "state_at, contiguous, audit, bad, last_bad, quarantined) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (table_id) DO UPDATE SET online = excluded.online, "
            "online_at = excluded.online_at, program = excluded.program, "
            "announced = excluded.announced, state = excluded.state, "
            "state_at = excluded.state_at, contiguous = excluded.contiguous, "
            "audit = excluded.audit, bad = excluded.bad, last_bad = excluded.last_bad, "
            "quarantined = excluded.quarantined",
            (
                row.table,
                None if row.online is None else int(row.online),
                row.online_at,
                row.program,
                row.announced,
                json.dumps(row.state) if row.state is not None else None,
                row.state_at,
                row.contiguous,
                json.dumps(row.audit, separators=(",", ":")) if row.audit is not None else None,
                row.bad,
                row.last_bad,
                row.quarantined,
            ),
        )

    # hands ---------------------------------------------------------------------------
    def save_hand(self, table: str, log: dict[str, Any]) -> None:
        """Keep a hand log, and its figures once it is settled."""
        self._w(
            "INSERT INTO hands (table_id, hand, log) VALUES (?, ?, ?) "
            "ON CONFLICT (table_id, hand) DO UPDATE SET log = excluded.log",
            (table, log["hand"], pack_text(json.dumps(log, separators=(",", ":")))),
        )
        self._settle(table, log)

    def _settle(self, table: str, log: dict[str, Any]) -> None:
        """The hand's row of figures: kept while it is settled, gone when it is not (a void
        of the seven-out, a clear-halt that set its settlement aside)."""
        figures = None
        record = log.get("settled_record")
        if isinstance(record, int):
            row = self._w(
                "SELECT at FROM records WHERE table_id = ? AND record = ?", (table, record)
            ).fetchone()
            at = to_ms(row[0]) if row else None
            figures = settled_hand(table, log, at) if at is not None else None
        if figures is None:
            self._w("DELETE FROM settled WHERE table_id = ? AND hand = ?", (table, log["hand"]))
            return
        self._w(
            "INSERT INTO settled (table_id, hand, record, at_ms, unique_points, "
            "wagered, won, paid) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (table_id, hand) DO UPDATE SET record = excluded.record, "
            "at_ms = excluded.at_ms, unique_points = excluded.unique_points, "
            "wagered = excluded.wagered, won = excluded.won, paid = excluded.paid",
            (table, figures.hand, figures.record, figures.at_ms, figures.unique_points,
             figures.wagered, figures.won, figures.paid),
        )  # fmt: skip

    def drop_hand(self, table: str, hand: int) -> None:
        self._w("DELETE FROM hands WHERE table_id = ? AND hand = ?", (table, hand))
        self._w("DELETE FROM settled WHERE table_id = ? AND hand = ?", (table, hand))

    def settled_between(
        self, start_ms: int, end_ms: int, table: str | None = None
    ) -> Iterator[SettledHand]:
        """The figures of the hands settled in [start_ms, end_ms), by table and time
        (reader side; a cursor, not a list: a busy floor's day is many hands)."""
        sql = (
            "SELECT table_id, hand, record, at_ms, unique_points, wagered, won, paid "
            "FROM settled WHERE at_ms >= ? AND at_ms < ?"
        )
        args: list[Any] = [start_ms, end_ms]
        if table is not None:
            sql += " AND table_id = ?"
            args.append(table)
        for row in self._r(sql + " ORDER BY table_id, at_ms", args):
            yield SettledHand(*row)

    def raised_between(
        self, kind: AlertKind, start_ms: int, end_ms: int, table: str | None = None
    ) -> list[int]:
        """When each alert of ``kind`` (of ``table``) raised in [start_ms, end_ms) was
        raised, in ms (reader side; an alert's time is the table's record's, compared
        as a time, whatever zone it was written in)."""
        day = 86_400_000  # the text compared is ISO in any zone: a day either side
        sql = "SELECT raised_at FROM alerts WHERE kind = ? AND raised_at >= ? AND raised_at < ?"
        args: list[Any] = [str(kind), iso(start_ms - day), iso(end_ms + day)]
        if table is not None:
            sql += " AND table_id = ?"
            args.append(table)
        times = (to_ms(str(r[0])) for r in self._r(sql, args))
        return [t for t in times if t is not None and start_ms <= t < end_ms]

    def rules_records(self, table: str) -> list[tuple[int, str]]:
        """A table's ``rules`` records (number, payload), in order (reader side)."""
        rows = self._r(
            "SELECT record, payload FROM records WHERE table_id = ? AND kind = 'rules' "
            "ORDER BY record",
            (table,),
        )
        return [(int(r[0]), unpack_text(r[1])) for r in rows]

    def table_names(self) -> list[str]:
        """Every table the floor has heard of, sorted (reader side)."""
        return [r[0] for r in self._r("SELECT table_id FROM tables ORDER BY 1")]

    def recent_hands(self, table: str, count: int) -> list[dict[str, Any]]:
        """The last ``count`` hands of ``table``, newest first (reader side)."""
        rows = self._r(
            "SELECT log FROM hands WHERE table_id = ? ORDER BY hand DESC LIMIT ?", (table, count)
        )
        return [json.loads(unpack_text(r[0])) for r in rows]

    def hand(self, table: str, hand: int) -> dict[str, Any] | None:
        """One hand log of ``table`` (reader side)."""
        row = self._r(
            "SELECT log FROM hands WHERE table_id = ? AND hand = ?", (table, hand)
        ).fetchone()
        return json.loads(unpack_text(row[0])) if row else None

    # alerts --------------------------------------------------------------------------
    def raise_alert(
        self,
        table: str,
        kind: str,
        raised_at: str,
        detail: dict[str, Any],
        *,
        hand: int | None = None,
        record: int | None = None,
        key: str | None = None,
    ) -> int | None:
        """A new open alert; its id. With a ``key``, once: None when an alert of ``kind``
        at ``table`` with that key is stored already (raised by another floor service)."""
        row = self._w(
            "INSERT INTO alerts (table_id, kind, hand, record, raised_at, detail, status, akey) "
            "VALUES (?, ?, ?, ?, ?, ?, 'open', ?) "
            "ON CONFLICT (table_id, kind, akey) DO NOTHING RETURNING id",
            (table, kind, hand, record, raised_at, json.dumps(detail, sort_keys=True), key),
        ).fetchone()
        return None if row is None else int(row[0])

    def find_alert(
        self, table: str, kind: str, *, hand: int | None = None, record: int | None = None,
        open_only: bool = False,
    ) -> Alert | None:  # fmt: skip
        """The newest alert of ``kind`` for ``table`` (and ``hand`` / ``record`` when given)."""
        sql = f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE table_id = ? AND kind = ?"
        args: list[Any] = [table, kind]
        if hand is not None:
            sql += " AND hand = ?"
            args.append(hand)
        if record is not None:
            sql += " AND record = ?"
            args.append(record)
        if open_only:
            sql += f" AND status IN ({', '.join('?' * len(OPEN))})"
            args += OPEN
        row = self._w(sql + " ORDER BY id DESC LIMIT 1", args).fetchone()
        return _alert(row) if row else None

    def set_alert(
        self, alert_id: int, status: str, at: str, by: str | None, *,
        command_id: str | None = None, detail: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        """Move an alert on (sent, refused, confirmed, cleared, resolved); one that no
        longer needs a person frees its :data:`OPEN_KEY` for the next such alert."""
        self._w(
            "UPDATE alerts SET status = ?, status_at = ?, status_by = ?, "
            "command_id = COALESCE(?, command_id), detail = COALESCE(?, detail), "
            "akey = CASE WHEN ? AND akey = ? THEN NULL ELSE akey END WHERE id = ?",
            (status, at, by, command_id,
             json.dumps(detail, sort_keys=True) if detail is not None else None,
             status not in OPEN, OPEN_KEY, alert_id),
        )  # fmt: skip

    def claim_confirm(
        self, alert_id: int, at: str, by: str, command_id: str, *, stale_before: str
    ) -> bool:
        """Mark a surveillance alert ``sent`` by ``by`` unless it is confirmed, or another
        console sent its confirm after ``stale_before`` (an ISO time): whether this console
        is the one to send it (in a transaction of its own, so that of two consoles
        clicking at once, one sends)."""
        with self.transaction():
            cur = self._w(
                "UPDATE alerts SET status = 'sent', status_at = ?, status_by = ?, "
                "command_id = ? WHERE id = ? AND kind = 'surveillance' AND (status IN "
                "('open', 'refused') OR (status = 'sent' AND status_at < ?))",
                (at, by, command_id, alert_id, stale_before),
            )
            return cur.rowcount == 1

    def alert(self, alert_id: int) -> Alert | None:
        """One alert by id (writer side)."""
        row = self._w(f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE id = ?", (alert_id,)).fetchone()
        return _alert(row) if row else None

    def alerts(self, *, open_only: bool = True, limit: int = 200) -> list[Alert]:
        """Alerts, oldest open first (or the newest of every status; reader side)."""
        if open_only:
            rows = self._r(
                f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE status IN "
                f"({', '.join('?' * len(OPEN))}) ORDER BY id LIMIT ?",
                (*OPEN, limit),
            )
        else:
            rows = self._r(
                f"SELECT {_ALERT_COLUMNS} FROM alerts ORDER BY id DESC LIMIT ?", (limit,)
            )
        return [_alert(r) for r in rows]

    def open_surveillance(
        self, *, limit: int = 1000, offset: int = 0, table: str | None = None
    ) -> list[Alert]:
        """One page of the open surveillance alerts (of ``table``), newest first (reader
        side)."""
        sql = f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE kind = ? AND status IN ({_MARKS})"
        args: list[Any] = [str(AlertKind.SURVEILLANCE), *OPEN]
        if table is not None:
            sql += " AND table_id = ?"
            args.append(table)
        rows = self._r(sql + " ORDER BY id DESC LIMIT ? OFFSET ?", (*args, limit, offset))
        return [_alert(r) for r in rows]

    def confirmed_at(self, table: str, hands: Iterable[int]) -> dict[int, str]:
        """When each of ``hands`` of ``table`` was confirmed (the time of the table's
        record of it; the floor's, for an alert confirmed before it kept that): the
        confirmed ones of at most 500 hands (reader side)."""
        wanted = sorted(set(hands))[:500]
        if not wanted:
            return {}
        rows = self._r(
            f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE table_id = ? AND kind = ? "
            f"AND status = ? AND hand IN ({', '.join('?' * len(wanted))}) ORDER BY id",
            (table, str(AlertKind.SURVEILLANCE), str(AlertStatus.CONFIRMED), *wanted),
        )
        out: dict[int, str] = {}
        for row in rows:
            alert = _alert(row)
            if alert.hand is not None:
                out[alert.hand] = str(alert.detail.get("confirmed_at") or alert.status_at or "")
        return out

    def open_surveillance_of(self, table: str, hands: Iterable[int]) -> bool:
        """Whether any of ``hands`` of ``table`` has an open surveillance alert (reader)."""
        wanted = sorted(set(hands))[:500]
        if not wanted:
            return False
        row = self._r(
            f"SELECT 1 FROM alerts WHERE table_id = ? AND kind = ? AND status IN ({_MARKS}) "
            f"AND hand IN ({', '.join('?' * len(wanted))}) LIMIT 1",
            (table, str(AlertKind.SURVEILLANCE), *OPEN, *wanted),
        ).fetchone()
        return row is not None

    def count_open(self, table: str, kind: AlertKind) -> int:
        """Open alerts of ``kind`` at ``table`` (writer side, in its transaction)."""
        row = self._w(
            f"SELECT COUNT(*) FROM alerts WHERE table_id = ? AND kind = ? AND status IN ({_MARKS})",
            (table, str(kind), *OPEN),
        ).fetchone()
        return int(row[0])

    def open_counts(self, *, table: str | None = None) -> dict[AlertKind, int]:
        """How many alerts of each kind are open (at ``table``): every one counted (reader
        side)."""
        sql = f"SELECT kind, COUNT(*) FROM alerts WHERE status IN ({_MARKS})"
        args: list[Any] = [*OPEN]
        if table is not None:
            sql += " AND table_id = ?"
            args.append(table)
        rows = self._r(sql + " GROUP BY kind", args)
        return {AlertKind(kind): int(n) for kind, n in rows}

    def open_groups(self) -> list[AlertGroup]:
        """The other open alerts, one group per table and kind: its newest alert, how many,
        the records they span and how many of each ``what`` (reader side)."""
        marks = ", ".join("?" * len(OPEN))
        rows = self._r(
            f"SELECT MAX(id), COUNT(*), MIN(record), MAX(record) FROM alerts "
            f"WHERE kind != 'surveillance' AND status IN ({marks}) GROUP BY table_id, kind",
            OPEN,
        ).fetchall()
        out: list[AlertGroup] = []
        for newest, count, first, last in rows:
            found = self._r(
                f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE id = ?", (int(newest),)
            ).fetchone()
            if found is None:
                continue
            alert = _alert(found)
            whats: dict[str, int] = {}
            if count > 1:
                for what, n in self._r(
                    f"SELECT {self.what_sql}, COUNT(*) FROM alerts "
                    f"WHERE table_id = ? AND kind = ? AND status IN ({marks}) GROUP BY 1",
                    (alert.table, alert.kind, *OPEN),
                ):
                    whats[str(what)] = int(n)
            out.append(AlertGroup(alert, int(count), first, last, whats))
        return out

    def open_ids(self, table: str, kind: str, *, upto: int) -> list[int]:
        """The open alerts of ``kind`` at ``table`` up to id ``upto`` (a flood, cleared whole)."""
        rows = self._w(
            f"SELECT id FROM alerts WHERE table_id = ? AND kind = ? AND id <= ? AND status IN "
            f"({', '.join('?' * len(OPEN))}) ORDER BY id",
            (table, kind, upto, *OPEN),
        )
        return [int(r[0]) for r in rows]

    def table_alerts(self, table: str, hand: int) -> tuple[dict[str, int], Alert | None]:
        """A table's open alerts counted by kind, and the newest surveillance alert of
        ``hand`` (reader side: the console's tile)."""
        counts: dict[str, int] = {}
        marks = ", ".join("?" * len(OPEN))
        for kind, n in self._r(
            f"SELECT kind, COUNT(*) FROM alerts WHERE table_id = ? AND status IN ({marks}) "
            "GROUP BY kind",
            (table, *OPEN),
        ):
            counts[str(kind)] = int(n)
        row = self._r(
            f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE table_id = ? AND kind = 'surveillance' "
            "AND hand = ? ORDER BY id DESC LIMIT 1",
            (table, hand),
        ).fetchone()
        return counts, (_alert(row) if row else None)

    def counts(self) -> dict[str, int]:
        """Records stored, distinct (table, record) pairs and tables: for the benchmark."""
        rows, distinct, tables = self._r(
            "SELECT COUNT(*), COUNT(DISTINCT table_id || '/' || record), COUNT(DISTINCT table_id) "
            "FROM records"
        ).fetchone()
        return {"records": int(rows), "distinct": int(distinct), "tables": int(tables)}

    # retention ------------------------------------------------------------------------
    def expire(
        self, before_ms: int, archive: Path, *, chunk: int = EXPIRE_CHUNK, rounds: int = 0
    ) -> dict[str, int]:
        """Archive, then delete, what is older than ``before_ms``: records by the table's
        time, settled hands (their logs and figures) by the record that settled them, and
        closed alerts by when they were raised; open alerts and unsettled hands stay.
        Each part is written to ``archive`` (JSON lines, gzip, fsynced) before the
        transaction that deletes it, at most ``chunk`` rows a transaction (and ``rounds``
        transactions of each part, when not 0: the caller comes back for the rest); how
        many rows of each were archived and deleted."""
        before = iso(before_ms)
        done = {"records": 0, "hands": 0, "alerts": 0}
        marks = ", ".join("?" * len(OPEN))
        parts = (
            ("records",
             f"SELECT {RECORD_COLUMNS} FROM records WHERE at < ? ORDER BY table_id, record "
             "LIMIT ?",
             "DELETE FROM records WHERE table_id = ? AND record = ?", (before,)),
            ("hands",
             "SELECT s.table_id, s.hand, s.at_ms, h.log FROM settled s LEFT JOIN hands h "
             "ON h.table_id = s.table_id AND h.hand = s.hand WHERE s.at_ms < ? "
             "ORDER BY s.table_id, s.hand LIMIT ?",
             "", (before_ms,)),
            ("alerts",
             f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE raised_at < ? AND status NOT IN "
             f"({marks}) ORDER BY id LIMIT ?",
             "DELETE FROM alerts WHERE id = ?", (before, *OPEN)),
        )  # fmt: skip
        columns = {
            "records": ("table", "record", "at", "kind", "actor", "payload", "chain",
                        "received", "events", "snapshot"),
            "hands": ("table", "hand", "at_ms", "log"),
            "alerts": ("id", "table", "kind", "hand", "record", "raised_at", "detail",
                       "status", "status_at", "status_by", "command_id"),
        }  # fmt: skip
        with contextlib.ExitStack() as stack:
            out: IO[str] | None = None  # opened with the first row to archive, not before
            for name, select, delete, args in parts:
                for _ in itertools.count() if not rounds else range(rounds):
                    rows = self._w(select, (*args, chunk)).fetchall()
                    if not rows:
                        break
                    if out is None:
                        archive.parent.mkdir(parents=True, exist_ok=True)
                        out = stack.enter_context(gzip.open(archive, "at", encoding="utf-8"))
                    for row in rows:
                        out.write(json.dumps({"part": name, **dict(zip(columns[name],
                                                                       self._archived(name, row),
                                                                       strict=True))},
                                             separators=(",", ":")) + "\n")  # fmt: skip
                    out.flush()
                    os.fsync(out.fileno())  # archived on disk before it is deleted
                    with self.transaction():
                        for row in rows:
                            if name == "hands":
                                self.drop_hand(row[0], row[1])
                            else:
                                self._w(delete, (row[0],) if name == "alerts" else row[:2])
                    done[name] += len(rows)
        return done

    def _archived(self, part: str, row: Sequence[Any]) -> list[Any]:
        """A row as the archive keeps it: its JSON and digests as text, its times ISO."""
        out = list(row)
        if part == "records":  # table, record, at, kind, actor, payload, chain, received, ...
            out[5], out[6] = unpack_text(out[5]), unpack_digest(out[6])
            out[7] = self._unstamp(out[7])
            out[8] = None if out[8] is None else unpack_text(out[8])
            out[9] = None if out[9] is None else unpack_digest(out[9])
        elif part == "hands" and out[3] is not None:
            out[3] = unpack_text(out[3])
        return out


class SqliteStore(Store):
    """The floor's store in one SQLite file (the embedded default), in WAL mode, committed
    durably (``synchronous=FULL``); one writer connection and one reader a thread."""

    trouble = (sqlite3.OperationalError,)
    aborts = trouble

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = self._connect()
        had_figures = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'settled'"
        ).fetchone()
        self._db.executescript(SCHEMA)
        for table, column, kind in (
            ("records", "events", "TEXT"),  # a floor.db from before the tables sent events
            ("records", "snapshot", "TEXT"),  # ... and the digests of their snapshots
            ("tables", "bad", "INTEGER NOT NULL DEFAULT 0"),  # ... before bad messages
            ("tables", "last_bad", "TEXT"),
            ("tables", "quarantined", "TEXT"),
            ("alerts", "akey", "TEXT"),  # ... before alerts were keyed once
        ):
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in columns:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        self._db.execute(ALERT_KEYS)
        self._readers = threading.local()
        if not had_figures:  # a floor.db from before the shift figures: its hands' figures
            with self.transaction():
                for table, log in self._db.execute("SELECT table_id, log FROM hands").fetchall():
                    self._settle(table, json.loads(unpack_text(log)))

    def _connect(self, *, read_only: bool = False) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        if read_only:
            db.execute("PRAGMA query_only=ON")
        return db

    def describe(self) -> str:
        return f"SQLite {self.path}"

    def close(self) -> None:
        self._db.close()

    def _w(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        return self._db.execute(sql, args)

    def _r(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        return self.reader().execute(sql, args)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        self._db.execute("SAVEPOINT one")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK TO one")
            self._db.execute("RELEASE one")
            raise
        self._db.execute("RELEASE one")

    def reader(self) -> sqlite3.Connection:
        """A read-only connection for the calling thread."""
        db: sqlite3.Connection | None = getattr(self._readers, "db", None)
        if db is None:
            db = self._readers.db = self._connect(read_only=True)
        return db


def open_store(settings: FloorSettings, state_dir: Path) -> Store:
    """The store ``settings`` name: PostgreSQL at ``[store] url``, else the SQLite file
    ``[floor] database`` in ``state_dir``."""
    if settings.store.url:
        from controller.floor.pgstore import PostgresStore  # psycopg only when asked for

        return PostgresStore(settings.store.url, source=settings.source)
    return SqliteStore(state_dir / settings.database)
