"""Floor-link benchmark: records per second, catch-up of a backlog, roll ACK with the link on.

    .venv/bin/python bench/floorlink.py [--backlog 100000] [--rolls 2000]

Starts its own mosquitto (anonymous, on a free local port, in a temporary folder).

1. Catch-up: a journal of ``--backlog`` records (built by bench/journal.py's bulk path)
   and a floor link starting from cursor 0, in this process; a subscriber on the broker
   counts the records. Prints the time until the broker acknowledged the last record
   (the durable cursor reaches the head), the records per second the link sustains, and
   this process's resident memory before and after (it must not grow with the backlog).
2. Roll ACK: bench/latency.py's frame -> ACK round trip through `firebet run`, with the
   link off, with the link on (broker up), and with the link on and the broker down.

Figures, not assertions.
"""

from __future__ import annotations

import argparse
import getpass
import importlib.util
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import paho.mqtt.client as mqtt  # noqa: E402
from broker import Broker  # noqa: E402  (bench/broker.py)
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402

from controller.core.config import FireBetRules, FloorConfig  # noqa: E402
from controller.link.link import FloorLink  # noqa: E402


def sibling(name: str) -> ModuleType:
    """bench/<name>.py as a module (the benches are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Counter:
    """Counts the records arriving on ``firebet/+/event``."""

    def __init__(self, broker: Broker) -> None:
        self.count = 0
        self.last = 0
        self.ready = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-floor")
        self.client.on_connect = lambda c, *a: (c.subscribe("firebet/+/event", 1), self.ready.set())
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        self.ready.wait(30)

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        self.count += 1
        self.last = max(self.last, int(message.payload.split(b'"record":', 1)[1].split(b",")[0]))

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def catch_up(broker: Broker, work: Path, backlog: int) -> None:
    state = work / "catchup"
    state.mkdir()
    built = sibling("journal").build(state / "journal.db", backlog)
    print(f"catch-up: a backlog of {backlog:,} records (journal built in {built:.1f} s)")
    counter = Counter(broker)
    floor = FloorConfig(broker=broker.url)
    link = FloorLink(
        floor, "BENCH-1", state / "journal.db", state,
        status=lambda: {"table": "BENCH-1"}, post=lambda command: None, program="bench",
        rules=FireBetRules(),
    )  # fmt: skip
    before = rss_mb()
    peak = before
    t0 = time.perf_counter()
    link.start()
    while link.cursor.record < backlog:
        time.sleep(0.01)
        peak = max(peak, rss_mb())
    seconds = time.perf_counter() - t0
    while counter.last < backlog and time.perf_counter() - t0 < seconds + 30:
        time.sleep(0.01)
    link.stop()
    counter.close()
    print(f"  all {backlog:,} acknowledged by the broker in {seconds:.1f} s: "
          f"{backlog / seconds:,.0f} records/s sustained")  # fmt: skip
    print(f"  the floor subscriber heard {counter.count:,} messages (last record {counter.last:,})")
    print(f"  this process's memory: {before:.1f} MB before, peak {peak:.1f} MB during "
          f"(in flight at most {link.window} records)")  # fmt: skip


def ack_latency(broker: Broker, work: Path, rolls: int) -> None:
    latency = sibling("latency")

    def report(label: str, config: Path | None, folder: str) -> None:
        (work / folder).mkdir()
        ms, _, memory = latency.measure(rolls, 1, config, work / folder)
        ms.sort()
        p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
        print(f"  {label:<28} p50 {p(0.5):5.2f} ms  p99 {p(0.99):5.2f} ms  max {ms[-1]:6.2f} ms"
              f"  ({len(ms)} rolls, service {memory:.0f} MB)")  # fmt: skip

    on = work / "floor-on.toml"
    on.write_text(
        f'[table]\nid = "BENCH-2"\n[journal]\nkey_file = "journal.key"\n'
        f'[floor]\nbroker = "{broker.url}"\n'
    )
    print(f"roll ACK (ROLL frame -> journal -> lamps -> ACK through firebet run), {rolls} rolls")
    report("link off", None, "off")
    report("link on, broker up", on, "on")
    broker.stop()
    report("link on, broker down", on, "down")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--rolls", type=int, default=2000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="firebet-floorlink-"))
    broker = Broker(
        work, f"max_queued_messages 0\nmax_inflight_messages 0\nuser {getpass.getuser()}\n"
    )
    broker.start()
    try:
        catch_up(broker, work, args.backlog)
        ack_latency(broker, work, args.rolls)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
