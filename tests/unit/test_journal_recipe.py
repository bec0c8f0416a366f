"""The journal's record recipe: commands written lean and read back exactly."""

from __future__ import annotations

import hmac
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.commands import (
    Ack,
    Bet,
    Cancel,
    Command,
    ReaderFault,
    ReaderHello,
    ReaderOk,
    RecordFault,
    Roll,
    Surrender,
    Void,
)
from controller.journal.recipe import (
    decode_body,
    decode_command,
    encode_command,
    iso,
    sealer,
    to_ms,
)

AT = to_ms("2026-11-30T08:15:00.123+00:00") or 0

COMMANDS: list[Command] = [
    Roll(3, 4, seq=17, actor="reader", at=iso(AT)),
    Roll(6, 6, seq=65535, actor="reader", at=iso(AT)),
    Roll(1, 2, source="manual", actor="alice(1001)", at="2026-11-30T08:14:59.999999+00:00"),
    Roll(5, 5, source="sim", seq=None, actor="sim"),
    Bet(3, 5, actor="alice"),
    Bet(2, 1, actor="alice(1001)", request='1001:0123456789abcdef:"dealer-7"'),
    Roll(2, 3, source="manual", actor="alice(1001)", request="1001:0123456789abcdef:7"),
    Cancel(3, actor="alice", at=iso(AT)),
    Void(actor="bob"),
    Surrender(kind="compulsory", actor="boxman"),
    Ack(actor="surveillance"),
    ReaderHello(seq=0, actor="reader"),
    RecordFault(code="DISK", actor="service"),
    ReaderFault(code="HEARTBEAT", actor="reader"),
    ReaderOk(actor="reader"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_a_command_comes_back_exactly(command: Command) -> None:
    body = encode_command(command, AT)
    assert json.loads(body)["command"] == command.name
    assert decode_body(body, command.actor, AT, iso(AT)) == command
    assert decode_command(json.loads(body), command.actor, AT) == command


def test_a_reader_roll_is_lean_and_takes_the_fast_path() -> None:
    roll = Roll(3, 4, seq=17, actor="reader", at=iso(AT))
    body = encode_command(roll, AT)
    assert body == '{"command":"roll","d1":3,"d2":4,"seq":17}'
    for odd in ('{"command":"roll","d1":3,"d2":4,"seq":1٧}', '{"command":"roll","d1":3}'):
        with pytest.raises((ValueError, TypeError)):
            decode_body(odd, "reader", AT, iso(AT))


def test_times_round_trip_at_millisecond_precision() -> None:
    assert iso(AT) == "2026-11-30T08:15:00.123+00:00"
    assert to_ms(iso(AT)) == AT
    assert to_ms("2026-11-30T08:15:00") == to_ms("2026-11-30T08:15:00.000+00:00")
    assert to_ms("not a time") is None


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=130), st.binary(max_size=300))
def test_the_walk_s_sealer_is_hmac_sha256(key: bytes, message: bytes) -> None:
    assert sealer(key)(message) == hmac.digest(key, message, "sha256")


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_a_time_is_written_as_datetime_writes_it(ms: int) -> None:
    seconds, rest = divmod(ms, 1000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert iso(ms) == f"{text}.{rest:03d}+00:00"
    if ms >= -30_610_224_000_000:  # from the year 1000 (strftime writes 999 unpadded)
        assert to_ms(iso(ms)) == ms


@given(
    st.integers(-1, 7),
    st.integers(-1, 7),
    st.sampled_from(["reader", "manual", "sim"]),
    st.none() | st.integers(-2, 70000),
    st.sampled_from(["", "1001:0123456789abcdef:7"]),
    st.sampled_from(["same", "other", ""]),
)
def test_a_roll_s_body_is_the_canonical_json_of_its_fields(
    d1: int, d2: int, source: str, seq: int | None, request: str, when: str
) -> None:
    """The reader roll's body written without the JSON encoder (#31) is the text the
    encoder writes, and any other roll still goes through it: the fields that differ from
    their defaults, sorted, with ``at`` when it is not the record's own time."""
    at = {"same": iso(AT), "other": iso(AT + 1), "": ""}[when]
    roll = Roll(d1, d2, source, seq, actor="reader", at=at, request=request)
    fields: dict[str, object] = {"command": "roll", "d1": d1, "d2": d2}
    if source != "reader":
        fields["source"] = source
    if seq is not None:
        fields["seq"] = seq
    if request:
        fields["request"] = request
    if at != iso(AT):
        fields["at"] = at
    expected = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert encode_command(roll, AT) == expected


def test_iso_keeps_the_last_time_and_writes_any_other() -> None:
    assert iso(AT) == "2026-11-30T08:15:00.123+00:00"
    assert iso(AT) == "2026-11-30T08:15:00.123+00:00"  # the kept text
    assert iso(AT + 1) == "2026-11-30T08:15:00.124+00:00"
    assert iso(AT) == "2026-11-30T08:15:00.123+00:00"
