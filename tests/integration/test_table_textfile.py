"""A running table with ``[metrics] textfile_dir`` writes node_exporter's textfile (#34)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from controller.core.config import MetricsConfig
from tests.support import table_config, table_running, wait_for


def test_a_running_table_writes_its_metrics_file(tmp_path: Path) -> None:
    folder = tmp_path / "node-exporter"
    folder.mkdir()
    config = replace(table_config(), metrics=MetricsConfig(str(folder)))
    with table_running(tmp_path / "state", tmp_path / "control.sock", config):
        path = folder / f"firebet-{config.table.id}.prom"
        wait_for(path.exists, what="the table's metrics file")
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(path.read_text())
            for s in family.samples
        }
    table = ("table", config.table.id)
    assert samples[("firebet_table_mode", (("mode", "running"), table))] == 1.0
    assert ("firebet_table_reader_connected", (table,)) in samples  # at start: either
    assert ("firebet_table_faults_total", (table,)) in samples
    assert [p.name for p in folder.iterdir()] == [path.name]
