"""Log lines (issue 14): time-stamped in the foreground; under systemd, journald's native
protocol with fields to filter on."""

from __future__ import annotations

import io
import logging
import os
import re
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli import logs


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
            if h not in handlers:
                h.close()
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)


def parse(datagram: bytes) -> dict[str, str]:
    """journald's native protocol: KEY=value lines, or KEY, a 64-bit length and the bytes."""
    fields, rest = {}, datagram
    while rest:
        line, _, after = rest.partition(b"\n")
        if b"=" in line:
            key, _, value = line.partition(b"=")
            fields[key.decode()] = value.decode()
            rest = after
        else:
            (size,) = struct.unpack("<Q", after[:8])
            fields[line.decode()] = after[8 : 8 + size].decode()
            rest = after[8 + size + 1 :]
    return fields


def test_foreground_lines_carry_the_time(restore_root: None) -> None:
    out = io.StringIO()
    logs.configure(table="CR-07", stream=out, environ={})
    logging.getLogger("firebet.test").warning("reader fault %s", "CAMERA")
    line = out.getvalue().splitlines()[0]
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}"
    assert re.fullmatch(stamp + r" WARNING firebet\.test: reader fault CAMERA", line), line


def test_under_systemd_records_go_to_the_journal_with_fields(
    tmp_path: Path, restore_root: None
) -> None:
    journal = tmp_path / "journal.socket"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(journal))
    receiver.settimeout(10)
    stream = open(tmp_path / "stderr", "w")  # noqa: SIM115 - the journal's stream stands in
    try:
        st = os.fstat(stream.fileno())
        environ = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        handler = logs.configure(table="CR-07", stream=stream, journal=journal, environ=environ)
        assert isinstance(handler, logs.JournalHandler)
        log = logging.getLogger("drivers.serial_reader")
        log.warning("dice reader fault %s", "PORT_LOST", extra={"fields": {"fault": "PORT_LOST"}})
        fields = parse(receiver.recv(65536))
        try:
            raise ValueError("line one\nline two")
        except ValueError:
            log.exception("driver failed")
        failure = parse(receiver.recv(65536))
    finally:
        receiver.close()
        stream.close()
    assert fields["MESSAGE"] == "dice reader fault PORT_LOST"
    assert fields["PRIORITY"] == "4" and fields["SYSLOG_IDENTIFIER"] == "firebet"
    assert fields["LOGGER"] == "drivers.serial_reader" and fields["FIREBET_TABLE"] == "CR-07"
    assert fields["FIREBET_FAULT"] == "PORT_LOST"
    assert fields["CODE_FILE"].endswith("test_logs.py") and fields["CODE_FUNC"]
    assert failure["PRIORITY"] == "3"
    assert failure["MESSAGE"].startswith("driver failed\nTraceback")
    assert "line one\nline two" in failure["MESSAGE"]
    assert (tmp_path / "stderr").read_text() == ""  # nothing doubled on the stream


def test_a_journal_stream_of_another_file_is_not_ours(tmp_path: Path) -> None:
    with open(tmp_path / "f", "w") as stream:
        assert not logs.under_journald(stream, {"JOURNAL_STREAM": "1:2"})
        assert not logs.under_journald(stream, {})
