"""The floor console under attack: the real ``firebet floor``'s peak memory (VmHWM).

Three phases, each against a fresh ``firebet floor`` on a real mosquitto (the tests'
broker with its ACL, ``tests/broker.py``):

* body: a 1 GB ``POST /login`` body, declared (Content-Length) and chunked, pushed by a
  client that never reads the answer;
* slowloris: 1,100 connections that send a request head a byte at a time, under the
  usual open-file limit (1024, soft and hard); ``/healthz`` and ``/`` timed meanwhile;
* streams: 10 ``/events`` streams that never read while a table publishes records.

    python bench/floor_attacks.py [--slow-s 30] [--stream-s 30]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.broker import Mosquitto  # noqa: E402
from tests.floor_support import FloorProcess, Publisher, TableJournal, make_points  # noqa: E402

MB = 1024 * 1024


def rss_mb(floor: FloorProcess, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{floor.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def connect(floor: FloorProcess, rcvbuf: int | None = None) -> socket.socket:
    parts = urlsplit(floor.url)
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((parts.hostname or "", parts.port or 0))
    return sock


def push(floor: FloorProcess, head: bytes, total: int, frame: bytes = b"") -> int:
    """Send ``head`` then up to ``total`` bytes of body without reading; bytes taken."""
    sock = connect(floor)
    sent = 0
    block = frame or b"x" * MB
    try:
        sock.sendall(head)
        while sent < total:
            sent += sock.send(block)
    except OSError:
        pass
    sock.close()
    return sent


def timed_get(url: str) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=30) as reply:
        reply.read()
    return time.monotonic() - started


def body(folder: Path, broker: Mosquitto) -> None:
    floor = FloorProcess(folder, broker)
    try:
        before, peak_before = rss_mb(floor), rss_mb(floor, "VmHWM")
        declared = push(
            floor, b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n", 1 << 30
        )
        frame = b"100000\r\n" + b"y" * MB + b"\r\n"
        chunked = push(
            floor, b"POST /login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            1 << 30, frame,
        )  # fmt: skip
        timed_get(floor.url + "/healthz")
        print(
            f"1 GB login body: the floor took {declared / MB:.1f} MB (declared) and "
            f"{chunked / MB:.1f} MB (chunked) before closing; RSS {before:.1f} MB before (peak "
            f"{peak_before:.1f} MB), "
            f"peak {rss_mb(floor, 'VmHWM'):.1f} MB"
        )
    finally:
        floor.stop()


def slowloris(folder: Path, broker: Mosquitto, seconds: float) -> None:
    floor = FloorProcess(folder, broker, nofile=1024)
    slow: list[socket.socket] = []
    try:
        before, peak_before = rss_mb(floor), rss_mb(floor, "VmHWM")
        for _ in range(1100):
            try:
                sock = connect(floor)
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
                sock.setblocking(False)
                slow.append(sock)
            except OSError:
                pass
        answers: list[float] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.send(b"X")
            answers += [timed_get(floor.url + "/healthz"), timed_get(floor.url + "/")]
            time.sleep(1)
        print(
            f"1,100 slow connections for {seconds:.0f} s (open files 1024): /healthz and / "
            f"answered in median {statistics.median(answers) * 1000:.0f} ms, max "
            f"{max(answers) * 1000:.0f} ms ({len(answers)} requests); RSS {before:.1f} MB "
            f"before (peak {peak_before:.1f} MB), peak {rss_mb(floor, 'VmHWM'):.1f} MB"
        )
    finally:
        for sock in slow:
            sock.close()
        floor.stop()


def streams(folder: Path, broker: Mosquitto, seconds: float) -> None:
    floor = FloorProcess(folder, broker)
    table = Publisher(broker, "CR-07")
    journal = TableJournal(folder / "table.db", table="CR-07")
    idle = []
    try:
        before, peak_before = rss_mb(floor), rss_mb(floor, "VmHWM")
        for _ in range(10):
            sock = connect(floor, rcvbuf=4096)
            sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            idle.append(sock)
        table.online(record=0)
        published = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            journal.do("bet 1 5", *make_points(4, 5, 6, 8, 9, 10), "3 4")
            records = journal.records(published + 1)
            table.publish(records)
            published = records[-1].record
        wait = time.monotonic() + 60
        while (floor.table("CR-07") or {}).get("record") != published:
            if time.monotonic() > wait:
                break
            time.sleep(0.1)
        dropped = floor.log().count("dropped a live stream")
        print(
            f"10 idle event streams, {published} records in {seconds:.0f} s: "
            f"{dropped} streams dropped; RSS {before:.1f} MB before (peak {peak_before:.1f} "
            "MB), peak "
            f"{rss_mb(floor, 'VmHWM'):.1f} MB, {rss_mb(floor):.1f} MB after"
        )
    finally:
        for sock in idle:
            sock.close()
        table.close()
        journal.close()
        floor.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow-s", type=float, default=30.0)
    parser.add_argument("--stream-s", type=float, default=30.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="floor-attacks-"))
    broker = Mosquitto(work / "mosquitto")
    broker.start()
    try:
        body(work / "body", broker)
        slowloris(work / "slowloris", broker, args.slow_s)
        streams(work / "streams", broker, args.stream_s)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
