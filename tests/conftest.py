"""Fixtures every test module shares (the helpers behind them are in ``tests/support.py``).

- ``firebet``: run ``firebet ARGS`` as a real process, output captured.
- ``mock_factory``: a fresh gpiozero ``MockFactory`` (PWM-capable pins), with
  gpiozero's global default saved and restored around the test.
- ``running_table``: the whole controller in-process on a pseudo-terminal reader,
  a real journal file and the real control socket.
- ``wait_for``: poll a condition with a generous deadline (never a fixed sleep).
- ``mosquitto``: a real MQTT broker on a free local port with the example ACL
  (``tests/broker.py``), stopped afterwards.
- ``postgres``: a real PostgreSQL server on a free local port (``tests/postgres.py``), one
  for the session, started when a test first asks for it and stopped at the end;
  ``store_engine``: each floor store test once with SQLite and once with PostgreSQL
  (``open_store(tmp_path)`` opens the same store again, as a second floor service would).
- every test runs with ``$FIREBET_CONFIG`` naming a file that keeps the journal's
  key in the state directory (no test needs /etc), and behind the fence of
  ``tests/isolation/sitecustomize.py``: neither the test process nor any Python
  process it starts may open, make or delete anything under the host's
  ``/etc/firebet`` or ``/var/lib/firebet``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gpiozero import Device
from gpiozero.pins.mock import MockFactory, MockPWMPin

from tests import schemas, support
from tests.broker import Mosquitto
from tests.isolation import sitecustomize as fence
from tests.postgres import Postgres


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


@pytest.fixture(autouse=True, scope="session")
def _fenced_from_the_hosts_table() -> Iterator[None]:
    """This process and every Python process it starts (``$PYTHONPATH`` names the fence's
    ``sitecustomize``) fail on any use of the host's /etc/firebet or /var/lib/firebet."""
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", fence.ENV)}
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(support.FENCE_DIR), saved["PYTHONPATH"]) if p
    )
    os.environ[fence.ENV] = "1"
    fence.install()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_BEFORE = {folder: Path(folder).exists() for folder in fence.FENCED}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say so when the host's /etc/firebet or /var/lib/firebet appeared during the run. Not
    a failure: no fenced process can have made it, so it was another program on this
    machine (a package install, another suite), which no test here reads either."""
    made = [folder for folder, was in _BEFORE.items() if not was and Path(folder).exists()]
    if made:
        terminalreporter.write_line(
            f"note: the host's {', '.join(made)} appeared during this run, made by no test "
            "process (the fence refuses those): some other program on this machine"
        )


# the message makers whose every message a test makes is held to the shipped schemas:
# (module, name, schema); the originals are kept for the wrappers
_MESSAGE_MAKERS = (
    ("controller.link.link", "event_message", "floor-event"),
    ("controller.link.link", "state_message", "floor-state"),
    ("controller.link.link", "online_message", "floor-online"),
    ("controller.floor.ingest", "confirm_command", "floor-command"),
    ("controller.floor.ingest", "resend_command", "floor-command"),
    ("tests.floor_support", "event_message", "floor-event"),
)


def _checked(maker: Callable[..., Any], stem: str) -> Callable[..., Any]:
    def made(*args: Any, **kwargs: Any) -> Any:
        message = maker(*args, **kwargs)
        schemas.note(stem, message)
        return message

    return made


@pytest.fixture(autouse=True, scope="session")
def _full_checks_at_the_table_s_priority() -> Iterator[None]:
    """The tables the tests start in this process check their journal after READY at an
    ordinary priority: beside the busy loops the suite must pass with, a ``SCHED_IDLE``
    process gets no CPU at all and a test waiting for the check's answer would time out.
    ``tests/integration/test_full_check_priority.py`` holds the shipped priority."""
    from controller.service import recall

    saved, recall.IDLE_PRIORITY = recall.IDLE_PRIORITY, False
    try:
        yield
    finally:
        recall.IDLE_PRIORITY = saved


@pytest.fixture(autouse=True, scope="session")
def _messages_checked_against_the_schemas() -> Iterator[None]:
    """Every floor message the link, the floor or the helpers make is valid by its schema
    in ``controller/schemas/`` (issue 33): the suite's messages are the schemas' test."""
    import importlib

    with pytest.MonkeyPatch.context() as patch:
        for module, name, stem in _MESSAGE_MAKERS:
            owner = importlib.import_module(module)
            patch.setattr(owner, name, _checked(getattr(owner, name), stem))
        yield


@pytest.fixture(autouse=True)
def _no_message_off_its_schema() -> Iterator[None]:
    """A test fails when a message made during it was not valid by its schema."""
    schemas.failures.clear()
    yield
    found, schemas.failures[:] = list(schemas.failures), []
    assert not found, "messages not valid by controller/schemas/: " + "; ".join(found[:5])


@pytest.fixture
def firebet() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The ``firebet`` command as a real process: ``firebet("status", "--json")``."""
    return support.run_firebet


@pytest.fixture
def wait_for() -> Callable[..., None]:
    """Poll a condition until it holds (support.WAIT_DEADLINE_S by default)."""
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


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One real PostgreSQL server for the session (each test makes its own database)."""
    server = Postgres()
    server.start()  # stops what it started when it fails
    try:
        yield server
    finally:
        server.stop()


StoreOpener = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreOpener]:
    """Opens the floor's store, SQLite in ``tmp_path`` or a fresh PostgreSQL database (each
    call another connection to the same store); every store opened is closed after."""
    from controller.floor.pgstore import PostgresStore
    from controller.floor.store import SqliteStore

    opened: list[Any] = []
    if request.param == "sqlite":
        path = tmp_path / "floor.db"

        def opener() -> Any:
            opened.append(SqliteStore(path))
            return opened[-1]
    else:
        url = request.getfixturevalue("postgres").database()

        def opener() -> Any:
            opened.append(PostgresStore(url))
            return opened[-1]

    try:
        yield opener
    finally:
        for store in opened:
            store.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every end-to-end test starts real processes: mark it ``slow``."""
    for item in items:
        if "/tests/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.slow)
