"""The floor's ingest: every table's messages in, each (table, record) stored once.

One thread owns this object (the floor service's writer). It takes a batch of
broker messages, stores them in one transaction and then:

* a record number already held with the same chain hash is a repeat (delivery is
  at least once) and is dropped; with a *different* chain hash it is an integrity
  alert, kept until a person clears it;
* a record above the first missing one is kept, and when the gap does not close by
  itself within ``gap_grace_s`` the table is asked to ``resend`` from the first
  missing record (again every ``resend_every_s`` while it stays open);
* every record that is now contiguous goes through the second opinion
  (:mod:`controller.floor.audit`), whose alerts, differences, confirmations and
  hands are stored in the same transaction;
* ``online`` and ``state`` keep each table's presence and status; a table that
  goes offline raises an offline alert, resolved when it comes back.

What it keeps of each table is :mod:`controller.floor.live`; what the console
shows of each table is :mod:`controller.floor.summary`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.clock import now_iso, now_ms
from controller.core.state import TableState
from controller.core.times import iso
from controller.floor.audit import ApprovedRules, Checkpoint, TableAudit
from controller.floor.findings import Discrepancy, Findings
from controller.floor.live import (
    BACKLOG_AFTER,
    CHECKPOINT_EVERY,
    CHECKPOINTS_KEPT,
    QUARANTINE_AFTER,
    QUARANTINE_WITHIN_S,
    Changes,
    TableLive,
)
from controller.floor.queue import confirm_problem
from controller.floor.store import OPEN_KEY, RESEND_AFTER_S, Alert, Store, TableRow
from controller.floor.summary import table_summary
from controller.floor.vocabulary import AlertKind, AlertStatus, Finding
from controller.journal.recipe import RecordKind
from controller.wire.messages import (
    BadMessage,
    FloorRecord,
    confirm_command,
    parse_event,
    parse_online,
    parse_state,
    resend_command,
    split_topic,
    topic,
)

log = logging.getLogger("firebet.floor")
FOLD_RUN = 1000  # records read at once when the floor folds a table again


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else text[:197] + "..."


Send = Callable[[str, bytes], None]


@dataclass(frozen=True)
class Message:
    """One message from the broker, as the MQTT thread hands it over."""

    topic: str
    payload: bytes
    mid: int = 0
    qos: int = 0
    retain: bool = False


class Ingest:
    """Every table's messages, stored once, checked, and turned into alerts."""

    def __init__(
        self,
        store: Store,
        prefix: str,
        send: Send,
        *,
        clock: Callable[[], float] = time.monotonic,
        gap_grace_s: float = 1.0,
        resend_every_s: float = 5.0,
        health_after_s: float = 30.0,
        approved: Mapping[str, ApprovedRules] | None = None,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.send = send
        self.clock = clock
        self.gap_grace_s = gap_grace_s
        self.resend_every_s = resend_every_s
        self.health_after_s = health_after_s
        self.approved = dict(approved or {})
        self.health: dict[str, Any] = {"behind": [], "quarantined": []}  # replaced whole
        self.tables: dict[str, TableLive] = {}
        self._pending = Changes()
        self.summaries: dict[str, dict[str, Any]] = {}  # replaced whole, read by the console
        self.bad_topics = 0
        self.ingested = 0
        self._folder: FoldApart | None = None  # started at the first fold apart
        for row in store.table_rows().values():
            audit = TableAudit.from_dict(row.audit) if row.audit else TableAudit()
            live = TableLive(row, audit)
            live.checkpoints[audit.record] = audit.checkpoint()
            self._arm(live)
            live.above = set(store.stored_above(row.table, row.contiguous))
            live.highest = max(live.above, default=row.contiguous)
            self.tables[row.table] = live
        for table in self.tables:
            self.summaries[table] = table_summary(self.store, self.tables[table])

    # messages ------------------------------------------------------------------------
    def handle(self, batch: Iterable[Message]) -> Changes:
        """Store a batch of messages in one transaction; what changed.

        Each message is judged on its own: one that cannot be taken (not the shape of
        SPEC section 9, or one the store refuses) is undone alone and counted bad with
        its reason (:meth:`count_bad`); the others of the batch are stored."""
        changes = Changes()
        touched: set[str] = set()
        received = now_iso()
        batch = list(batch)
        with self.store.pipeline(), self.store.transaction():
            parsed = self._store_events(batch, received)
            for n, message in enumerate(batch):
                where = split_topic(self.prefix, message.topic)
                if where is None:
                    self.bad_topics += 1
                    continue
                table, leaf = where
                live = self._table(table)
                try:
                    with self.store.savepoint():
                        if n in parsed:
                            self._event(live, *parsed[n], received, changes)
                        else:
                            self._message(live, leaf, message.payload, received, changes)
                except BadMessage as exc:
                    self._bad(live, f"{leaf}: {exc}", changes)
                except self.store.aborts:
                    raise  # the store's trouble (a full disk, a lost server): the batch is
                    # kept; or, without savepoints, the batch is taken one at a time
                except Exception as exc:  # judged on its own: the batch goes on
                    if live.row.bad < 10:  # the trace of the first few (a flood: counted)
                        log.exception("table %s: a %s message the floor could not take",
                                      table, leaf)  # fmt: skip
                    self._bad(live, f"{leaf}: the floor could not take it ({_short(exc)})", changes)
                touched.add(table)
            for table in sorted(touched):  # one order: two floors' batches never deadlock
                self._advance(self.tables[table], changes)
                self.store.save_table(self.tables[table].row)
            self.take_folds(changes)
        self._gaps(changes)
        self._publish(touched | changes.tables, changes)
        return changes

    def _store_events(
        self, batch: list[Message], received: str
    ) -> dict[int, tuple[FloorRecord, bool]]:
        """Store the batch's new records in a few statements, before each message is
        judged in its turn (one round trip a record made PostgreSQL 3-4 times slower than
        SQLite); by the message's place in the batch: its record, and whether this
        service stored it (False: another floor service sharing the store had it). A
        message that is not a readable event, or whose (table, record) is held already or
        came earlier in the batch, is not here: it is judged the usual way. A record the
        store refuses undoes the batch, whose messages are then taken one at a time
        (:meth:`controller.floor.server.FloorService._alone`)."""
        fresh: dict[tuple[str, int], tuple[int, FloorRecord]] = {}
        for n, message in enumerate(batch):
            where = split_topic(self.prefix, message.topic)
            if where is None or where[1] != "event":
                continue
            try:
                rec = parse_event(where[0], message.payload)
            except BadMessage:
                continue  # counted bad in its turn
            live = self.tables.get(rec.table)
            if live is not None and (rec.record <= live.row.contiguous or rec.record in live.above):
                continue  # a repeat, or a rewritten history: judged in its turn
            fresh.setdefault((rec.table, rec.record), (n, rec))
        if not fresh:
            return {}
        stored = self.store.add_records([rec for _, rec in fresh.values()], received)
        return {n: (rec, key in stored) for key, (n, rec) in fresh.items()}

    def _message(
        self, live: TableLive, leaf: str, payload: bytes, received: str, changes: Changes
    ) -> None:
        table = live.row.table
        if leaf == "event":
            self._event(live, parse_event(table, payload), None, received, changes)
        elif leaf == "online":
            self._online(live, payload, received, changes)
        elif leaf == "state":
            state = parse_state(payload)
            live.row.state, live.row.state_at = state, received
            link = state.get("floor")  # the table's link: its cursor is the newest published
            cursor = link.get("cursor") if isinstance(link, dict) else None
            if isinstance(cursor, int) and not isinstance(cursor, bool) and cursor >= 0:
                live.row.announced = max(live.row.announced or 0, cursor)
        else:
            raise BadMessage(f"a table does not publish on {leaf}")

    def count_bad(self, topic_name: str, reason: str) -> bool:
        """Count one message bad in a transaction of its own (the service's last resort,
        when even the message alone could not be stored); False: not a table's topic."""
        where = split_topic(self.prefix, topic_name)
        if where is None:
            self.bad_topics += 1
            return False
        table, leaf = where
        changes = Changes()
        live = self._table(table)
        with self.store.transaction():
            self._bad(live, f"{leaf}: {reason}", changes)
            self.store.save_table(live.row)
        self._publish({table} | changes.tables, changes)
        return True

    def _bad(self, live: TableLive, reason: str, changes: Changes) -> None:
        """One bad message of ``live``'s table: counted with its reason; a table that keeps
        sending them is quarantined (an alert naming it, on the console and /healthz)."""
        row = live.row
        row.bad += 1
        row.last_bad = reason[:300]
        now = self.clock()
        live.bad_times.append(now)
        changes.tables.add(row.table)
        if row.bad <= 10 or row.bad % 100 == 0:  # the log stays readable under a flood
            log.warning("table %s sent a bad message (%d so far): %s", row.table, row.bad, reason)
        if row.quarantined is not None or len(live.bad_times) < QUARANTINE_AFTER:
            return
        if now - live.bad_times[0] > QUARANTINE_WITHIN_S:
            return
        row.quarantined = (
            f"{QUARANTINE_AFTER} bad messages within {QUARANTINE_WITHIN_S:g} s "
            f"(the last: {row.last_bad})"
        )
        self.store.raise_alert(
            row.table, AlertKind.QUARANTINE, now_iso(),
            {"what": f"table {row.table} is quarantined: it keeps sending bad messages",
             "why": row.quarantined, "bad": row.bad},
            key=OPEN_KEY,
        )  # fmt: skip
        log.error("table %s is quarantined: %s", row.table, row.quarantined)
        changes.alerts = True

    def tick(self) -> Changes:
        """Ask for what is still missing, and take the folds done apart (called about
        once a second)."""
        changes = Changes()
        if self._folder is not None and self._folder.pending():
            with self.store.transaction():
                self.take_folds(changes)
        self._gaps(changes)
        self._publish(changes.tables, changes)
        return changes

    def _table(self, table: str) -> TableLive:
        live = self.tables.get(table)
        if live is None:
            live = self.tables[table] = TableLive(TableRow(table), TableAudit())
            live.checkpoints[0] = live.audit.checkpoint()
            self._arm(live)
        return live

    def approved_for(self, table: str) -> ApprovedRules | None:
        """The rules ``table`` is approved for (its own, else the preset for ``*``)."""
        return self.approved.get(table) or self.approved.get("*")

    def _arm(self, live: TableLive) -> None:
        """Give a table's audit what it checks against: its approved rules and the
        floor's own fold of its records (for a ``clear_halt``)."""
        table = live.row.table
        live.audit.approved = self.approved_for(table)
        live.audit.state_at = lambda record: self.fold_to(table, record)

    def fold_to(self, table: str, record: int) -> TableState | None:
        """The state the floor's own fold of ``table``'s stored records gives after
        ``record``, to check a ``clear_halt`` resuming from further back than the audit's
        recent states: a fold done apart (:meth:`_ready` waited for it), or a fold from
        the checkpoint before ``record`` (at most :data:`CHECKPOINT_EVERY` records, on
        this thread). None: the records stop short of it (a gap)."""
        live = self.tables[table]
        if record in live.folds:
            return live.folds.pop(record)
        at = self._checkpoint(live, record)
        if at is None:
            return None
        return fold_records(self.store, table, at, record)

    def _checkpoint(self, live: TableLive, record: int) -> Checkpoint | None:
        """The newest checkpoint at most :data:`CHECKPOINT_EVERY` records before
        ``record`` (None: a fold from there would be longer; it is done apart)."""
        for back in range(record, max(-1, record - CHECKPOINT_EVERY - 1), -1):
            if back in live.checkpoints:
                return live.checkpoints[back]
        return None

    def _keep_checkpoint(self, live: TableLive) -> None:
        live.checkpoints[live.audit.record] = live.audit.checkpoint()
        while len(live.checkpoints) > CHECKPOINTS_KEPT:
            del live.checkpoints[min(live.checkpoints)]

    def _ready(self, live: TableLive, rec: FloorRecord) -> bool:
        """Whether the audit can take ``rec`` now. A ``clear_halt`` resuming from further
        back than the recent states and the checkpoints waits while the floor folds the
        table's records apart, on a thread of its own (the ingest thread, which serves
        every table, never does unbounded work for one); that table's audit goes on once
        the fold is done (:meth:`take_folds`)."""
        if rec.kind != RecordKind.CLEAR_HALT or not isinstance(rec.payload, dict):
            return True
        resume_from = rec.payload.get("resume_from")
        if isinstance(resume_from, bool) or not isinstance(resume_from, int):
            return True  # the audit names what cannot be read
        if not 0 <= resume_from < rec.record - 1 or resume_from in live.audit.recent:
            return True
        if resume_from in live.folds or self._checkpoint(live, resume_from) is not None:
            return True
        if live.folding is None:
            live.folding = resume_from
            if self._folder is None:
                self._folder = FoldApart(self.store)
            self._folder.ask(live.row.table, resume_from)
            log.info(
                "table %s: the clear_halt at record %d resumes from record %d: its records "
                "are folded apart to check it", live.row.table, rec.record, resume_from,
            )  # fmt: skip
        return False

    def take_folds(self, changes: Changes) -> None:
        """The folds done apart: each table's audit goes on from its ``clear_halt``."""
        if self._folder is None:
            return
        for table, record, state in self._folder.done():
            live = self.tables.get(table)
            if live is None or live.folding != record:
                continue
            live.folds[record] = state
            live.folding = None
            self._audit(live, changes)
            self.store.save_table(live.row)

    def _event(
        self, live: TableLive, rec: FloorRecord, stored: bool | None, received: str,
        changes: Changes,
    ) -> None:  # fmt: skip
        """One record: kept, a repeat, or a rewritten history (``stored``: whether
        :meth:`_store_events` stored it; None: not tried yet)."""
        number = rec.record
        held = number <= live.row.contiguous or number in live.above
        if not held:
            if stored is None:
                stored = self.store.add_record(rec, received)
            # not stored: another floor service sharing the store has it; the same record
            # is this floor's too (for its own audit), a different one is an integrity alert
            chain = None if stored else self.store.chain(rec.table, number)
            if stored or chain == rec.chain:
                live.fresh[number] = rec  # for the audit, without reading it back
                live.above.add(number)
                live.highest = max(live.highest, number)
                self.ingested += stored
                return
        else:
            chain = self.store.chain(rec.table, number)
            if chain == rec.chain or chain is None:  # None: held once, archived since
                live.repeats += 1
                return
        for alert in self._alerts_of(rec.table, AlertKind.INTEGRITY, record=number):
            if alert.detail.get("received_chain") == rec.chain:
                return  # this rewritten record is already on the queue
        current = self.store.find_alert(rec.table, AlertKind.INTEGRITY, open_only=True)
        if current is not None and current.record != number:
            # a whole history sent again (a new journal) is one alert, not one per record
            more = current.detail.get("more_records", [])
            if number not in more:
                detail = {**current.detail, "more_records": [*more, number][:1000]}
                self.store.set_alert(current.id, current.status, received, None, detail=detail)
                changes.alerts = True
            return
        detail = {
            "what": f"record {number} arrived again with a different chain hash: "
            "the table's history was rewritten",
            "stored_chain": chain,
            "received_chain": rec.chain,
            "received": rec.message(),
        }
        key = f"record {number} {rec.chain}"
        if (
            self.store.raise_alert(
                rec.table, AlertKind.INTEGRITY, received, detail, record=number, key=key
            )
            is None
        ):
            return  # another floor service raised it
        log.error("table %s: integrity alert at record %d", rec.table, number)
        changes.alerts = True
        changes.tables.add(rec.table)

    def _alerts_of(self, table: str, kind: AlertKind, *, record: int) -> list[Alert]:
        found = self.store.find_alert(table, kind, record=record)
        return [found] if found is not None else []

    def _online(self, live: TableLive, payload: bytes, received: str, changes: Changes) -> None:
        presence = parse_online(payload)
        was = live.row.online
        live.row.online = presence.online
        live.row.online_at = received
        if presence.program:
            live.row.program = presence.program
        if presence.record is not None:
            live.row.announced = presence.record
        table = live.row.table
        current = self.store.find_alert(table, AlertKind.OFFLINE, open_only=True)
        if not presence.online and current is None:
            self.store.raise_alert(
                table, AlertKind.OFFLINE, received,
                {"what": "the table went offline (its link to the broker was lost)",
                 "last_record": live.row.contiguous},
                key=OPEN_KEY,
            )  # fmt: skip
            log.warning("table %s went offline: alert raised", table)
            changes.alerts = True
        elif presence.online and current is not None:
            self.store.set_alert(current.id, AlertStatus.RESOLVED, received, "table back online")
            log.info("table %s is back online: its offline alert %d resolved", table, current.id)
            changes.alerts = True
        if was != presence.online:
            changes.tables.add(table)

    # the contiguous run and the second opinion -------------------------------------
    def _advance(self, live: TableLive, changes: Changes) -> None:
        row = live.row
        start = row.contiguous
        while row.contiguous + 1 in live.above:
            row.contiguous += 1
            live.above.discard(row.contiguous)
        if row.contiguous == start:
            return
        changes.records[row.table] = row.contiguous
        changes.tables.add(row.table)
        self._audit(live, changes, max(start, live.audit.record) + 1)

    def _audit(self, live: TableLive, changes: Changes, first: int | None = None) -> None:
        """Check and fold the contiguous records the audit has not taken (from ``first``;
        by default the one after its last), until one has to wait (:meth:`_ready`)."""
        row, table = live.row, live.row.table
        if live.folding is not None:  # its audit waits for a fold apart
            live.fresh = {}
            return
        first = live.audit.record + 1 if first is None else first
        if first > row.contiguous:
            live.fresh = {}
            return
        findings = Findings()
        fresh = live.fresh
        if all(n in fresh for n in range(first, row.contiguous + 1)):
            records = [fresh[n] for n in range(first, row.contiguous + 1)]
        else:
            records = self.store.records(table, first, row.contiguous)
        live.fresh = {}
        for rec in records:
            if not self._ready(live, rec):
                break
            try:
                findings.merge(live.audit.step(rec))
            except Exception as exc:  # one record the walk cannot take: named, walk on
                log.exception("table %s: the second opinion could not take record %d",
                              table, rec.record)  # fmt: skip
                live.audit.record = rec.record
                findings.discrepancies.append(
                    Discrepancy(rec.record, live.audit.state.hand, Finding.UNREADABLE,
                                f"the second opinion could not take the record ({_short(exc)})")
                )  # fmt: skip
            if live.audit.record % CHECKPOINT_EVERY == 0:
                self._keep_checkpoint(live)
        changes.tables.add(table)
        self._apply(live, findings, changes)
        row.audit = live.audit.to_dict()

    def _apply(self, live: TableLive, found: Findings, changes: Changes) -> None:
        table = live.row.table
        at = now_iso()
        for number in found.dropped_hands:
            self.store.drop_hand(table, number)
        for hand in found.hands.values():
            self.store.save_hand(table, hand)
        if found.hands or found.dropped_hands:
            changes.hands.setdefault(table, set()).update(found.hands, found.dropped_hands)
        for d in found.discrepancies:
            self.store.raise_alert(
                table, AlertKind.AUDIT, at,
                {"what": d.what, "detail": d.detail,
                 "rules_record": live.audit.rules_record, **(d.facts or {})},
                hand=d.hand, record=d.record, key=f"record {d.record} {d.what} {d.detail}"[:500],
            )  # fmt: skip
            log.error("table %s record %d: second opinion differs: %s", table, d.record, d.detail)
            changes.alerts = True
        for a in found.alerts:
            if self.store.find_alert(table, AlertKind.SURVEILLANCE, hand=a.hand) is not None:
                continue  # once per hand, even when the 5th point is voided and made again
            self.store.raise_alert(
                table, AlertKind.SURVEILLANCE, a.at,
                {"unique_points": a.unique_points,
                 "pays": {str(k): v for k, v in live.audit.rules.pay_table().items()}},
                hand=a.hand, record=a.record, key=f"hand {a.hand}",
            )  # fmt: skip
            changes.alerts = True
            log.warning("table %s: 5th-point alert raised for hand %d (record %d)",
                        table, a.hand, a.record)  # fmt: skip
            self._backlog(table, at)
        for r in found.refusals:
            refused = self.store.find_alert(table, AlertKind.SURVEILLANCE, hand=r.hand)
            if refused is not None and refused.status is not AlertStatus.CONFIRMED:
                detail = {**refused.detail, "refused": r.reason, "refused_record": r.record}
                self.store.set_alert(refused.id, AlertStatus.REFUSED, at, "table", detail=detail)
                log.warning("table %s: refused the confirmation of hand %d: %s",
                            table, r.hand, r.reason)  # fmt: skip
                changes.alerts = True
        for c in found.confirmations:
            alert = self.store.find_alert(table, AlertKind.SURVEILLANCE, hand=c.hand)
            if alert is not None:
                detail = {**alert.detail, "confirmed_record": c.record, "confirmed_at": c.at}
                self.store.set_alert(alert.id, AlertStatus.CONFIRMED, at, c.by, detail=detail)
                log.info("table %s: hand %d confirmed by %s (alert %d, record %d)",
                         table, c.hand, c.by, alert.id, c.record)  # fmt: skip
                changes.alerts = True

    def _backlog(self, table: str, at: str) -> None:
        """A table with :data:`BACKLOG_AFTER` or more open 5th points raises them faster
        than surveillance confirms them: that is an alert of its own (one open at a time)."""
        waiting = self.store.count_open(table, AlertKind.SURVEILLANCE)
        if waiting < BACKLOG_AFTER:
            return
        if self.store.find_alert(table, AlertKind.BACKLOG, open_only=True) is not None:
            return
        raised = self.store.raise_alert(
            table, AlertKind.BACKLOG, at,
            {"what": f"table {table} has {waiting} 5th-point alerts waiting for surveillance: "
             "it raises them faster than they are confirmed", "waiting": waiting},
            key=OPEN_KEY,
        )  # fmt: skip
        if raised is None:
            return  # another floor service sharing the store raised it
        log.error("table %s: %d 5th-point alerts wait for surveillance (backlog)", table, waiting)

    # gaps ----------------------------------------------------------------------------
    def _gaps(self, changes: Changes) -> None:
        now = self.clock()
        behind: list[dict[str, Any]] = []
        quarantined = [
            {"table": live.row.table, "why": live.row.quarantined}
            for live in self.tables.values()
            if live.row.quarantined is not None
        ]
        for live in self.tables.values():
            missing = live.missing
            if missing is None:
                live.behind_since = None
            elif live.behind_since is None:
                live.behind_since = now
            elif now - live.behind_since >= self.health_after_s:
                behind.append(
                    {"table": live.row.table, "record": live.row.contiguous, "head": live.head,
                     "for_s": round(now - live.behind_since, 1)}
                )  # fmt: skip
        self.health = {"behind": behind, "quarantined": quarantined}
        for live in self.tables.values():
            missing = live.missing
            if missing is None:
                live.gap_since = None
                continue
            if live.gap_since is None or live.row.contiguous != live.gap_at:
                live.gap_since, live.gap_at = now, live.row.contiguous
                changes.tables.add(live.row.table)
                continue
            first = missing[0]
            if now - live.gap_since < self.gap_grace_s:
                continue
            if live.resend_from == first and now - live.resend_at < self.resend_every_s:
                continue
            self.send(topic(self.prefix, live.row.table, "command"), resend_command(first))
            log.info("table %s: asked to resend from record %d", live.row.table, first)
            live.resend_from, live.resend_at = first, now
            live.resends += 1
            changes.tables.add(live.row.table)

    # surveillance's actions (called on the ingest thread) ---------------------------
    def confirm(self, alert_id: int, user: str, command_id: str) -> Alert:
        """Send ``confirm`` for a surveillance alert; it shows confirmed once journaled."""
        alert = self.store.alert(alert_id)
        if alert is None or alert.kind is not AlertKind.SURVEILLANCE:
            raise LookupError(f"no surveillance alert {alert_id}")
        if alert.status is AlertStatus.CONFIRMED:
            return alert
        problem = confirm_problem(alert, self.summaries.get(alert.table))
        if problem is not None:
            raise ValueError(f"cannot confirm: {problem}; clear the alert with a note instead")
        assert alert.hand is not None
        now = now_ms()
        at, stale = iso(now), iso(now - int(RESEND_AFTER_S * 1000))
        if self.store.claim_confirm(alert.id, at, user, command_id, stale_before=stale):
            # this console's click is the one: the table hears one confirm, whichever
            # console of whichever floor service sent it (another's, within
            # RESEND_AFTER_S, is shown as sent)
            self.send(
                topic(self.prefix, alert.table, "command"),
                confirm_command(alert.hand, user, command_id),
            )
            log.info("table %s: %s sent the confirmation of hand %d (alert %d)",
                     alert.table, user, alert.hand, alert.id)  # fmt: skip
        self._publish({alert.table}, Changes(alerts=True))
        sent = self.store.alert(alert.id)
        assert sent is not None
        return sent

    def clear(self, alert_id: int, user: str, note: str = "", *, flood: bool = False) -> Alert:
        """A person clears an integrity, audit, offline or quarantine alert (kept, marked
        cleared; clearing a quarantine lifts it); ``flood``: with every open alert of its
        kind at its table up to it. A surveillance alert is cleared only when the table
        cannot confirm it (refused, or superseded)."""
        alert = self.store.alert(alert_id)
        if alert is None:
            raise LookupError(f"no alert {alert_id}")
        if alert.kind is AlertKind.SURVEILLANCE and (
            alert.status is AlertStatus.CONFIRMED
            or (
                alert.status is not AlertStatus.REFUSED
                and confirm_problem(alert, self.summaries.get(alert.table)) is None
            )
        ):
            raise LookupError(
                "a surveillance alert is confirmed, not cleared "
                "(unless the table refused the confirmation or cannot take it)"
            )
        ids = [alert.id]
        if flood and alert.kind is not AlertKind.SURVEILLANCE:
            ids = self.store.open_ids(alert.table, alert.kind, upto=alert.id) or ids
        with self.store.transaction():
            at = now_iso()
            for number in ids:
                one = alert if number == alert.id else self.store.alert(number)
                if one is None:
                    continue
                detail = {**one.detail, "note": note} if note else None
                self.store.set_alert(number, AlertStatus.CLEARED, at, user, detail=detail)
            live = self.tables.get(alert.table)
            if alert.kind is AlertKind.QUARANTINE and live is not None:  # a person lifts it
                live.row.quarantined = None
                live.bad_times.clear()
                self.store.save_table(live.row)
        log.info("table %s: %s cleared %d %s alert%s (newest %d)%s", alert.table, user,
                 len(ids), alert.kind, "s" if len(ids) != 1 else "", alert.id,
                 f": {note}" if note else "")  # fmt: skip
        self._publish({alert.table}, Changes(alerts=True))
        cleared = self.store.alert(alert.id)
        assert cleared is not None
        return cleared

    # the console's view --------------------------------------------------------------
    def _publish(self, tables: Iterable[str], changes: Changes) -> None:
        tables = set(tables)
        for table in tables:
            self.summaries[table] = table_summary(self.store, self.tables[table])
        changes.tables |= tables
        self._pending.merge(changes)
        if changes.alerts and self.store.shared:  # the other floors' consoles show it too
            self.store.announce(changes.tables)

    def heard(self, tables: set[str]) -> None:
        """Another floor service sharing the store changed the alerts of ``tables`` (none
        named: any table's): the console is told, as if this floor had."""
        known = set(self.tables) if not tables else tables & set(self.tables)
        for table in known:
            self.summaries[table] = table_summary(self.store, self.tables[table])
        self._pending.merge(Changes(tables=known, alerts=True))

    def take_changes(self) -> Changes:
        """Everything changed since the last call (batches, ticks, surveillance's actions)."""
        changes, self._pending = self._pending, Changes()
        return changes


def fold_records(store: Store, table: str, at: Checkpoint, record: int) -> TableState | None:
    """The floor's own fold of ``table``'s stored records from checkpoint ``at`` to
    ``record`` (None when the records stop short: a gap), read ``FOLD_RUN`` at a time on
    the calling thread's reader."""
    audit = TableAudit.resumed(at)
    first = at.record + 1
    while first <= record:
        last = min(record, first + FOLD_RUN - 1)
        for rec in store.records(table, first, last, reader=True):
            if rec.record != audit.record + 1:
                return None  # a gap: what the floor holds goes no further
            audit.step(rec)
        first = last + 1
    return audit.state if audit.record == record else None


class FoldApart:
    """Folds of a table's records from its first, on one thread of their own (the ingest
    thread asks and takes the answers; one fold at a time, in the order asked)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._asked: queue.SimpleQueue[tuple[str, int]] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[tuple[str, int, TableState | None]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="floor-fold", daemon=True)
        self._thread.start()

    def ask(self, table: str, record: int) -> None:
        self._asked.put((table, record))

    def pending(self) -> bool:
        """Whether an answer waits to be taken."""
        return not self._done.empty()

    def done(self) -> list[tuple[str, int, TableState | None]]:
        """The answers so far: (table, record, the state after it or None)."""
        out = []
        while not self._done.empty():
            out.append(self._done.get_nowait())
        return out

    def _run(self) -> None:
        genesis = TableAudit().checkpoint()
        while True:
            table, record = self._asked.get()
            try:
                state = fold_records(self.store, table, genesis, record)
            except Exception:  # the answer is "cannot check", never a dead thread
                log.exception("table %s: the fold to record %d failed", table, record)
                state = None
            self._done.put((table, record, state))
