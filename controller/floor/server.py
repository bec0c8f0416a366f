"""The floor service's engine room: the broker connection and the one ingest thread.

paho's network thread only queues what arrives. One ingest thread takes the queue
in batches, stores each batch in one durable transaction
(:class:`controller.floor.ingest.Ingest`) and only then acknowledges the
messages to the broker (``manual_ack``), so a message the floor lost in a crash is
sent again. The floor's MQTT session is persistent (``clean_session=False``): the
broker keeps what arrives while the floor is away. Surveillance's actions from the
console run on the same thread, so the store has one writer. Listeners (the
console's live updates) hear what each batch changed.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import paho.mqtt.client as mqtt

from controller.clock import now_ms
from controller.core.errors import ConfigError, FirebetError
from controller.core.times import iso
from controller.floor.ingest import Ingest, Message
from controller.floor.live import Changes
from controller.floor.metrics import FloorMetrics
from controller.floor.settings import FloorSettings
from controller.floor.store import open_store
from controller.wire.messages import subscriptions
from controller.wire.mqtt import connect, make_client

log = logging.getLogger("firebet.floor")

BATCH = 1000
RETRY_KEPT = 10_000  # messages kept to try again while the store fails (the broker's
# in-flight window bounds them; what is past this comes back as a gap and a resend)
TICK_S = 0.5
EXPIRE_EVERY_S = 3600.0  # how often what is past [store] keep_days is archived and deleted
T = TypeVar("T")
Listener = Callable[[Changes], None]


@dataclass(frozen=True)
class _Received:
    message: Message
    generation: int
    at: float = 0.0  # when paho handed it over (monotonic)
    seq: int = 0  # its place among every message received


class _Tick:
    """Nothing arrived: time to look for gaps."""


@dataclass(frozen=True)
class _Call:
    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]


class FloorService:
    """One floor: the broker session, the store, the ingest thread and its listeners."""

    def __init__(self, settings: FloorSettings, state_dir: Path) -> None:
        self.settings = settings
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        self.store = open_store(settings, state_dir)
        self.metrics = FloorMetrics()  # /metrics (the console reports the rest at a scrape)
        self._queue: queue.SimpleQueue[_Received | _Call | None] = queue.SimpleQueue()
        self._listeners: list[Listener] = []
        self._generation = 0
        self.connected = threading.Event()
        self.last_error = ""
        self._waiting: dict[int, float] = {}  # seq of a message not acknowledged -> since
        self._waiting_lock = threading.Lock()
        self._seq = itertools.count(1)
        self._retry: list[_Received] = []  # what the store could not take, tried again
        self.client = self._client()
        self.ingest = self._ingest()
        self._thread = threading.Thread(target=self._run, name="floor-ingest", daemon=True)
        self._stopping = False
        self._stopped = threading.Event()

    def _ingest(self) -> Ingest:
        s = self.settings
        return Ingest(
            self.store,
            s.topic_prefix,
            self._send,
            gap_grace_s=s.gap_grace_s,
            resend_every_s=s.resend_every_s,
            health_after_s=s.health_after_s,
            approved=s.approved,
        )

    # the broker ------------------------------------------------------------------------
    def _client(self) -> mqtt.Client:
        s = self.settings
        try:
            client = make_client(s, s.client_id, manual_ack=True)
        except FirebetError as exc:
            raise ConfigError(s.source, "floor.password_file", str(exc)) from exc
        client.reconnect_delay_set(min_delay=1, max_delay=5)
        client.max_inflight_messages_set(100)
        client.max_queued_messages_set(0)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        return client

    def _on_connect(
        self, client: mqtt.Client, _u: Any, _f: Any, reason: Any, _p: Any = None
    ) -> None:
        if reason.is_failure:
            self.last_error = f"broker refused the floor: {reason}"
            log.error("%s", self.last_error)
            return
        self._generation += 1
        with self._waiting_lock:  # the broker sends again what the old session did not ack
            self._waiting.clear()
        client.subscribe([(t, 1) for t in subscriptions(self.settings.topic_prefix)])
        self.last_error = ""
        log.info("connected to the broker %s", self.settings.broker)

    def _on_subscribe(
        self, _c: mqtt.Client, _u: Any, _mid: int, reasons: list[Any], _p: Any = None
    ) -> None:
        if any(r.is_failure for r in reasons):
            self.last_error = f"the broker refused the floor's subscriptions: {reasons}"
            log.error("%s", self.last_error)
            return
        self.connected.set()

    def _on_disconnect(
        self, _c: mqtt.Client, _u: Any, _f: Any, reason: Any, _p: Any = None
    ) -> None:
        self.connected.clear()
        if not self._stopping:
            self.last_error = f"lost the broker: {reason}"
            log.warning("%s", self.last_error)

    def _on_message(self, _c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        received = _Received(
            Message(msg.topic, bytes(msg.payload), msg.mid, msg.qos, msg.retain),
            self._generation,
            time.monotonic(),
            next(self._seq),
        )
        with self._waiting_lock:
            self._waiting[received.seq] = received.at
        self._queue.put(received)

    def _send(self, name: str, payload: bytes) -> None:
        info = self.client.publish(name, payload, qos=1)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            log.warning("could not queue a command on %s: %s", name, mqtt.error_string(info.rc))

    def health(self) -> dict[str, Any]:
        """``/healthz``: ``ok`` is false, with the ``problems`` in words, when the broker is
        lost, a table is behind the record it published for ``health_after_s`` or more,
        a message has waited that long unacknowledged, or a table is quarantined.
        ``serving`` is false only for this service's own problems (the broker lost, a
        message unacknowledged that long): a load balancer takes this service out then,
        never for a table's problem, which every floor service sees alike."""
        after = self.settings.health_after_s
        with self._waiting_lock:
            waiting = len(self._waiting)
            oldest = min(self._waiting.values(), default=None)
        waited = 0.0 if oldest is None else time.monotonic() - oldest
        view = self.ingest.health
        problems: list[str] = []
        if not self.connected.is_set():
            problems.append(f"not connected to the broker: {self.last_error or 'connecting'}")
        if waited >= after:
            problems.append(f"{waiting} message(s) unacknowledged, the oldest for {waited:.0f} s")
        serving = not problems  # so far only this service's own
        for t in view["behind"]:
            problems.append(
                f"table {t['table']} is behind: record {t['record']} of {t['head']} "
                f"for {t['for_s']:.0f} s"
            )
        for t in view["quarantined"]:
            problems.append(f"table {t['table']} is quarantined: {t['why']}")
        return {
            "ok": not problems,
            "serving": serving,
            "problems": problems,
            "broker": self.connected.is_set(),
            "last_error": self.last_error,
            "tables": len(self.ingest.summaries),
            "ingested": self.ingest.ingested,
            "unacknowledged": waiting,
            "oldest_unacknowledged_s": round(waited, 1),
            "behind": view["behind"],
            "quarantined": view["quarantined"],
            "bad_topics": self.ingest.bad_topics,
            "after_s": after,
        }

    # lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Connect (in the background; paho reconnects by itself) and start ingesting."""
        if not self.settings.approved:  # SPEC section 6: a floor with no approvals says so
            log.warning(
                "no [approved.*] rules in %s: no table's rules are checked against rules "
                "the floor approved, and every hand is decided under unapproved rules",
                self.settings.source,
            )
        self._thread.start()
        # another floor service sharing the store changed alerts: this console shows it
        self.store.hear(lambda tables: self.call(lambda: self.ingest.heard(tables)))
        if self.settings.store.keep_days:
            threading.Thread(target=self._retention, name="floor-retention", daemon=True).start()
        connect(self.client, self.settings, keepalive=15, persistent=True)
        self.client.loop_start()

    def stop(self) -> None:
        """Disconnect, finish the queue, close the store."""
        self._stopping = True
        self._stopped.set()
        self.client.disconnect()
        self.client.loop_stop()
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.store.close()

    def _retention(self) -> None:
        """Archive, then delete, what is older than ``[store] keep_days``: at start and
        every :data:`EXPIRE_EVERY_S`, one chunk of each kind at a time on the ingest thread
        (the store's one writer; the messages wait no longer than a chunk)."""
        keep_ms = self.settings.store.keep_days * 86_400_000
        folder = self.state_dir / self.settings.store.archive_dir
        while not self._stopped.is_set():
            now = now_ms()
            archive = folder / f"floor-{iso(now)[:10]}.jsonl.gz"
            total = {"records": 0, "hands": 0, "alerts": 0}
            try:
                while not self._stopped.is_set():
                    one = functools.partial(self.store.expire, now - keep_ms, archive, rounds=1)
                    done = self.call(one).result(timeout=600)
                    for kind, n in done.items():
                        total[kind] += n
                    if not any(done.values()):
                        break
            except Exception:  # the next round tries again; the tables are not held up
                if not self._stopped.is_set():
                    log.exception("could not archive what is past [store] keep_days")
            if any(total.values()):
                log.info("archived to %s and deleted, older than %d days: %d records, "
                         "%d settled hands, %d closed alerts", archive,
                         self.settings.store.keep_days, total["records"], total["hands"],
                         total["alerts"])  # fmt: skip
            self._stopped.wait(EXPIRE_EVERY_S)

    def listen(self, listener: Listener) -> None:
        """Call ``listener(changes)`` on the ingest thread after each batch is stored."""
        self._listeners.append(listener)

    def call(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``fn`` on the ingest thread (the store's one writer); its future result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put(_Call(fn, future))
        return future

    # the ingest thread -----------------------------------------------------------------
    def _run(self) -> None:
        next_tick = time.monotonic() + TICK_S
        while True:
            item: _Received | _Call | _Tick | None
            try:
                item = self._queue.get(timeout=max(0.0, next_tick - time.monotonic()))
            except queue.Empty:
                item = _Tick()
            if time.monotonic() >= next_tick:
                next_tick = time.monotonic() + TICK_S
                self._guard(self.ingest.tick)
                self._again()
                self._notify()
            if isinstance(item, _Tick):
                continue
            batch: list[_Received] = []
            while item is not None:
                if isinstance(item, _Received):
                    batch.append(item)
                elif isinstance(item, _Call):
                    self._flush(batch)
                    batch = []
                    self._do(item)
                if len(batch) >= BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            self._flush(batch)
            if item is None:
                return

    def _flush(self, batch: list[_Received]) -> None:
        """Store a batch and acknowledge it. When the batch as a whole cannot be stored,
        each message is tried alone, and one that cannot be stored alone is counted bad
        with the reason: every message is acknowledged once it is stored or counted, so
        no message can hold the broker's window (and the other tables' records) hostage.
        Only the store's own trouble (a full disk, a lost server: ``Store.trouble``) leaves
        messages unacknowledged: they are kept and tried again at each tick until the
        store takes them (``/healthz`` says when one waits long)."""
        if not batch:
            return
        taken: list[_Received] = []
        with self.metrics.store_seconds.time():
            stored = self._guard(lambda: self.ingest.handle([r.message for r in batch]))
        if stored:
            taken = batch
        else:
            for r in batch:
                if self._alone(r.message):
                    taken.append(r)
                elif r.generation == self._generation and len(self._retry) < RETRY_KEPT:
                    self._retry.append(r)
        for r in taken:
            if r.message.qos and r.generation == self._generation:
                self.client.ack(r.message.mid, r.message.qos)
        kept = {r.seq for r in self._retry}
        with self._waiting_lock:
            for r in batch:
                if r.seq not in kept:  # stored, counted, or an old session's (sent again)
                    self._waiting.pop(r.seq, None)
        self._notify()

    def _alone(self, message: Message) -> bool:
        """Store one message alone, or else count it bad: whether either was done (not
        when the store itself fails: the message is not to blame)."""
        try:
            self.ingest.handle([message])
            return True
        except self.store.trouble:
            log.exception("the floor's store refused a message; it is kept and tried again")
            self.ingest = self._ingest()
            return False
        except Exception:
            log.exception("the floor could not store a message; it is counted bad")
            self.ingest = self._ingest()
        reason = "the floor could not store it (see the floor's log)"
        return self._guard(lambda: self.ingest.count_bad(message.topic, reason))

    def _again(self) -> None:
        """Try again what the store could not take (at each tick)."""
        if self._retry:
            retry, self._retry = self._retry, []
            self._flush([r for r in retry if r.generation == self._generation])

    def _do(self, call: _Call) -> None:
        try:
            result = call.fn()
        except Exception as exc:  # the caller gets it
            call.future.set_exception(exc)
        else:
            self._notify()  # before the caller hears back, so its next page shows it too
            call.future.set_result(result)

    def _guard(self, fn: Callable[[], object]) -> bool:
        try:
            fn()
            return True
        except Exception:
            # what the failed batch left in memory is dropped; the store is the truth, and
            # what it lacks comes back as a gap and a resend
            log.exception("the floor could not store a batch")
            self.ingest = self._ingest()
            return False

    def _notify(self) -> None:
        changes = self.ingest.take_changes()
        if not changes:
            return
        for listener in self._listeners:
            try:
                listener(changes)
            except Exception:
                log.exception("a console listener failed")
