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
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.clock import now_iso, now_ms
from controller.core.state import TableState
from controller.core.times import iso
from controller.floor.audit import ApprovedRules, TableAudit
from controller.floor.findings import Discrepancy, Findings
from controller.floor.live import QUARANTINE_AFTER, QUARANTINE_WITHIN_S, Changes, TableLive
from controller.floor.queue import confirm_problem
from controller.floor.store import OPEN_KEY, RESEND_AFTER_S, Alert, Store, TableRow
from controller.floor.summary import table_summary
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
REFOLD_MAX = 50_000  # a refold to check a clear_halt goes at most this far ...
REFOLD_EVERY_S = 60.0  # ... and at most this often per table (a refold costs the thread)


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
        for row in store.table_rows().values():
            audit = TableAudit.from_dict(row.audit) if row.audit else TableAudit()
            live = TableLive(row, audit)
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
        with self.store.transaction():
            for message in batch:
                where = split_topic(self.prefix, message.topic)
                if where is None:
                    self.bad_topics += 1
                    continue
                table, leaf = where
                live = self._table(table)
                try:
                    with self.store.savepoint():
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
        self._gaps(changes)
        self._publish(touched | changes.tables, changes)
        return changes

    def _message(
        self, live: TableLive, leaf: str, payload: bytes, received: str, changes: Changes
    ) -> None:
        table = live.row.table
        if leaf == "event":
            self._event(live, parse_event(table, payload), received, changes)
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
            row.table, "quarantine", now_iso(),
            {"what": f"table {row.table} is quarantined: it keeps sending bad messages",
             "why": row.quarantined, "bad": row.bad},
            key=OPEN_KEY,
        )  # fmt: skip
        log.error("table %s is quarantined: %s", row.table, row.quarantined)
        changes.alerts = True

    def tick(self) -> Changes:
        """Ask for what is still missing (called about once a second)."""
        changes = Changes()
        self._gaps(changes)
        self._publish(changes.tables, changes)
        return changes

    def _table(self, table: str) -> TableLive:
        live = self.tables.get(table)
        if live is None:
            live = self.tables[table] = TableLive(TableRow(table), TableAudit())
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
        ``record`` (through the one replay, as the live audit folds them), to check a
        ``clear_halt`` resuming from further back than the audit's recent states. Bounded:
        ``record`` at most :data:`REFOLD_MAX`, at most once every :data:`REFOLD_EVERY_S`
        per table (None past either: the clear_halt is not adopted and alerted), and an
        earlier ``clear_halt`` of the refold is checked against its recent states only."""
        live = self.tables[table]
        now = self.clock()
        if record > REFOLD_MAX:
            return None
        if live.refold_at is not None and now - live.refold_at < REFOLD_EVERY_S:
            return None
        live.refold_at = now
        audit = TableAudit()
        first = 1
        while first <= record:
            last = min(record, first + FOLD_RUN - 1)
            for rec in self.store.records(table, first, last):
                if rec.record != audit.record + 1:
                    return audit.state  # a gap: what the floor holds goes no further
                audit.step(rec)
            first = last + 1
        return audit.state

    def _event(self, live: TableLive, rec: FloorRecord, received: str, changes: Changes) -> None:
        number = rec.record
        held = number <= live.row.contiguous or number in live.above
        if not held:
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
        for alert in self._alerts_of(rec.table, "integrity", record=number):
            if alert.detail.get("received_chain") == rec.chain:
                return  # this rewritten record is already on the queue
        current = self.store.find_alert(rec.table, "integrity", open_only=True)
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
            self.store.raise_alert(rec.table, "integrity", received, detail, record=number, key=key)
            is None
        ):
            return  # another floor service raised it
        log.error("table %s: integrity alert at record %d", rec.table, number)
        changes.alerts = True
        changes.tables.add(rec.table)

    def _alerts_of(self, table: str, kind: str, *, record: int) -> list[Alert]:
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
        current = self.store.find_alert(table, "offline", open_only=True)
        if not presence.online and current is None:
            self.store.raise_alert(
                table, "offline", received,
                {"what": "the table went offline (its link to the broker was lost)",
                 "last_record": live.row.contiguous},
                key=OPEN_KEY,
            )  # fmt: skip
            changes.alerts = True
        elif presence.online and current is not None:
            self.store.set_alert(current.id, "resolved", received, "table back online")
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
        table = row.table
        changes.records[table] = row.contiguous
        changes.tables.add(table)
        findings = Findings()
        first = max(start, live.audit.record) + 1
        fresh = live.fresh
        if all(n in fresh for n in range(first, row.contiguous + 1)):
            records = [fresh[n] for n in range(first, row.contiguous + 1)]
        else:
            records = self.store.records(table, first, row.contiguous)
        live.fresh = {}
        for rec in records:
            try:
                findings.merge(live.audit.step(rec))
            except Exception as exc:  # one record the walk cannot take: named, walk on
                log.exception("table %s: the second opinion could not take record %d",
                              table, rec.record)  # fmt: skip
                live.audit.record = rec.record
                findings.discrepancies.append(
                    Discrepancy(rec.record, live.audit.state.hand, "unreadable",
                                f"the second opinion could not take the record ({_short(exc)})")
                )  # fmt: skip
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
                table, "audit", at,
                {"what": d.what, "detail": d.detail,
                 "rules_record": live.audit.rules_record, **(d.facts or {})},
                hand=d.hand, record=d.record, key=f"record {d.record} {d.what} {d.detail}"[:500],
            )  # fmt: skip
            log.error("table %s record %d: second opinion differs: %s", table, d.record, d.detail)
            changes.alerts = True
        for a in found.alerts:
            if self.store.find_alert(table, "surveillance", hand=a.hand) is not None:
                continue  # once per hand, even when the 5th point is voided and made again
            self.store.raise_alert(
                table, "surveillance", a.at,
                {"unique_points": a.unique_points,
                 "pays": {str(k): v for k, v in live.audit.rules.pay_table().items()}},
                hand=a.hand, record=a.record, key=f"hand {a.hand}",
            )  # fmt: skip
            changes.alerts = True
        for r in found.refusals:
            refused = self.store.find_alert(table, "surveillance", hand=r.hand)
            if refused is not None and refused.status != "confirmed":
                detail = {**refused.detail, "refused": r.reason, "refused_record": r.record}
                self.store.set_alert(refused.id, "refused", at, "table", detail=detail)
                changes.alerts = True
        for c in found.confirmations:
            alert = self.store.find_alert(table, "surveillance", hand=c.hand)
            if alert is not None:
                detail = {**alert.detail, "confirmed_record": c.record}
                self.store.set_alert(alert.id, "confirmed", at, c.by, detail=detail)
                changes.alerts = True

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
        if alert is None or alert.kind != "surveillance":
            raise LookupError(f"no surveillance alert {alert_id}")
        if alert.status == "confirmed":
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
        if alert.kind == "surveillance" and (
            alert.status == "confirmed"
            or (
                alert.status != "refused"
                and confirm_problem(alert, self.summaries.get(alert.table)) is None
            )
        ):
            raise LookupError(
                "a surveillance alert is confirmed, not cleared "
                "(unless the table refused the confirmation or cannot take it)"
            )
        ids = [alert.id]
        if flood and alert.kind != "surveillance":
            ids = self.store.open_ids(alert.table, alert.kind, upto=alert.id) or ids
        with self.store.transaction():
            at = now_iso()
            for number in ids:
                one = alert if number == alert.id else self.store.alert(number)
                if one is None:
                    continue
                detail = {**one.detail, "note": note} if note else None
                self.store.set_alert(number, "cleared", at, user, detail=detail)
            live = self.tables.get(alert.table)
            if alert.kind == "quarantine" and live is not None:  # a person lifts it
                live.row.quarantined = None
                live.bad_times.clear()
                self.store.save_table(live.row)
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
