"""The console's live stream in a flood: the ingest thread's many batches become one
render a frame (#34). Issue 34: during a flood the console lagged p50 2-5.8 s, p99
7-14 s, rendering and sending every tile of every batch on the ingest thread."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from controller.floor.console import FRAME_S, Console
from controller.floor.live import Changes
from controller.floor.settings import FloorSettings
from tests.support import wait_for


def test_a_flood_of_batches_is_one_render_a_frame_off_the_ingest_thread() -> None:
    service = SimpleNamespace(settings=FloorSettings())
    console = Console(service)  # type: ignore[arg-type]
    renders: list[tuple[Changes, str]] = []
    console.render = lambda c: renders.append((c, threading.current_thread().name))  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        for n in range(2000):  # a flood: a batch for each of 20 tables, 100 times
            console.on_changes(Changes(tables={f"T{n % 20}"}, records={f"T{n % 20}": n}))
        fed = time.monotonic() - started
        wait_for(lambda: renders and renders[-1][0].records.get("T19") == 1999,
                 what="the last batch rendered")  # fmt: skip
        took = time.monotonic() - started
        assert len(renders) <= took / FRAME_S + 2, (len(renders), took)
        assert len(renders) < 200  # not one a batch
        assert set().union(*(c.tables for c, _ in renders)) == {f"T{n}" for n in range(20)}
        assert {name for _, name in renders} == {"console-frames"}  # never the ingest's
        assert fed < 2.0  # the ingest thread only hands the changes over
    finally:
        console.close()
