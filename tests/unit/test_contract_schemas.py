"""The shipped JSON Schemas (controller/schemas/, issue 33) are the code's own definitions:
a schema file that differs from what the code makes, an event type or field the schema
lacks, or a schema that takes what the code would refuse, fails here."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from controller.cli import contract
from controller.core.errors import Refusal
from controller.core.events import PUBLISHED
from controller.journal.recipe import KINDS
from controller.wire import messages
from tests import schemas
from tests.support import ROOT, run_firebet


def test_the_shipped_files_are_what_the_code_makes() -> None:
    """Change an event, a refusal code or a key and forget ``make schemas``: this fails."""
    shipped = {p.name: p.read_text(encoding="utf-8") for p in contract.SCHEMA_DIR.glob("*.json")}
    made = contract.rendered()
    assert sorted(shipped) == sorted(made), "run make schemas"
    for name, text in made.items():
        assert shipped[name] == text, f"{name} differs from the code's: run make schemas"


def test_every_event_type_and_field_is_in_the_event_schema() -> None:
    defs = contract.schemas()["floor-event"]["$defs"]
    for name, cls in PUBLISHED.items():
        fields = [f.name for f in dataclasses.fields(cls)]
        optional = getattr(cls, "optional_keys", ())  # written only when not the default
        assert defs[name]["required"] == ["event", *(f for f in fields if f not in optional)]
        assert list(defs[name]["properties"]) == ["event", *fields], name
    names = contract.schemas()["floor-event"]["properties"]["events"]["items"]
    assert names["properties"]["event"]["enum"] == sorted(PUBLISHED)


def test_the_codes_and_kinds_are_the_codes() -> None:
    made = contract.schemas()
    assert made["cli-refusal"]["properties"]["code"]["enum"] == [r.value for r in Refusal]
    assert made["floor-event"]["properties"]["kind"]["enum"] == [str(k) for k in KINDS]
    assert made["floor-event"]["properties"]["v"]["enum"] == sorted(messages.KNOWN_VERSIONS)


def _roll(**change: object) -> dict[str, object]:
    roll = {
        "event": "roll", "d1": 3, "d2": 4, "total": 7, "outcome": "natural",
        "phase": "come_out", "point": None, "source": "reader", "seq": 5, "actor": "reader",
        "at": "2026-01-01T00:00:00.000Z",
    }  # fmt: skip
    return {**roll, **change}


def _event(*events: dict[str, object]) -> dict[str, object]:
    return {
        "table": "CR-07", "record": 3, "at": "2026-01-01T00:00:00.000Z", "kind": "command",
        "actor": "reader", "payload": {"op": "roll"}, "chain": "ab" * 32, "v": 1,
        "events": list(events),
    }  # fmt: skip


def test_the_event_schema_takes_a_roll_and_refuses_what_the_code_never_sends() -> None:
    schemas.check("floor-event", _event(_roll()))
    bad = {
        "a die as text": _event(_roll(d1="3")),
        "a missing field": _event({k: v for k, v in _roll().items() if k != "total"}),
        "an outcome not the code's": _event(_roll(outcome="push")),
        "a chain not 64 hex digits": {**_event(), "chain": "xyz"},
        "a version no end reads": {**_event(), "v": 2},
    }
    for why, message in bad.items():
        assert schemas.problem("floor-event", message) is not None, why


@pytest.mark.parametrize(
    ("stem", "good", "bad"),
    [
        ("floor-online", json.loads(messages.online_message("d" * 64, 7)), {"online": "yes"}),
        ("floor-online", json.loads(messages.OFFLINE), {"online": False, "program": "x"}),
        ("floor-command", json.loads(messages.confirm_command(4, "alice", "x")), {"op": "pay"}),
        ("floor-command", json.loads(messages.resend_command(3)), {"op": "resend", "from": 0}),
    ],
)
def test_the_presence_and_command_schemas(stem: str, good: object, bad: object) -> None:
    schemas.check(stem, good)
    assert schemas.problem(stem, bad) is not None


def test_the_status_schema_names_every_key_a_running_table_reports(
    running_table: object,
) -> None:
    status = running_table.status()  # type: ignore[attr-defined]
    schema = contract.schemas()["cli-status"]
    assert sorted(status) == sorted(schema["properties"])
    schemas.check("cli-status", status)
    schemas.check("floor-state", json.loads(messages.state_message(status)))


def test_contract_version_is_the_documented_one() -> None:
    done = run_firebet("--contract-version")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["contract"] == contract.CONTRACT
    assert said["floor_messages"] == messages.VERSION
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    documented = re.search(r"This is version (\d+) of the command-line contract", cli)
    assert documented is not None and int(documented[1]) == contract.CONTRACT


def test_the_docs_name_every_schema_file() -> None:
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    docs += (ROOT / "docs" / "floor.md").read_text(encoding="utf-8")
    for name in contract.rendered():
        assert name in docs, f"{name} is named in docs/cli.md or docs/floor.md"
