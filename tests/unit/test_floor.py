"""The floor link's pure parts: [floor] config, the confirm rule, commands, messages, cursor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.core.commands import Confirm
from controller.core.config import load_config, rules_from_settings, rules_settings
from controller.core.errors import ConfigError
from controller.core.events import Refused, SurveillanceConfirmed
from controller.core.lamps import Effect, desired_outputs, view_from_state
from controller.core.lamps import Mode as LampMode
from controller.core.state import TableState
from controller.core.table_id import MAX_TABLE_ID, TABLE_ID_RULE
from controller.journal import Record
from controller.link.cursor import Cursor, CursorError, CursorFile
from controller.wire.messages import (
    CommandError,
    Resend,
    event_message,
    parse_command,
    split_topic,
    topics,
)
from tests.support import Table, make_points


def config_text(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def test_floor_defaults_are_off(tmp_path: Path) -> None:
    floor = load_config().floor
    assert not floor.enabled and floor.topic_prefix == "firebet"


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("mqtt://floor.local", (False, "floor.local", 1883)),
        ("mqtts://floor.local", (True, "floor.local", 8883)),
        ("mqtt://10.0.0.5:1884", (False, "10.0.0.5", 1884)),
    ],
)
def test_broker_addresses(tmp_path: Path, url: str, endpoint: tuple[bool, str, int]) -> None:
    config = load_config(config_text(tmp_path, f'[floor]\nbroker = "{url}"\n'))
    assert config.floor.enabled and config.floor.endpoint() == endpoint
    assert config.floor.topic("CR-07", "event") == "firebet/CR-07/event"


@pytest.mark.parametrize(
    ("body", "key", "reason"),
    [
        ('broker = "http://x:1883"', "floor.broker", "must start with mqtt:// or mqtts://"),
        ('broker = "mqtt://"', "floor.broker", "names no host"),
        ('broker = "mqtt://u:p@x"', "floor.broker", "must not carry a user or password"),
        ('broker = "mqtt://x:99999"', "floor.broker", "not a broker address"),
        ('broker = "mqtt://x/topic"', "floor.broker", "only mqtt[s]://host[:port]"),
        ('broker = "mqtt://x"\ntls_ca = "/ca.pem"', "floor.tls_ca", "mqtts:// broker only"),
        ('broker = "mqtt://x"\npassword_file = "/p"', "floor.password_file", "needs floor.user"),
        ('topic_prefix = "fire/#"', "floor.topic_prefix", "topic levels"),
        ('topic_prefix = ""', "floor.topic_prefix", "topic levels"),
        ('topic_prefix = "a//b"', "floor.topic_prefix", "topic levels"),
        ("brokr = 1", "floor.brokr", "unknown key"),
        ("broker = 1883", "floor.broker", "must be a string"),
    ],
)
def test_bad_floor_settings_are_refused_by_name(
    tmp_path: Path, body: str, key: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_text(tmp_path, f"[floor]\n{body}\n"))
    assert caught.value.key == key and reason in caught.value.reason


def test_a_table_id_that_is_no_topic_level_is_refused_with_a_broker(tmp_path: Path) -> None:
    text = '[table]\nid = "CR/07"\n[floor]\nbroker = "mqtt://x"\n'
    with pytest.raises(ConfigError) as caught:
        load_config(config_text(tmp_path, text))
    assert caught.value.key == "table.id"
    load_config(config_text(tmp_path, '[table]\nid = "CR/07"\n'))  # fine without a floor


def test_a_table_id_the_floor_would_drop_is_refused_at_load_naming_the_rule(
    tmp_path: Path,
) -> None:
    """A 65-character id was taken by the table and silently dropped by the floor (#32)."""
    long = "T" * (MAX_TABLE_ID + 1)
    text = f'[table]\nid = "{long}"\n[floor]\nbroker = "mqtt://x"\n'
    with pytest.raises(ConfigError) as caught:
        load_config(config_text(tmp_path, text))
    assert caught.value.key == "table.id" and TABLE_ID_RULE in caught.value.reason
    assert "65 characters long" in caught.value.reason
    fits = "T" * MAX_TABLE_ID
    loaded = load_config(config_text(tmp_path, text.replace(long, fits)))
    assert loaded.table.id == fits
    assert split_topic("firebet", f"firebet/{fits}/event") == (fits, "event")
    for refused in (long, "CR 07", "CR+07", "CR\u00e907"):  # what the table would refuse
        assert split_topic("firebet", f"firebet/{refused}/event") is None, refused
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "odds", "--config", str(tmp_path / "table.toml")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0  # the 64-character id
    config_text(tmp_path, text)
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "odds", "--config", str(tmp_path / "table.toml")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "table.id" in proc.stderr and TABLE_ID_RULE in proc.stderr


def test_rules_settings_round_trip_to_the_engine_rules(tmp_path: Path) -> None:
    config = load_config(config_text(tmp_path, '[firebet]\npreset = "three-tier"\n'))
    settings = json.loads(json.dumps(rules_settings(config)))
    assert rules_from_settings(settings) == config.firebet
    assert settings["firebet"]["preset"] == "three-tier" and settings["table"]["id"]


def alerted() -> Table:
    return Table().do(make_points(4, 5, 6, 8, 9))


def test_confirm_is_journaled_with_who_and_the_lamp_turns_steady() -> None:
    table = alerted()
    assert table.state.alert_hand == 1 and table.state.confirmed_by is None
    view = view_from_state(table.state, LampMode.RUNNING)
    assert desired_outputs(view).surveillance == Effect.BLINK
    outcome = table.engine.apply(table.state, Confirm(1, "alice", "u-1", actor="floor:alice"))
    assert outcome.events == (SurveillanceConfirmed(1, "alice", "u-1", actor="floor:alice"),)
    assert outcome.state.confirmed_by == "alice"
    view = view_from_state(outcome.state, LampMode.RUNNING)
    assert desired_outputs(view).surveillance == Effect.ON
    back = TableState.from_dict(json.loads(json.dumps(outcome.state.to_dict())))
    assert back == outcome.state and back.confirmed_by == "alice"


@pytest.mark.parametrize(
    ("lines", "confirm", "reason"),
    [
        ((), Confirm(1, "alice"), "no alert was raised at this table"),
        ((make_points(4, 5, 6, 8, 9),), Confirm(2, "alice"), "the alert is for hand 1"),
        ((make_points(4, 5, 6, 8, 9),), Confirm(1, " "), "must name who confirmed"),
        ((make_points(4, 5, 6, 8, 9),), Confirm(True, "x"), "is not a hand number"),  # type: ignore[arg-type]
    ],
)
def test_confirm_refused_when_hand_or_alert_do_not_match(
    lines: tuple[str, ...], confirm: Confirm, reason: str
) -> None:
    table = Table().do(*lines)
    outcome = table.engine.apply(table.state, confirm)
    (refused,) = outcome.events
    assert isinstance(refused, Refused) and reason in refused.reason
    assert outcome.state == table.state


def test_confirm_twice_is_refused_and_a_void_does_not_take_it_back() -> None:
    table = alerted()
    table.state = table.engine.apply(table.state, Confirm(1, "alice")).state
    again = table.engine.apply(table.state, Confirm(1, "bob"))
    assert "already confirmed by alice" in again.events[0].reason  # type: ignore[attr-defined]
    table.do("6 6", "void")  # void the roll after the confirm: the confirmation stays
    assert table.state.confirmed_by == "alice"


def test_the_confirmation_of_an_earlier_hand_survives_until_the_next_alert() -> None:
    table = alerted().do("2 2;3 4")  # point 4, seven-out: hand 2 is in play
    assert table.state.hand == 2 and table.state.alert_hand == 1
    assert table.engine.apply(table.state, Confirm(1, "alice")).state.confirmed_by == "alice"


def test_commands_parse_or_say_why_not() -> None:
    confirm = parse_command(b'{"op":"confirm","hand":3,"by":"alice","id":"u"}', at="T")
    assert confirm == Confirm(3, "alice", "u", actor="floor:alice", at="T")
    assert parse_command(b'{"op":"resend","from":17}') == Resend(17)
    for bad, why in [
        (b"not json", "not JSON"),
        (b"[1]", "JSON object"),
        (b'{"op":"pay"}', "unknown command op"),
        (b'{"op":"confirm","hand":"3","by":"a"}', "hand must be"),
        (b'{"op":"confirm","hand":3}', "by must name"),
        (b'{"op":"resend","from":0}', "from must be"),
        (b"[" * 5000, "bytes"),
        (b"\xff", "not JSON"),
    ]:
        with pytest.raises(CommandError, match=why):
            parse_command(bad)


def test_event_message_is_the_spec_payload() -> None:
    record = Record(7, "2026-01-01T00:00:00.000+00:00", "dealer", "command", '{"a":[1]}', "p", "h")
    message = json.loads(event_message("CR-07", record))
    assert message == {
        "table": "CR-07",
        "record": 7,
        "at": "2026-01-01T00:00:00.000+00:00",
        "kind": "command",
        "actor": "dealer",
        "payload": {"a": [1]},
        "chain": "h",
        "v": 1,
    }
    assert topics("casino/floor1", "CR-07")["command"] == "casino/floor1/CR-07/command"


def test_cursor_file_round_trip_and_damage(tmp_path: Path) -> None:
    cursors = CursorFile(tmp_path)
    assert cursors.load() == Cursor()
    cursors.save(Cursor(41, "ab" * 32))
    assert cursors.load() == Cursor(41, "ab" * 32)
    cursors.path.write_text('{"record": -1, "chain": ""}')
    with pytest.raises(CursorError, match="names no record"):
        cursors.load()
    cursors.path.write_text("{torn")
    with pytest.raises(CursorError, match="damaged"):
        cursors.load()


def test_every_payload_carries_its_version_and_another_is_refused_with_a_reason() -> None:
    """Issue 23: each floor payload says its version (``"v"``); each end reads the versions
    it knows (a message without one is version 1) and names any other as the reason."""
    from controller.wire.messages import (
        OFFLINE,
        VERSION,
        BadMessage,
        confirm_command,
        online_message,
        parse_event,
        parse_online,
        parse_state,
        resend_command,
        state_message,
    )

    record = Record(7, "2026-01-01T00:00:00.000+00:00", "dealer", "command", "{}", "p", "a" * 64)
    payloads = [
        event_message("CR-07", record, [{"event": "bet"}]),
        online_message("d" * 64, 7),
        OFFLINE,
        state_message({"mode": "running"}),
        confirm_command(1, "alice", "x").decode(),
        resend_command(3).decode(),
    ]
    assert VERSION == 1 and all(json.loads(p)["v"] == VERSION for p in payloads)
    assert parse_state(state_message({"mode": "running"}).encode()) == {"mode": "running"}
    assert parse_online(b'{"online": false}').online is False  # before versions: version 1
    for v in (2, "1", None, True):
        body = {**json.loads(payloads[0]), "v": v}
        with pytest.raises(
            BadMessage, match=f"an event of version {v!r}: this end reads version 1"
        ):
            parse_event("CR-07", json.dumps(body).encode())
        with pytest.raises(BadMessage, match="version"):
            parse_online(json.dumps({"online": True, "v": v}).encode())
        with pytest.raises(BadMessage, match="version"):
            parse_state(json.dumps({"mode": "running", "v": v}).encode())
        with pytest.raises(CommandError, match=f"a command of version {v!r}"):
            parse_command(json.dumps({"op": "resend", "from": 1, "v": v}).encode())
    assert parse_command(resend_command(3)) is not None
