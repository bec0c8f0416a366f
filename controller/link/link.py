"""The floor link: the table's journal published to the floor's MQTT broker (docs/floor.md).

Topics (``<p>`` is ``[floor] topic_prefix``, ``<t>`` the table id):

==================  ==================  =====================================================
``<p>/<t>/event``   QoS 1               one message per journal record, in record order,
                                        with the events the table's engine decided
``<p>/<t>/state``   QoS 1, retained     the ``status --json`` object, at each change
``<p>/<t>/online``  QoS 1, retained     ``{"online": true, "program", "record"}`` at connect;
                                        the will (and a clean stop) ``{"online": false}``
``<p>/<t>/command`` QoS 1 (from floor)  ``confirm`` (posted to the engine) and ``resend``
==================  ==================  =====================================================

The journal is the outbox. The link reads it on its own read-only connection, in
bounded batches, keeps at most ``window`` records unacknowledged, and moves a
durable cursor (:mod:`controller.link.cursor`) over every record the broker
acknowledged (PUBACK), in order. After a broker outage, a network cut or a SIGKILL
it publishes from the record after the cursor: only the records that were in
flight can arrive twice (the floor keeps each (table, record) once).

The journal keeps commands, not events; each command record's message also
carries the events the table's engine decided (``"events"``), folded on the
link's thread by :class:`controller.link.fold.LinkFold` (from the newest
snapshot before the first record published, then forward), so the floor's
second opinion has the table's answer to compare with.

Nothing here runs on the engine thread: the engine only calls :meth:`FloorLink.wake`
and :meth:`FloorLink.state_changed` (each sets a flag). paho's network thread only
queues what it hears; one publisher thread does the rest.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode
from paho.mqtt.reasoncodes import ReasonCode

from controller.clock import now_iso
from controller.core.commands import Command
from controller.core.config import FireBetRules, FloorConfig
from controller.core.errors import FirebetError
from controller.journal import Journal, Record
from controller.link.cursor import Cursor, CursorFile
from controller.link.fold import LinkFold
from controller.link.outbox import Window, checked_cursor, head
from controller.link.report import LinkReport
from controller.wire.messages import (
    OFFLINE,
    CommandError,
    Resend,
    event_message,
    online_message,
    parse_command,
    state_message,
    topics,
)
from controller.wire.mqtt import connect, make_client, no_delay

log = logging.getLogger("firebet.floor")

WINDOW = 256  # records published and not yet acknowledged, at most
IDLE_POLL_S = 0.5  # the journal's head is read at least this often
RETRY_FIRST_S = 1.0  # a link that stopped starts again after this, then twice as long ...
RETRY_MAX_S = 60.0  # ... up to this, for ever (a run longer than this starts it over)
STATE_EVERY_S = 0.1  # the retained state at most this often (the latest one always goes)
REFUSED_BACKOFF_S = 5.0  # after the broker refused a record, wait before trying again
KEEPALIVE_S = 15  # the broker sends the will this long (x1.5) after a silent cut
DRAIN_S = 2.0  # a clean stop waits this long at most for the last acks
MAX_COMMANDS_QUEUED = 1000


class FloorLink:
    """Publishes one table's journal to the floor broker and takes the floor's commands."""

    def __init__(
        self,
        floor: FloorConfig,
        table: str,
        journal_path: Path,
        state_dir: Path,
        *,
        status: Callable[[], Mapping[str, Any]],
        post: Callable[[Command], None],
        program: str | Callable[[], str],
        rules: FireBetRules,
        window: int = WINDOW,
        client_id: str | None = None,
    ) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self.floor = floor
        self.table = table
        self.journal_path = Path(journal_path)
        self.cursor_file = CursorFile(state_dir)
        self.topics = topics(floor.topic_prefix, table)
        self.window = window
        self.client_id = client_id or f"firebet-{table}"
        self._status = status
        self._post = post
        self._program = program
        # what the table decided, replayed on this link's thread (controller.link.fold)
        self._fold = LinkFold(rules)
        self._cond = threading.Condition()
        self._woken = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._client: mqtt.Client | None = None
        # written by paho's thread, taken by the publisher (under _cond)
        self._acks: collections.deque[tuple[int, ReasonCode]] = collections.deque()
        self._commands: collections.deque[bytes] = collections.deque(maxlen=MAX_COMMANDS_QUEUED)
        self._announce = False
        # the publisher's own (read by status() without a lock: single assignments)
        self.report = LinkReport(broker=floor.broker)
        self.cursor = Cursor()
        self.head = 0
        self._next = 1
        self._inflight = Window(window)
        self._state_dirty = True
        self._state_mid: int | None = None
        self._state_at = 0.0  # when the last state was published (monotonic)
        self._state_due = 0.0  # when the state held back by STATE_EVERY_S is due
        self._paused_until = 0.0

    # the engine's side (cheap, any thread) ----------------------------------------------
    def wake(self) -> None:
        """New records may be in the journal."""
        with self._cond:
            self._woken = True
            self._cond.notify()

    def state_changed(self) -> None:
        """The table's state changed: publish ``state`` again at the next :meth:`wake`.

        Only a flag: the engine wakes the link once its outputs (lamps, reader ACK,
        client reply) are out, so the link's work never sits between a roll and its ACK.
        """
        self._state_dirty = True

    def status(self) -> dict[str, Any]:
        """``status --json`` ``floor``: connected, cursor, backlog, last error."""
        backlog = max(0, self.head - self.cursor.record)
        return self.report.to_dict(cursor=self.cursor.record, backlog=backlog)

    # life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the publisher thread (it connects and reconnects on its own)."""
        self._thread = threading.Thread(target=self._run, name="floor link", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Say ``{"online": false}``, disconnect and end the threads."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    # paho's thread: only queue what was heard -------------------------------------------
    def _on_connect(
        self, client: mqtt.Client, userdata: Any, flags: Any, reason: ReasonCode, props: Any
    ) -> None:
        if reason.is_failure:
            self.report.error(f"the broker {self.floor.broker} refused the connection: {reason}")
            return
        with self._cond:
            self.report.connected = True
            self._announce = True
            self._woken = True
            self._cond.notify()

    def _on_connect_fail(self, client: mqtt.Client, userdata: Any) -> None:
        self.report.error(f"cannot reach the broker {self.floor.broker}")

    def _on_disconnect(
        self, client: mqtt.Client, userdata: Any, flags: Any, reason: ReasonCode, props: Any
    ) -> None:
        with self._cond:
            was, self.report.connected = self.report.connected, False
            self._woken = True
            self._cond.notify()
        if was and not self._stopping:  # logged outside the lock the engine may want
            self.report.error(f"lost the broker {self.floor.broker}: {reason}")

    def _on_publish(
        self, client: mqtt.Client, userdata: Any, mid: int, reason: ReasonCode, props: Any
    ) -> None:
        with self._cond:
            self._acks.append((mid, reason))
            self._woken = True
            self._cond.notify()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        with self._cond:
            self._commands.append(bytes(message.payload))
            self._woken = True
            self._cond.notify()

    # the publisher thread --------------------------------------------------------------
    def _run(self) -> None:
        """Serve the link until :meth:`stop`. Whatever stops it (no network where the unit's
        sandbox allows none, a name that does not resolve, an unreadable password file, a
        bug) is said in ``status --json`` and the log, and the link starts again after
        :data:`RETRY_FIRST_S`, twice as long each time up to :data:`RETRY_MAX_S`, for ever:
        the table plays on meanwhile and the journal keeps what the floor has not had."""
        delay = RETRY_FIRST_S
        shown: str | None = None  # the last failure logged with its traceback
        while not self._stopping:
            began = time.monotonic()
            why = None
            try:
                self._serve()
            except Exception as exc:  # never die silently: say why in status and the log
                why = f"the floor link stopped: {exc!r}"
                if repr(exc) != shown:
                    log.exception("floor link stopped")
                    shown = repr(exc)
            if self._stopped():  # read again: _serve returns when stop() was called
                break
            if time.monotonic() - began > RETRY_MAX_S:
                delay = RETRY_FIRST_S  # it ran a while: a new failure starts the back-off over
            self.report.retry_in(delay, why)
            with self._cond:
                self._cond.wait_for(lambda: self._stopping, timeout=delay)
            self.report.retry_at = None
            delay = min(delay * 2, RETRY_MAX_S)

    def _stopped(self) -> bool:
        return self._stopping

    def _connect(self) -> mqtt.Client | None:
        try:
            client = make_client(self.floor, self.client_id)
        except FirebetError as exc:
            self.report.error(str(exc))
            return None
        client.will_set(self.topics["online"], OFFLINE, qos=1, retain=True)
        # the window is ours: paho's own limit re-scans every queued message at each ack
        client.max_inflight_messages_set(0)
        client.reconnect_delay_set(1, 30)
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        client.on_socket_open = no_delay
        connect(client, self.floor, keepalive=KEEPALIVE_S)
        client.loop_start()
        return client

    def _serve(self) -> None:
        reader = Journal(self.journal_path, read_only=True)
        try:
            reader.attach()
            self.cursor, why = checked_cursor(self.cursor_file, reader)
            if why is not None:
                self.report.error(why)
            self._next = self.cursor.record + 1
            self.head = head(reader)
            self._client = client = self._connect()
            if client is None:
                return
            try:
                while self._step(reader, client):
                    pass
                self._drain(reader, client)
            finally:
                self._goodbye(client)
        finally:
            reader.close()

    def _step(self, reader: Journal, client: mqtt.Client) -> bool:
        """One turn: wait for news, take acks and commands, publish what fits."""
        with self._cond:
            if not self._woken and not self._stopping:
                timeout = IDLE_POLL_S
                if self._state_dirty and self._state_due:
                    timeout = min(timeout, max(0.0, self._state_due - time.monotonic()))
                self._cond.wait(timeout)
            self._woken = False
            if self._stopping:
                return False
            acks = list(self._acks)
            self._acks.clear()
            commands = list(self._commands)
            self._commands.clear()
            announce, self._announce = self._announce, False
            state_dirty = self._state_dirty
        self._take_acks(acks)
        for payload in commands:
            self._take_command(payload)
        self.head = max(self.head, head(reader))
        if not self.report.connected:
            return True
        if announce:
            client.subscribe(self.topics["command"], qos=1)
            digest = self._program() if callable(self._program) else self._program
            online = online_message(digest, self.head)
            client.publish(self.topics["online"], online, qos=1, retain=True)
            state_dirty = True
        if state_dirty and self._state_mid is None:
            wait = self._state_at + STATE_EVERY_S - time.monotonic()
            if wait <= 0:
                self._publish_state(client)
            else:  # a burst of changes: the retained state only needs the latest
                self._state_due = time.monotonic() + wait
        if time.monotonic() >= self._paused_until:
            self._top_up(reader, client)
        return True

    def _publish_state(self, client: mqtt.Client) -> None:
        self._state_dirty = False
        self._state_at = time.monotonic()
        self._state_due = 0.0
        try:
            text = state_message(dict(self._status()))
        except Exception as exc:  # a status that cannot be read must not stop the records
            self.report.error(f"cannot read the table's status: {exc!r}")
            return
        info = client.publish(self.topics["state"], text, qos=1, retain=True)
        self._state_mid = info.mid

    def _top_up(self, reader: Journal, client: mqtt.Client) -> None:
        room = self._inflight.room()
        if room <= 0 or self._next > self.head:
            return
        for record in reader.batch(self._next - 1, room):
            events = self._events(reader, record)
            message = event_message(self.table, record, events)
            info = client.publish(self.topics["event"], message, qos=1)
            if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
                self.report.error(
                    f"cannot publish record {record.record}: {mqtt.error_string(info.rc)}"
                )
                return
            self._inflight.add(info.mid, record.record, record.hash)
            self._next = record.record + 1
            self.report.published += 1

    def _events(self, reader: Journal, record: Record) -> list[dict[str, Any]] | None:
        """The events the table's engine decided for ``record`` (None when not derivable:
        the floor then says "not checked" for it)."""
        try:
            events = self._fold.events(reader, record)
        except Exception as exc:  # a fold that fails must not stop the records
            self.report.error(f"cannot derive the events of record {record.record}: {exc!r}")
            self._fold = LinkFold(self._fold.rules)
            events = None
        if events is None and record.kind == "command":
            self.report.underived += 1
        return events

    def _take_acks(self, acks: list[tuple[int, ReasonCode]]) -> None:
        refused: tuple[int, ReasonCode] | None = None
        for mid, reason in acks:
            if mid == self._state_mid:
                self._state_mid = None
                if reason.is_failure:
                    self.report.error(f"the broker refused the table's state: {reason}")
                continue
            not_taken = self._inflight.ack(mid, reason)
            if not_taken is not None:
                refused = refused or (not_taken, reason)
        moved = self._inflight.advance(self.cursor)
        if refused is not None:
            # not delivered: give up what is in flight and try again from the cursor later
            record, reason = refused
            self.report.error(
                f"the broker refused record {record}: {reason} (is the ACL right for "
                f"{self.floor.username or 'this user'}?); trying again in {REFUSED_BACKOFF_S:g} s"
            )
            self._inflight.clear()
            self._paused_until = time.monotonic() + REFUSED_BACKOFF_S
        if moved is not None:
            try:
                self.cursor_file.save(moved)
            except OSError as exc:
                self.report.error(f"cannot save the floor cursor {self.cursor_file.path}: {exc}")
            self.cursor = moved
        if refused is not None:
            self._next = self.cursor.record + 1

    def _take_command(self, payload: bytes) -> None:
        try:
            command = parse_command(payload, at=now_iso())
        except CommandError as exc:
            self.report.error(f"floor command refused: {exc}")
            self.report.commands_refused += 1  # after the reason: a reader of both sees it
            return
        if isinstance(command, Resend):
            log.info("floor asks for the records from %d again", command.start)
            self._next = min(self._next, command.start)
            return
        self._post(command)  # the engine decides, journals it (or its refusal), lights up

    def _drain(self, reader: Journal, client: mqtt.Client, timeout: float = DRAIN_S) -> None:
        """A clean stop: publish what is left and take the acks, for ``timeout`` at most."""
        deadline = time.monotonic() + timeout
        self.head = max(self.head, head(reader))
        while self.report.connected and (self._inflight or self._next <= self.head):
            if time.monotonic() >= deadline:
                return
            self._top_up(reader, client)
            with self._cond:
                if not self._acks:
                    self._cond.wait(0.05)
                acks = list(self._acks)
                self._acks.clear()
            self._take_acks(acks)

    def _goodbye(self, client: mqtt.Client) -> None:
        """A clean stop: ``{"online": false}`` (the broker keeps the will for cuts)."""
        try:
            if self.report.connected:
                info = client.publish(self.topics["online"], OFFLINE, qos=1, retain=True)
                with contextlib.suppress(RuntimeError, ValueError):
                    info.wait_for_publish(timeout=2.0)
            client.disconnect()
        finally:
            client.loop_stop()
            self.report.connected = False
