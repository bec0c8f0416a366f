"""``floor.toml`` is read by the table configuration's own machinery: every bad file,
section, key or value is a ConfigError naming the file, the key and what was wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import options
from controller.core.errors import ConfigError
from controller.floor.passwords import hash_password
from controller.floor.settings import FloorSettings, load_settings, parse_broker, parse_http

BAD = [
    (
        "[pit]\nx = 1\n",
        "pit",
        "unknown section (known: floor, web, store, tables, users, approved, shifts)",
    ),
    ("floor = 1\n", "floor", "must be a [section] table"),
    ("[store]\nurl = 'mysql://x/db'\n", "store.url", 'must be "" (the SQLite file) or postgresql'),
    ("[store]\nurl = 5\n", "store.url", "must be a string"),
    ("[store]\nkeep_days = -1\n", "store.keep_days", "must be at least 0"),
    ("[store]\narchive_dir = ' '\n", "store.archive_dir", "must not be empty"),
    ("[floor]\nbrokr = 'mqtt://x'\n", "floor.brokr", "unknown key (known in [floor]: broker,"),
    ("[floor]\nbroker = 1883\n", "floor.broker", "must be a string, not 1883"),
    ("[floor]\nbroker = 'http://x:1'\n", "floor.broker", "must start with mqtt:// or mqtts://"),
    ("[floor]\nbroker = 'mqtt://u:p@x'\n", "floor.broker", "must not carry a user or password"),
    ("[floor]\nbroker = 'mqtt://x:99999'\n", "floor.broker", "is not a broker address"),
    ("[floor]\ntls_ca = '/ca.pem'\n", "floor.tls_ca", "is for an mqtts:// broker"),
    ("[floor]\ntopic_prefix = 'fire/#'\n", "floor.topic_prefix", "must be topic levels"),
    ("[floor]\nclient_id = ' '\n", "floor.client_id", "must not be empty"),
    ("[floor]\nhttp = 'nowhere'\n", "floor.http", "must be HOST:PORT (port 0..65535)"),
    ("[floor]\ndatabase = 'db/'\n", "floor.database", "must name a file"),
    ("[floor]\ngap_grace_s = -1\n", "floor.gap_grace_s", "must be greater than 0 (got -1.0)"),
    ("[floor]\nresend_every_s = 'often'\n", "floor.resend_every_s", "must be a number"),
    ("[floor]\nresend_every_s = nan\n", "floor.resend_every_s", "must be a finite number"),
    ("[users]\n'al ice' = 'x'\n", "users.al ice", "a user name is letters"),
    ("[users]\nalice = 1\n", "users.alice", "must be a password hash string"),
    ("[users]\nalice = 'plain-text'\n", "users.alice", ""),
    ("[floor\n", "", "not valid TOML"),
    ("[floor]\ntime_zone = 'Mars/Olympus'\n", "floor.time_zone", "is not a time zone name"),
    ("[floor]\ntime_zone = '../../etc/passwd'\n", "floor.time_zone", "is not a time zone name"),
    ("[tables.CR-07]\nposition = [1]\n", "tables.CR-07.position", "must be [row, column]"),
    ("[tables.CR-07]\nposition = [0, 2]\n", "tables.CR-07.position", "each a whole number 1..100"),
    ("[tables.CR-07]\nposition = [1, 2.5]\n", "tables.CR-07.position", "must be [row, column]"),
    ("[tables.CR-07]\nposition = [true, 2]\n", "tables.CR-07.position", "must be [row, column]"),
    ("[tables.CR-07]\nrow = 1\n", "tables.CR-07.row", "unknown key (known: position)"),
    ("[tables]\nCR-07 = 1\n", "tables.CR-07", "must be a [tables.<id>] table"),
    ("[tables.'CR 07']\nposition = [1, 1]\n", "tables.CR 07", "a table id is 1 to 64 letters"),
    (
        "[tables.A]\nposition = [1, 1]\n[tables.B]\nposition = [1, 1]\n",
        "tables.B.position",
        "[1, 1] is already where A stands",
    ),
    ("[web]\nmax_body_bytes = 10\n", "web.max_body_bytes", "must be at least 1024"),
    ("[web]\nmax_conections = 10\n", "web.max_conections", "unknown key (known in [web]:"),
    ("[web]\nbehind_tls_proxy = 'yes'\n", "web.behind_tls_proxy", "must be true or false"),
    ("[web]\nrequest_timeout_s = 0\n", "web.request_timeout_s", "must be greater than 0"),
    ("[web]\ntrusted_proxies = '10.0.0.1, nowhere'\n", "web.trusted_proxies", "'nowhere'"),
    ("[web]\ntls_certfile = 'c.pem'\n", "web.tls_keyfile", "go together"),
    ("[floor]\nhealth_after_s = 0\n", "floor.health_after_s", "must be greater than 0"),
    ("approved = 1\n", "approved", "must be a [section] table"),
    ("[approved.nj]\npays = {4 = 24}\n", "approved.nj.tables", "must list the table ids"),
    ("[approved.nj]\ntables = [1]\n", "approved.nj.tables", "must list the table ids"),
    ("[approved.nj]\ntables = ['T1']\npay = 1\n", "approved.nj.pay", "unknown key"),
    ("[approved.nj]\ntables = ['T1']\npays = 7\n", "approved.nj.pays", "must be a table"),
    ("[approved.nj]\ntables = ['T1']\nmax_wager = '5'\n", "approved.nj.max_wager", "whole"),
    (
        "[approved.a]\ntables = ['T1']\n[approved.b]\ntables = ['T1']\n",
        "approved.b.tables",
        "table 'T1' is approved in [approved.a] already",
    ),
]


@pytest.mark.parametrize(("text", "key", "reason"), BAD)
def test_every_bad_floor_toml_names_the_file_the_key_and_the_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    path = tmp_path / "floor.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert (caught.value.source, caught.value.key) == (str(path), key)
    assert reason in caught.value.reason
    assert str(path) in str(caught.value) and key in str(caught.value)


def test_a_floor_toml_that_is_not_utf8_or_not_there_says_so(tmp_path: Path) -> None:
    path = tmp_path / "floor.toml"
    path.write_bytes(b"[floor]\nusername = '\xff'\n")
    with pytest.raises(ConfigError, match=r"line 2: the file is not UTF-8 text \(byte 0xFF"):
        load_settings(path)
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_settings(tmp_path / "missing.toml")


def test_a_good_floor_toml_gives_typed_settings(tmp_path: Path) -> None:
    encoded = hash_password("a long password")
    path = tmp_path / "floor.toml"
    path.write_text(
        "[floor]\nbroker = 'mqtts://broker.local'\ntls_ca = '/ca.pem'\ngap_grace_s = 2\n"
        f"http = '[::1]:8081'\n[users]\nalice = '{encoded}'\n"
        "[store]\nurl = 'postgresql://floor:s3cret@db.local:5432/firebet'\n",
        encoding="utf-8",
    )
    settings = load_settings(path)
    assert settings.store.url == "postgresql://floor:s3cret@db.local:5432/firebet"
    assert settings.store.shown() == "postgresql://floor:***@db.local:5432/firebet"
    assert settings.gap_grace_s == 2.0 and isinstance(settings.gap_grace_s, float)
    assert settings.users == {"alice": encoded} and settings.source == str(path)
    assert (settings.endpoint().host, settings.endpoint().port) == ("broker.local", 8883)
    assert settings.endpoint().tls
    assert parse_http(settings.http) == ("::1", 8081)
    assert load_settings(None) == FloorSettings()


def test_the_broker_and_http_flags_are_checked_the_same_way() -> None:
    assert parse_broker("mqtt://x").port == 1883
    with pytest.raises(ConfigError, match=r"--broker: floor\.broker: names no host"):
        parse_broker("mqtt://", "--broker")
    with pytest.raises(ConfigError, match=r"--http: --http: must be HOST:PORT .*got 'x'"):
        parse_http("x", "--http", "--http")


def test_floor_toml_is_found_as_a_tables_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(options, "FLOOR_SYSTEM_CONFIG", tmp_path / "floor.toml")
    monkeypatch.delenv("FIREBET_FLOOR_CONFIG", raising=False)
    assert options.floor_config_path(None) is None  # the defaults
    (tmp_path / "floor.toml").write_text("", encoding="utf-8")
    assert options.floor_config_path(None) == str(tmp_path / "floor.toml")
    monkeypatch.setenv("FIREBET_FLOOR_CONFIG", "/srv/floor.toml")
    assert options.floor_config_path(None) == "/srv/floor.toml"
    assert options.floor_config_path("given.toml") == "given.toml"


def test_where_the_tables_stand_and_the_console_s_time_zone(tmp_path: Path) -> None:
    path = tmp_path / "floor.toml"
    path.write_text(
        "[floor]\ntime_zone = 'Europe/Paris'\n"
        "[tables.CR-07]\nposition = [2, 3]\n[tables.CR-08]\nposition = [2, 4]\n"
    )
    settings = load_settings(path)
    assert settings.time_zone == "Europe/Paris"
    assert settings.positions == {"CR-07": (2, 3), "CR-08": (2, 4)}
    assert FloorSettings().positions == {} and FloorSettings().time_zone == ""


def test_approved_rules_are_per_table_or_for_every_other_table(tmp_path: Path) -> None:
    path = tmp_path / "floor.toml"
    path.write_text(
        "[approved.house]\ntables = ['*']\n"
        "[approved.high]\ntables = ['T1', 'T2']\npays = {4 = 30, 5 = 300, 6 = 1000}\n"
    )
    settings = load_settings(path)
    assert sorted(settings.approved) == ["*", "T1", "T2"]
    assert settings.approved["*"].rules.pay_table() == {4: 24, 5: 249, 6: 999}
    assert settings.approved["T1"].name == "high"
    assert settings.approved["T2"].rules.pay_table() == {4: 30, 5: 300, 6: 1000}
