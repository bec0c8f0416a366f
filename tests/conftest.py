"""Fixtures every test module shares (the helpers behind them are in ``tests/support.py``).

- ``firebet``: run ``firebet ARGS`` as a real process, output captured.
- ``mock_factory``: a fresh gpiozero ``MockFactory`` (PWM-capable pins), with
  gpiozero's global default saved and restored around the test.
- ``running_table``: the whole controller in-process on a pseudo-terminal reader,
  a real journal file and the real control socket.
- ``wait_for``: poll a condition with a generous deadline (never a fixed sleep).
- ``mosquitto``: a real MQTT broker on a free local port with the example ACL
  (``tests/broker.py``), stopped afterwards.
- every test runs with ``$FIREBET_CONFIG`` naming a file that keeps the journal's
  key in the state directory (no test needs /etc).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gpiozero import Device
from gpiozero.pins.mock import MockFactory, MockPWMPin

from tests import support
from tests.broker import Mosquitto


@pytest.fixture(autouse=True, scope="session")
def _journal_key_beside_the_journal(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """The tests never touch /etc: ``$FIREBET_CONFIG`` names a file whose only key puts the
    journal's secret in each state directory (``[journal] key_file = "journal.key"``)."""
    config = tmp_path_factory.mktemp("config") / "table.toml"
    config.write_text(support.TEST_CONFIG, encoding="utf-8")
    saved = os.environ.get("FIREBET_CONFIG")
    os.environ["FIREBET_CONFIG"] = str(config)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("FIREBET_CONFIG", None)
        else:
            os.environ["FIREBET_CONFIG"] = saved


SYSTEM_FOLDER = Path("/etc/firebet")
_SYSTEM_FOLDER_BEFORE = SYSTEM_FOLDER.exists()


@pytest.fixture(autouse=True)
def _nothing_written_to_etc(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that leaves /etc/firebet behind breaks later tests (and a real table's
    permissions): fail the test that made it, by name, and take it away again."""
    yield
    if not _SYSTEM_FOLDER_BEFORE and SYSTEM_FOLDER.exists():
        made = sorted(str(p) for p in SYSTEM_FOLDER.rglob("*"))
        subprocess.run(["rm", "-rf", str(SYSTEM_FOLDER)], check=False)
        pytest.fail(f"{request.node.nodeid} wrote {SYSTEM_FOLDER}: {made}")


@pytest.fixture
def firebet() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The ``firebet`` command as a real process: ``firebet("status", "--json")``."""
    return support.run_firebet


@pytest.fixture
def wait_for() -> Callable[..., None]:
    """Poll a condition until it holds (30 s deadline by default)."""
    return support.wait_for


@pytest.fixture
def mock_factory() -> Iterator[MockFactory]:
    """A fresh MockFactory; gpiozero's global default is restored afterwards."""
    saved = Device.pin_factory
    factory = MockFactory(pin_class=MockPWMPin)
    try:
        yield factory
    finally:
        factory.close()
        Device.pin_factory = saved


@pytest.fixture
def running_table(tmp_path: Path) -> Iterator[support.RunningTable]:
    """A running controller on a simulated reader over a pty, mock pins, a real journal."""
    with support.table_running(tmp_path / "state", tmp_path / "control.sock") as table:
        yield table


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A real mosquitto on a free local port with the example ACL, stopped afterwards."""
    broker = Mosquitto(tmp_path / "mosquitto")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every end-to-end test starts real processes: mark it ``slow``."""
    for item in items:
        if "/tests/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.slow)
