"""The shipped JSON Schemas (``controller/schemas/``, issue 33) as the tests' judge.

``check(stem, value)`` fails naming the schema, the place and the reason. The shared
helpers call it on what they see, so every test that runs ``firebet ... --json``
(``tests.support.run_firebet``) or whose table publishes to a broker (``tests/conftest.py``
wraps the link's and the floor's message makers) validates its messages for free.
"""

from __future__ import annotations

import json
import threading
from functools import cache
from typing import Any

import jsonschema

from controller.cli.contract import SCHEMA_DIR

# the command's words -> the schema of each line it prints under --json (a refusal aside)
CLI_OUTPUTS: dict[tuple[str, ...], str] = {
    ("status",): "cli-status",
    ("history",): "cli-history",
    ("export",): "cli-export",
    ("doctor",): "cli-doctor",
    ("journal", "verify"): "cli-verify",
    ("journal", "init"): "cli-journal-init",
    ("journal", "migrate"): "cli-journal-migrate",
    ("clear-halt",): "cli-clear-halt",
    ("sim-reader",): "cli-sim-reader",
    # a dealer action done
    **{(op,): "cli-action" for op in ("roll", "void", "correct", "surrender", "bet", "cancel")},
    **{(op,): "cli-action" for op in ("ack", "diagnostics")},
    ("held", "apply"): "cli-action",
    ("held", "discard"): "cli-action",
    ("held",): "cli-held",  # after apply and discard: the first that fits is taken
}

failures: list[str] = []  # what the message makers' wrappers found (read per test)
_lock = threading.Lock()


@cache
def validator(stem: str) -> jsonschema.protocols.Validator:
    """The validator of ``controller/schemas/<stem>.schema.json``."""
    schema = json.loads((SCHEMA_DIR / f"{stem}.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)  # type: ignore[no-any-return]


def problem(stem: str, value: Any) -> str | None:
    """Why ``value`` is not valid by schema ``stem`` (None: it is)."""
    error = jsonschema.exceptions.best_match(validator(stem).iter_errors(value))
    if error is None:
        return None
    where = "/".join(map(str, error.absolute_path)) or "(top)"
    return f"{stem}: at {where}: {error.message[:300]}"


def check(stem: str, value: Any) -> None:
    """Fail when ``value`` is not valid by schema ``stem``."""
    found = problem(stem, value)
    assert found is None, found


def note(stem: str, text: str | bytes) -> None:
    """Check a message a helper made as it goes by; a problem is kept in :data:`failures`
    (a link thread cannot fail the test itself), and the test fails after it."""
    try:
        found = problem(stem, json.loads(text))
    except ValueError as exc:
        found = f"{stem}: not JSON: {exc}"
    if found is not None:
        with _lock:
            failures.append(found)


def cli_schema(args: tuple[str, ...]) -> str | None:
    """The schema of what ``firebet ARGS --json`` prints a line of (None: not checked)."""
    words = tuple(a for a in args if not a.startswith("-"))
    for command, stem in CLI_OUTPUTS.items():
        if words[: len(command)] == command:
            if command == ("export",) and "csv" in args:
                return None
            if command != ("export",) and "--json" not in args:
                return None
            if "--watch" in args:
                return None
            return stem
    return None


def check_cli(args: tuple[str, ...], stdout: str) -> None:
    """Every JSON line ``firebet ARGS`` printed under ``--json``: a refusal object by its
    schema, any other by its command's (``CLI_OUTPUTS``)."""
    if "--json" not in args and tuple(a for a in args if not a.startswith("-"))[:1] != ("export",):
        return
    stem = cli_schema(args)
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        if value.get("ok") is False and not (stem == "cli-doctor" and "check" in value):
            check("cli-refusal", value)
        elif stem is not None:
            check(stem, value)


def idle_status(table: str = "CR-07") -> dict[str, Any]:
    """A new table's ``status --json``, made by the service's own report (for a link
    driven without a service: its ``state`` messages are then still the real shape)."""
    from controller.core.lamps import LightsView, Mode, desired_outputs
    from controller.core.state import TableState
    from controller.service.status import Published, status_report

    view = LightsView()
    shown = Published(TableState(), Mode.RUNNING, desired_outputs(view), view, None, None, None)
    report = status_report(
        shown, table=table, ready=True, reader={}, journal_check=None, program=None, floor={},
        at="2026-01-01T00:00:00.000+00:00",
    )  # fmt: skip
    return report | {"journal_watch": None}  # the service's own addition (no watch yet)
