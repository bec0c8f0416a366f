"""The table's node_exporter textfile (``[metrics] textfile_dir``): its mode, last roll
age, faults and meters, parsed with the Prometheus client's own parser (#34)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from controller.core.config import load_config
from controller.service.textfile import TextfileWriter, textfile_path


def samples(path: Path) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def status(mode: str, rolls: int) -> dict[str, Any]:
    return {
        "table": "CR-07", "mode": mode,
        "reader": {"connected": True, "fault": None},
        "meters": {
            "hands": 3, "rolls": rolls, "points_made": 7, "voids": 1, "surrenders": 0,
            "faults": 2, "bets_taken": {"count": 4, "amount": 20},
            "bets_cancelled": {"count": 1, "amount": 5}, "lost": {"count": 2, "amount": 10},
            "paid": {"4": {"count": 1, "amount": 120}},
        },
    }  # fmt: skip


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_textfile_has_the_mode_the_last_roll_age_the_faults_and_the_meters(
    tmp_path: Path,
) -> None:
    now: dict[str, Any] = {"status": {"ok": False, "error": "the service is still starting"}}
    clock = Clock()
    writer = TextfileWriter(tmp_path, lambda: now["status"], threading.Event(), clock=clock)
    assert writer.once() is None  # nothing while starting
    now["status"] = status("running", 10)
    assert writer.once() == textfile_path(tmp_path, "CR-07")
    clock.now += 40
    path = writer.once()
    assert path is not None and path.name == "firebet-CR-07.prom"
    m = samples(path)
    t = (("table", "CR-07"),)
    assert m["firebet_table_mode"][(("mode", "running"), ("table", "CR-07"))] == 1.0
    assert m["firebet_table_mode"][(("mode", "halted"), ("table", "CR-07"))] == 0.0
    assert m["firebet_table_last_roll_age_seconds"][t] == 40.0
    assert m["firebet_table_faults_total"][t] == 2.0
    assert m["firebet_table_rolls_total"][t] == 10.0
    assert m["firebet_table_bets_taken_dollars_total"][t] == 20.0
    assert m["firebet_table_paid_dollars_total"][(("table", "CR-07"), ("tier", "4"))] == 120.0
    assert m["firebet_table_reader_connected"][t] == 1.0
    now["status"] = status("halted", 11)  # a roll, then a halt
    clock.now += 5
    m = samples(writer.once() or tmp_path)
    assert m["firebet_table_last_roll_age_seconds"][t] == 0.0
    assert m["firebet_table_mode"][(("mode", "halted"), ("table", "CR-07"))] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["firebet-CR-07.prom"]  # no leftovers


def test_a_directory_it_cannot_write_is_counted_not_fatal(tmp_path: Path) -> None:
    writer = TextfileWriter(tmp_path / "missing", lambda: status("running", 1), threading.Event())
    assert writer.once() is None and writer.failures == 1


def test_the_textfile_dir_is_a_declared_key(tmp_path: Path) -> None:
    path = tmp_path / "table.toml"
    path.write_text('[metrics]\ntextfile_dir = "/var/lib/prometheus/node-exporter"\n')
    assert load_config(path).metrics.textfile_dir == "/var/lib/prometheus/node-exporter"
    assert load_config(None).metrics.textfile_dir == ""
