"""The floor's ``/metrics``: every table and the floor itself in Prometheus' text format.

Read at each scrape from what the ingest thread already keeps (its summaries, replaced
whole, so a scrape never waits for it) and from the store's open surveillance alerts;
the store's latency is a histogram the ingest thread feeds (:class:`FloorMetrics`).
Names and meanings are docs/floor.md's (Metrics); the example alert rules and Grafana
dashboard there use them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from controller.clock import now_ms
from controller.core.times import to_ms

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from controller.floor.server import FloorService

STORE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ALERT_KINDS = ("surveillance", "integrity", "audit", "offline", "quarantine")


class FloorMetrics:
    """The metrics of one floor service: its registry and the store's latency."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.store_seconds = Histogram(
            "firebet_floor_store_seconds",
            "Seconds one batch of messages took to store (one transaction)",
            buckets=STORE_BUCKETS,
            registry=self.registry,
        )
        self._watching: _Collector | None = None

    def watch(self, service: FloorService, streams: Callable[[], dict[str, int]]) -> None:
        """Report ``service``'s tables and floor at each scrape; ``streams``: the console's
        live streams by who holds them (``pit``, ``surveillance``)."""
        if self._watching is not None:  # a console made again for the same service
            self.registry.unregister(self._watching)
        self._watching = _Collector(service, streams)
        self.registry.register(self._watching)

    def text(self) -> tuple[bytes, str]:
        """The exposition and its content type (text 0.0.4: every Prometheus reads it)."""
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4


class _Collector(Collector):
    def __init__(self, service: FloorService, streams: Callable[[], dict[str, int]]) -> None:
        self.service = service
        self.streams = streams

    def collect(self) -> Iterator[Metric]:
        service = self.service
        ingest = service.ingest
        summaries = dict(ingest.summaries)  # replaced whole by the ingest thread
        online = GaugeMetricFamily(
            "firebet_table_online",
            "1 while the table is online (its will not sent)",
            labels=["table"],
        )
        record = GaugeMetricFamily(
            "firebet_table_record", "The table's newest record the floor holds in order",
            labels=["table"],
        )  # fmt: skip
        lag = GaugeMetricFamily(
            "firebet_table_lag_records",
            "Records the table has published that the floor does not hold in order yet",
            labels=["table"],
        )
        bad = CounterMetricFamily(
            "firebet_table_bad_messages", "Messages from the table counted bad, not stored",
            labels=["table"],
        )  # fmt: skip
        quarantined = GaugeMetricFamily(
            "firebet_table_quarantined", "1 while the table is quarantined", labels=["table"]
        )
        alerts = GaugeMetricFamily(
            "firebet_table_open_alerts", "Alerts that still need a person, by kind",
            labels=["table", "kind"],
        )  # fmt: skip
        for name, s in sorted(summaries.items()):
            online.add_metric([name], 1.0 if s.get("online") else 0.0)
            record.add_metric([name], float(s.get("record") or 0))
            lag.add_metric([name], float(max(0, (s.get("head") or 0) - (s.get("record") or 0))))
            bad.add_metric([name], float(s.get("bad") or 0))
            quarantined.add_metric([name], 1.0 if s.get("quarantined") else 0.0)
            counts = s.get("alerts") or {}
            for kind in ALERT_KINDS:
                alerts.add_metric([name, kind], float(counts.get(kind, 0)))
        yield from (online, record, lag, bad, quarantined, alerts)

        oldest = GaugeMetricFamily(
            "firebet_table_surveillance_alert_open_seconds",
            "How long the table's oldest open 5th-point alert has waited for a person (0: none)",
            labels=["table"],
        )
        waiting: dict[str, float] = dict.fromkeys(summaries, 0.0)
        now = now_ms()
        for alert in service.store.open_surveillance():
            raised = to_ms(alert.raised_at)
            if raised is not None:
                age = max(0.0, (now - raised) / 1000)
                waiting[alert.table] = max(waiting.get(alert.table, 0.0), age)
        for name, age in sorted(waiting.items()):
            oldest.add_metric([name], age)
        yield oldest

        health = service.health()
        yield CounterMetricFamily(
            "firebet_floor_records_ingested",
            "Records this floor service stored (its rate: the ingest rate)",
            value=float(ingest.ingested),
        )
        yield GaugeMetricFamily(
            "firebet_floor_broker_connected", "1 while subscribed to the broker",
            value=1.0 if health["broker"] else 0.0,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "firebet_floor_unacknowledged_messages",
            "Messages received and not yet stored (or counted bad)",
            value=float(health["unacknowledged"]),
        )
        yield GaugeMetricFamily(
            "firebet_floor_oldest_unacknowledged_seconds",
            "How long the oldest of them has waited",
            value=float(health["oldest_unacknowledged_s"]),
        )
        yield GaugeMetricFamily(
            "firebet_floor_tables", "Tables the floor has heard of", value=float(len(summaries))
        )
        streams = GaugeMetricFamily(
            "firebet_floor_console_streams", "The console's open live streams (/events)",
            labels=["who"],
        )  # fmt: skip
        for who, count in sorted(self.streams().items()):
            streams.add_metric([who], float(count))
        yield streams
