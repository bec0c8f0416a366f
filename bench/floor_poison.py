"""The floor fed poison (issue 22): one table floods bad messages while another plays.

A real mosquitto (anonymous, bench/broker.py) and a real ``firebet floor``. Table
``BAD`` publishes ``--count`` messages (default 1,100) of six kinds no table should
send: JSON nested 5,000 deep, a record number above 2^63, NaN, bad UTF-8, a 4,001-digit
number and a 300 KB message; table ``OK`` publishes ``--records`` honest event messages
among them. It prints the floor's peak memory (VmHWM) before and after the flood,
whether every honest record arrived, what ``/healthz`` says and the bad count the
console shows.

    python bench/floor_poison.py [--count 1100] [--records 51]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import paho.mqtt.client as mqtt  # noqa: E402
from broker import Broker  # noqa: E402  (bench/broker.py)
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402

CHAIN = "ab" * 32


def poison(n: int) -> bytes:
    good = {"table": "BAD", "record": n + 1, "at": "2026-01-01T00:00:00.000Z",
            "kind": "command", "actor": "dealer", "payload": {}, "chain": CHAIN}  # fmt: skip
    kind = n % 6
    if kind == 0:
        return b"[" * 5000 + b"]" * 5000
    if kind == 1:
        return json.dumps({**good, "record": 2**63 + n}).encode()
    if kind == 2:
        return json.dumps({**good, "payload": {"x": float("nan")}}).encode()
    if kind == 3:
        return b'{"table": "BAD", "at": "\xff\xfe"}'
    if kind == 4:
        return json.dumps({**good, "payload": {"x": 10**4000}}).encode()
    return json.dumps({**good, "payload": "x" * 300_000}).encode()


def honest(n: int) -> bytes:
    """Record ``n`` of a table that only opens the game (the floor stores and folds it)."""
    body: dict[str, Any] = {"table": "OK", "record": n, "at": "2026-01-01T00:00:00.000Z",
                            "kind": "mode", "actor": "service", "payload": {"mode": "open"},
                            "chain": f"{n:064x}"}  # fmt: skip
    return json.dumps(body).encode()


def hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def get(url: str) -> Any:
    """The JSON ``url`` answers; ``/healthz``'s 503 (the service cannot serve yet) too."""
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as error:
        if error.code != 503:
            raise
        with error:
            return json.loads(error.read())


def client(port: int, name: str) -> mqtt.Client:
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=name)
    c.connect("127.0.0.1", port)
    c.loop_start()
    return c


def wait(what: str, ok: Any, deadline_s: float = 120) -> None:
    end = time.monotonic() + deadline_s
    while not ok():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1100)
    parser.add_argument("--records", type=int, default=51)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        broker = Broker(work, "max_inflight_messages 100\nmax_queued_messages 0\n")
        broker.start()
        (work / "floor.toml").write_text(
            f'[floor]\nbroker = "{broker.url}"\nclient_id = "bench-floor"\nhealth_after_s = 5.0\n'
        )
        with open(work / "floor.log", "wb") as log:
            floor = subprocess.Popen(
                [sys.executable, "-m", "controller", "floor", "--config",
                 str(work / "floor.toml"), "--state-dir", str(work / "floor"),
                 "--http", "127.0.0.1:0"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
            )  # fmt: skip
        try:
            assert floor.stdout is not None
            url = floor.stdout.readline().split("console at ")[1].split()[0].rstrip("/")
            wait("the floor to subscribe", lambda: get(url + "/healthz")["broker"])
            before = hwm_mb(floor.pid)
            bad, ok = client(broker.port, "bad"), client(broker.port, "ok")

            def flood() -> None:
                infos = [bad.publish("firebet/BAD/event", poison(n), qos=1)
                         for n in range(args.count)]  # fmt: skip
                for info in infos:
                    info.wait_for_publish(60)

            started = time.monotonic()
            flooding = threading.Thread(target=flood)
            flooding.start()
            for n in range(1, args.records + 1):
                ok.publish("firebet/OK/event", honest(n), qos=1).wait_for_publish(60)
            flooding.join()

            def tables() -> dict[str, Any]:
                return {t["table"]: t for t in get(url + "/api/tables")}

            wait(
                "every honest record", lambda: tables().get("OK", {}).get("record") == args.records
            )
            wait("every bad one counted", lambda: tables().get("BAD", {}).get("bad") == args.count)
            took = time.monotonic() - started
            after = hwm_mb(floor.pid)
            health = get(url + "/healthz")
            t = tables()
            print(f"poison messages: {args.count}, honest records: {args.records}")
            print(f"honest table OK: record {t['OK']['record']} of {args.records} "
                  f"in {took:.1f} s")  # fmt: skip
            print(f"table BAD: {t['BAD']['bad']} bad, quarantined: {t['BAD']['quarantined']}")
            print(f"/healthz ok={health['ok']} unacknowledged={health['unacknowledged']} "
                  f"problems={health['problems']}")  # fmt: skip
            print(f"floor peak memory (VmHWM): {before:.0f} MB before the flood, "
                  f"{after:.0f} MB after it")  # fmt: skip
            bad.disconnect()
            ok.disconnect()
        finally:
            floor.terminate()
            floor.wait(timeout=30)
            broker.stop()


if __name__ == "__main__":
    main()
