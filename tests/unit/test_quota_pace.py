"""The full check paces itself to half its cgroup's CPU quota (issue 31): at idle priority
it still spends the quota the table shares, and every roll waited for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.service import recall
from controller.service.recall import QuotaPace, cgroup_quota


def write(path: Path, text: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, value in (line.split("=", 1) for line in text.split(";")):
        (path / name).write_text(value + "\n")


def test_v2_the_tightest_quota_over_the_cgroup_and_its_parents(tmp_path: Path) -> None:
    write(tmp_path / "system.slice", "cpu.max=50000 100000")
    write(tmp_path / "system.slice" / "firebet.service", "cpu.max=10000 100000")
    assert cgroup_quota("0::/system.slice/firebet.service", tmp_path) == pytest.approx(0.1)
    write(tmp_path / "system.slice" / "firebet.service", "cpu.max=max 100000")
    assert cgroup_quota("0::/system.slice/firebet.service", tmp_path) == pytest.approx(0.5)


def test_v1_the_cpu_controller_s_quota(tmp_path: Path) -> None:
    write(tmp_path / "cpu" / "table", "cpu.cfs_quota_us=1000;cpu.cfs_period_us=10000")
    text = "4:memory:/x\n1:cpu:/table\n0::/"
    assert cgroup_quota(text, tmp_path) == pytest.approx(0.1)
    write(tmp_path / "cpu" / "table", "cpu.cfs_quota_us=-1;cpu.cfs_period_us=100000")
    assert cgroup_quota(text, tmp_path) is None


def test_no_cgroup_files_no_quota(tmp_path: Path) -> None:
    assert cgroup_quota("0::/nowhere", tmp_path) is None
    assert cgroup_quota("", tmp_path) is None


def test_the_pace_sleeps_what_it_is_ahead_of_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"cpu": 0.0, "wall": 0.0}
    slept: list[float] = []
    monkeypatch.setattr(recall.time, "process_time", lambda: clock["cpu"])
    monkeypatch.setattr(recall.time, "monotonic", lambda: clock["wall"])
    monkeypatch.setattr(recall.time, "sleep", slept.append)
    pace = QuotaPace(0.1)  # half of 10%: 50 ms of CPU a second of wall time
    clock["cpu"], clock["wall"] = 0.010, 0.010  # 10 ms of CPU is 0.2 s of its share: 0.19 s ahead
    pace(256, 1000)
    assert slept == [pytest.approx(0.19)]
    clock["wall"] = 3.0  # behind its share now: runs on
    pace(512, 1000)
    assert len(slept) == 1
    unpaced = QuotaPace(None)
    clock["cpu"] = 100.0
    unpaced(768, 1000)
    assert len(slept) == 1


def test_a_history_request_paces_itself_under_a_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history reader read its records in one burst, which at a Pi's quota took the
    period's CPU from the rolls (bench/after_ready.py --history: 17 to 21 rolls over 20 ms
    around a request before the reader was a copy, 2 once after): it now looks at its
    pace between batches of records when there is a quota, and not at all when there is
    none."""
    from controller.core.commands import Roll
    from controller.core.engine import Engine
    from controller.journal import Journal, recover
    from controller.journal.play import decide

    rules = Engine().rules
    path = tmp_path / "journal.db"
    with Journal(path) as journal:
        replayed = recover(journal, rules).replay
        for i in range(700):  # more than two batches of records
            decide(journal, replayed, Roll(1 + i % 6, 1 + (i // 6) % 6, seq=i))
    looks: list[float | None] = []

    class Counted(QuotaPace):
        def __call__(self, done: int, total: int) -> None:
            looks.append(self.rate)
            super().__call__(done, total)

    def forget() -> None:  # the worker's connections to this journal
        for following in recall._following.values():
            following.close()
        recall._following.clear()

    monkeypatch.setattr(recall, "QuotaPace", Counted)
    monkeypatch.setattr(recall, "own_quota", lambda: 1000.0)  # a quota, never reached
    try:
        kind, reply = recall._answer(str(path), rules, 200, 1e12, 700)
        assert kind == "ok" and isinstance(reply, bytes) and looks
        assert all(rate == pytest.approx(500.0) for rate in looks)
        looks.clear()
        forget()
        monkeypatch.setattr(recall, "own_quota", lambda: None)  # no quota: no pace
        assert recall._answer(str(path), rules, 200, 1e12, 700)[0] == "ok"
        assert looks == []
    finally:
        forget()
