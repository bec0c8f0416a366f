"""The floor's ``/metrics`` scraped from a real ``firebet floor`` and parsed with the
Prometheus client's own parser; the example alert rules checked by ``promtool`` (#34).

Issue 34: nothing reported the fleet to the tools a casino's IT already runs; /healthz
always answered 200 and had to be read."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.broker import Mosquitto
from tests.floor_support import FloorProcess, Publisher, TableJournal, make_points
from tests.support import ROOT, wait_for

pytestmark = pytest.mark.slow

MONITORING = ROOT / "docs" / "monitoring"


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of ``/metrics``: name -> {sorted labels: value}."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = reply.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_show_each_table_and_the_floor(tmp_path: Path, mosquitto: Mosquitto) -> None:
    floor = FloorProcess(tmp_path / "floor", mosquitto)
    five = TableJournal(tmp_path / "t7.db", table="CR-07")
    five.do("bet 1 5", *make_points(4, 5, 6, 8, 9))
    records = five.records()
    cr07, cr08 = Publisher(mosquitto, "CR-07"), Publisher(mosquitto, "CR-08")
    try:
        cr07.online(record=len(records))
        cr07.publish(records[:-3])  # the last three not yet: behind
        cr08.online(record=0)
        cr08.client.publish("firebet/CR-08/event", b"not json", qos=1).wait_for_publish(10)
        cr08.drop()  # its will: offline
        wait_for(lambda: (floor.table("CR-08") or {}).get("online") is False
                 and (floor.table("CR-08") or {}).get("bad") == 1)  # fmt: skip
        cr07.answer_resend = False
        wait_for(lambda: (floor.table("CR-07") or {}).get("record") == len(records) - 3,
                 what=f"CR-07 at record {len(records) - 3}: {floor.table('CR-07')}")  # fmt: skip
        m = scrape(floor.url)
        t7, t8 = (("table", "CR-07"),), (("table", "CR-08"),)
        assert m["firebet_table_online"] == {t7: 1.0, t8: 0.0}
        assert m["firebet_table_record"][t7] == len(records) - 3
        assert m["firebet_table_lag_records"] == {t7: 3.0, t8: 0.0}
        assert m["firebet_table_bad_messages_total"] == {t7: 0.0, t8: 1.0}
        assert m["firebet_table_quarantined"] == {t7: 0.0, t8: 0.0}
        assert m["firebet_table_open_alerts"][(("kind", "offline"), ("table", "CR-08"))] == 1
        assert m["firebet_floor_broker_connected"] == {(): 1.0}
        assert m["firebet_floor_records_ingested_total"] == {(): len(records) - 3}
        assert m["firebet_floor_store_seconds_count"][()] >= 1
        assert m["firebet_floor_console_streams"] == {(("who", "pit"),): 0.0,
                                                      (("who", "surveillance"),): 0.0}  # fmt: skip
        assert m["firebet_table_surveillance_alert_open_seconds"][t7] == 0.0

        cr07.publish(records[-3:])  # the 5th point: an alert waiting for a person
        wait_for(lambda: floor.get("/api/alerts") != [] and any(
            a["kind"] == "surveillance" for a in floor.get("/api/alerts")))  # fmt: skip
        m = scrape(floor.url)
        assert m["firebet_table_lag_records"][t7] == 0.0
        assert m["firebet_table_open_alerts"][(("kind", "surveillance"), ("table", "CR-07"))] == 1
        assert m["firebet_table_surveillance_alert_open_seconds"][t7] > 0.0
    finally:
        cr07.close()
        floor.stop()


def exported_names() -> set[str]:
    """Every metric name the floor's collector and the tables' textfile can produce."""
    names: set[str] = set()
    for path in (ROOT / "controller" / "floor" / "metrics.py",
                 ROOT / "controller" / "service" / "textfile.py"):  # fmt: skip
        names |= set(re.findall(r'"(firebet_[a-z_]+)"', path.read_text()))
    return names


def test_the_alert_rules_and_dashboard_name_only_metrics_the_floor_exports() -> None:
    rules = (MONITORING / "firebet-alerts.yml").read_text()
    dashboard = json.loads((MONITORING / "grafana-floor.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = set(re.findall(r"\b(firebet_[a-z_]+)", rules + "\n".join(exprs)))
    base = {re.sub(r"_(total|bucket|count|sum)$", "", n) for n in used}
    assert base <= exported_names(), base - exported_names()
    assert {"firebet_table_online", "firebet_table_lag_records",
            "firebet_table_surveillance_alert_open_seconds"} <= base  # fmt: skip


NO_PROMTOOL = "promtool is not installed (Debian: apt-get install prometheus)"


@pytest.mark.skipif(shutil.which("promtool") is None, reason=NO_PROMTOOL)
def test_promtool_checks_the_alert_rules() -> None:
    done = subprocess.run(
        ["promtool", "check", "rules", str(MONITORING / "firebet-alerts.yml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr
