"""Fixtures of the control socket's tests (test_control*.py): a socket path and two makers
of started servers, stopped when the test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.control.server import ControlServer
from tests.control_support import GatedRecorder, Recorder, dealer
from tests.support import control_servers


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    """Where the test's control socket is bound."""
    return tmp_path / "control.sock"


@pytest.fixture
def make_server(sock_path: Path) -> Iterator[Callable[..., ControlServer]]:
    """Servers answering with an echo of each request (:class:`Recorder`)."""
    with control_servers(sock_path, Recorder) as make:
        yield make


@pytest.fixture
def serve(sock_path: Path) -> Iterator[Callable[..., ControlServer]]:
    """Servers that see every peer as a dealer and answer with :class:`GatedRecorder`."""
    with control_servers(sock_path, GatedRecorder, identify=dealer, service_uid=999) as make:
        yield make
