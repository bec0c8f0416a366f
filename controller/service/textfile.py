"""The table in node_exporter's textfile collector format (``[metrics] textfile_dir``).

Every :data:`EVERY_S` seconds a thread writes ``firebet-<table id>.prom`` in the
configured directory, whole (prometheus_client writes a temporary file and renames it,
so node_exporter never reads half a file), from ``status --json``: the table's mode,
how long since its rolls meter last moved, its faults and its meters. Names and
meanings: docs/runbook.md (Metrics).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from controller.core.lamps import Mode

log = logging.getLogger("firebet.service")
EVERY_S = 15.0


def textfile_path(directory: str | Path, table: str) -> Path:
    """Where the table's metrics go."""
    return Path(directory) / f"firebet-{table}.prom"


class _Status(Collector):
    def __init__(self, status: Mapping[str, Any], roll_age_s: float) -> None:
        self.status = status
        self.roll_age_s = roll_age_s

    def collect(self) -> Iterator[Metric]:
        s = self.status
        table = str(s["table"])
        mode = GaugeMetricFamily(
            "firebet_table_mode", "1 for the table's mode now", labels=["table", "mode"]
        )
        for m in Mode:
            mode.add_metric([table, m.value], 1.0 if s.get("mode") == m.value else 0.0)
        yield mode
        age = GaugeMetricFamily(
            "firebet_table_last_roll_age_seconds",
            "Seconds since the table's rolls meter last moved (since the service started, "
            "when it has not)",
            labels=["table"],
        )
        age.add_metric([table], self.roll_age_s)
        yield age
        reader = s.get("reader") or {}
        connected = GaugeMetricFamily(
            "firebet_table_reader_connected", "1 while the dice reader is connected",
            labels=["table"],
        )  # fmt: skip
        connected.add_metric([table], 1.0 if reader.get("connected") else 0.0)
        yield connected
        fault = GaugeMetricFamily(
            "firebet_table_reader_fault", "1 while the dice reader reports a fault",
            labels=["table"],
        )  # fmt: skip
        fault.add_metric([table], 1.0 if reader.get("fault") else 0.0)
        yield fault
        meters = s.get("meters") or {}
        for name, help_text in (
            ("hands", "Hands played"),
            ("rolls", "Rolls accepted"),
            ("points_made", "Points made"),
            ("voids", "Rolls voided"),
            ("surrenders", "Surrenders"),
            ("faults", "Reader faults journaled"),
        ):
            c = CounterMetricFamily(f"firebet_table_{name}", help_text, labels=["table"])
            c.add_metric([table], float(meters.get(name) or 0))
            yield c
        for name, key, help_text in (
            ("bets_taken", "bets_taken", "Fire bets taken"),
            ("bets_cancelled", "bets_cancelled", "Fire bets cancelled"),
            ("lost", "lost", "Fire bets lost"),
        ):
            part = meters.get(key) or {}
            count = CounterMetricFamily(f"firebet_table_{name}", help_text, labels=["table"])
            count.add_metric([table], float(part.get("count") or 0))
            yield count
            amount = CounterMetricFamily(
                f"firebet_table_{name}_dollars", help_text + " (dollars)", labels=["table"]
            )
            amount.add_metric([table], float(part.get("amount") or 0))
            yield amount
        paid = CounterMetricFamily(
            "firebet_table_paid_dollars", "Fire bets paid (dollars), by tier (points made)",
            labels=["table", "tier"],
        )  # fmt: skip
        for tier, part in sorted((meters.get("paid") or {}).items()):
            paid.add_metric([table, str(tier)], float(part.get("amount") or 0))
        yield paid


def write_textfile(directory: str | Path, status: Mapping[str, Any], roll_age_s: float) -> Path:
    """Write the table's metrics file once; its path."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Status(status, roll_age_s))
    path = textfile_path(directory, str(status["table"]))
    write_to_textfile(str(path), registry)
    return path


class TextfileWriter:
    """Writes the table's metrics every :data:`EVERY_S` until ``stopping`` is set."""

    def __init__(
        self,
        directory: str | Path,
        status: Callable[[], Mapping[str, Any]],
        stopping: threading.Event,
        *,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Path(directory)
        self.status = status
        self.stopping = stopping
        self.every_s = every_s
        self.clock = clock
        self._rolls: int | None = None
        self._moved = clock()
        self.failures = 0

    def once(self) -> Path | None:
        """One write (None while the service is still starting, or when it failed)."""
        status = self.status()
        if "table" not in status:
            return None
        rolls = int((status.get("meters") or {}).get("rolls") or 0)
        now = self.clock()
        if rolls != self._rolls:
            if self._rolls is not None:
                self._moved = now
            self._rolls = rolls
        try:
            return write_textfile(self.directory, status, now - self._moved)
        except OSError as exc:
            self.failures += 1
            if self.failures in (1, 100) or self.failures % 1000 == 0:
                log.warning("cannot write the metrics file in %s: %s", self.directory, exc)
            return None

    def run(self) -> None:
        while not self.stopping.is_set():
            self.once()
            self.stopping.wait(self.every_s)
