"""What the floor's tests share: a table's real journal records, and a small table
publisher that speaks the floor link (docs/floor.md) to a broker (events, retained
state, online with a will) and answers ``resend`` commands from its records."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from controller.core.commands import Command
from controller.core.config import Config, rules_settings
from controller.core.engine import Engine
from controller.core.script import parse_line
from controller.journal import Journal, Record, recover
from controller.journal.history import history
from controller.journal.play import decide, journal_rules
from controller.link.fold import LinkFold
from controller.wire.messages import FloorRecord, event_message, parse_event, topic
from tests.broker import USERS, Mosquitto


def make_points(*points: int) -> list[str]:
    """Script lines that establish and make each point in turn (no sevens)."""
    dice = {4: "2 2", 5: "2 3", 6: "3 3", 8: "4 4", 9: "4 5", 10: "5 5"}
    return [d for p in points for d in (dice[p], dice[p])]


class TableJournal:
    """A table's real journal (in ``path``), driven with replay-script lines through the
    service's own decide-and-journal step."""

    def __init__(self, path: Path, table: str = "T1", config: Config | None = None) -> None:
        self.table = table
        self.engine = Engine(config.firebet if config is not None else None)
        self.journal = Journal(path, durable=False)
        self.replay = recover(self.journal, self.engine.rules).replay
        if config is not None:  # as the service journals it at each start
            self.take_rules(config, program="test-program")

    def take_rules(self, config: Config, program: str = "p") -> Record:
        """A ``rules`` record of ``config``, as a start of the service journals it."""
        settings = rules_settings(config) | {"program": program}
        record, _ = journal_rules(
            self.journal, self.replay, config.firebet, settings, config=None, started_by="test"
        )
        return record

    def apply(self, command: Command) -> list[FloorRecord]:
        """Apply one command (a floor ``confirm``, say); the records it journaled."""
        first = self.journal.last_record + 1
        decide(self.journal, self.replay, command)
        return self.records(first)

    def do(self, *lines: str) -> list[FloorRecord]:
        """Apply each line; the records they journaled."""
        first = self.journal.last_record + 1
        for line in lines:
            command = parse_line(line)
            if command is not None:
                decide(self.journal, self.replay, command)
        return self.records(first)

    def history(self, hands: int) -> list[dict[str, Any]]:
        """``firebet history`` of the newest ``hands`` hands."""
        with self.journal.view() as db:
            return history(db, self.engine.rules, hands)

    def records(self, first: int = 1) -> list[FloorRecord]:
        """The records from ``first`` on, exactly as the table's floor link publishes them
        (its own fold and message, read back as the floor parses it)."""
        fold = LinkFold(self.engine.rules)
        out = []
        for r in self.journal.records():
            if r.record >= first:
                message = event_message(self.table, r, fold.events(self.journal, r))
                out.append(parse_event(self.table, message.encode()))
        return out

    def close(self) -> None:
        self.journal.close()


def event_bytes(rec: FloorRecord) -> bytes:
    return json.dumps(rec.message()).encode()


class Publisher:
    """A table on the broker, as docs/floor.md says: the floor's tests' stand-in."""

    def __init__(self, broker: Mosquitto, table: str, prefix: str = "firebet") -> None:
        self.table = table
        self.prefix = prefix
        self.sent: dict[int, FloorRecord] = {}
        self.commands: list[dict[str, Any]] = []
        self.answer_resend = True
        self.disconnects = 0  # how often the broker cut this table off
        self._lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"table-{table}")
        self.client.username_pw_set(table, USERS[table])  # the ACL: a table is its own user
        self.client.will_set(self.t("online"), json.dumps({"online": False}), qos=1, retain=True)
        self.client.on_message = self._on_message
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.connect("127.0.0.1", broker.port, keepalive=5)
        self.client.loop_start()

    def t(self, leaf: str) -> str:
        return topic(self.prefix, self.table, leaf)

    def _on_connect(self, client: mqtt.Client, *_: Any) -> None:
        client.subscribe(self.t("command"), qos=1)

    def _on_disconnect(self, *_: Any) -> None:
        self.disconnects += 1

    def _on_message(self, _c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        body = json.loads(msg.payload)
        with self._lock:
            self.commands.append(body)
        if body.get("op") == "resend" and self.answer_resend:
            with self._lock:
                again = [r for n, r in sorted(self.sent.items()) if n >= body["from"]]
            # not on paho's thread: publish() waits for the broker's acknowledgements
            threading.Thread(target=self.publish, args=(again,), daemon=True).start()

    def online(self, record: int = 0, program: str = "test-program") -> None:
        payload = {"online": True, "program": program, "record": record}
        self.client.publish(
            self.t("online"), json.dumps(payload), qos=1, retain=True
        ).wait_for_publish(10)

    def state(self, status: dict[str, Any]) -> None:
        self.client.publish(
            self.t("state"), json.dumps(status), qos=1, retain=True
        ).wait_for_publish(10)

    def publish(self, records: Iterable[FloorRecord], *, skip: Iterable[int] = ()) -> None:
        """Publish records in order (keeping them for resends); ``skip`` ones are lost."""
        skipped = set(skip)
        infos = []
        for rec in records:
            with self._lock:
                self.sent[rec.record] = rec
            if rec.record not in skipped:
                infos.append(self.client.publish(self.t("event"), event_bytes(rec), qos=1))
        for info in infos:
            info.wait_for_publish(10)

    def drop(self) -> None:
        """Vanish without a goodbye: the broker publishes the will."""
        self.client.loop_stop()
        self.client.socket().close()  # type: ignore[union-attr]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


# --- the floor as a real process ------------------------------------------------------------
import http.client  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from urllib.parse import urlencode, urlsplit  # noqa: E402

from tests.support import read_line  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class FloorProcess:
    """``firebet floor`` as a real process; ``url`` once it listens."""

    def __init__(self, folder: Path, broker: Mosquitto, users: dict[str, str] | None = None,
                 extra: str = "", nofile: int | None = None,
                 env: dict[str, str] | None = None, user: str = "floor") -> None:  # fmt: skip
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        lines = [
            "[floor]", f'broker = "{broker.url}"',
            f'username = "{user}"',
            f'password_file = "{broker.password_file(user)}"', f'client_id = "{user}-test"',
            "gap_grace_s = 0.5", "resend_every_s = 2.0", extra, "[users]",
        ]  # fmt: skip
        lines += [f'{name} = "{encoded}"' for name, encoded in (users or {}).items()]
        self.config = folder / "floor.toml"
        self.config.write_text("\n".join(lines) + "\n")
        with open(folder / "floor.log", "ab") as log:
            self.proc = subprocess.Popen(
                # prlimit sets the open-file limit and execs the floor (the same pid)
                [*([] if nofile is None else ["prlimit", f"--nofile={nofile}:{nofile}"]),
                 sys.executable, "-m", "controller", "floor", "--config", str(self.config),
                 "--state-dir", str(folder / "state"), "--http", "127.0.0.1:0"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                env=None if env is None else {**os.environ, **env},
            )  # fmt: skip
        assert self.proc.stdout is not None
        line = read_line(self.proc.stdout, "firebet floor's start")
        if "console at " not in line:
            raise RuntimeError(f"firebet floor did not start: {line!r}; see {folder / 'floor.log'}")
        self.url = line.split("console at ")[1].split()[0].rstrip("/")
        if self.url.startswith("https://"):
            return  # the caller speaks TLS to it
        deadline = time.monotonic() + 30
        while not self.get("/healthz")["broker"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"firebet floor did not subscribe; see {folder / 'floor.log'}")
            time.sleep(0.05)

    def get(self, path: str) -> Any:
        """The JSON ``path`` answers (``/healthz``'s 503, a service that cannot serve,
        is read as its body like a 200)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:
            if path != "/healthz" or error.code != 503:
                raise
            with error:
                return json.loads(error.read())

    def page(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10) as reply:
            return str(reply.read().decode())

    def table(self, name: str) -> dict[str, Any] | None:
        for t in self.get("/api/tables"):
            if t["table"] == name:
                return t  # type: ignore[no-any-return]
        return None

    def peak_rss_mb(self) -> float:
        """The floor process's peak resident memory so far (VmHWM), in MB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM in /proc/PID/status")

    def log(self) -> str:
        return (self.folder / "floor.log").read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


def post_form(url: str, path: str, form: dict[str, str], cookie: str = "",
              headers: dict[str, str] | None = None) -> tuple[int, str, str]:  # fmt: skip
    """POST a form to the console; (status, Set-Cookie, body). Redirects are not followed."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    headers = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
    if cookie:
        headers["Cookie"] = cookie
    conn.request("POST", path, urlencode(form), headers)
    reply = conn.getresponse()
    body = reply.read().decode()
    conn.close()
    return reply.status, reply.getheader("Set-Cookie") or "", body


def login(url: str, user: str, password: str) -> str:
    """A surveillance session cookie (``name=value``) for the console at ``url``."""
    status, cookie, body = post_form(url, "/login", {"user": user, "password": password})
    assert status == 303, body
    return cookie.split(";")[0]


# --- a floor filled without a broker (the console's browser tests and screenshots) ---------
def fill_floor(
    db: Path, tables: dict[str, list[FloorRecord]], *, modes: dict[str, str] | None = None
) -> None:
    """Store each table's records (with its ``online`` and, when given, its mode) in the
    floor database ``db`` through the floor's own ingest, as if it had heard them."""
    from controller.floor.ingest import Ingest, Message
    from controller.floor.store import SqliteStore

    store = SqliteStore(db)
    try:
        ingest = Ingest(store, "firebet", lambda _t, _p: None)
        for name, records in tables.items():
            presence = {"online": True, "program": "test-program", "record": len(records)}
            batch = [Message(f"firebet/{name}/online", json.dumps(presence).encode())]
            mode = (modes or {}).get(name, "running")
            batch.append(Message(f"firebet/{name}/state", json.dumps({"mode": mode}).encode()))
            batch += [Message(f"firebet/{name}/event", event_bytes(r), qos=1) for r in records]
            ingest.handle(batch)
    finally:
        store.close()
