"""What the docs promise under ``--json`` is what the parser and the code do (issue 33):
every ``firebet ... --json`` the docs show is a command that takes ``--json``; the
commands docs/cli.md says answer a refusal with the JSON object are exactly those that
do; every refusal code documented is one the code can give (before #33 ``clear-halt
--json`` was documented nowhere and taken by nothing, ``status --json`` printed nothing
without a service, and ``not_an_amount`` and ``bad_dice`` were never given)."""

from __future__ import annotations

import argparse
import re

from controller.cli import build_parser
from controller.core.errors import Refusal
from tests.support import ROOT
from tests.unit.test_cli_contract import _commands

DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
SHOWN = re.compile(r"`firebet ([^`]*--json[^`]*)`")


def _takes_json(parser: argparse.ArgumentParser) -> bool:
    return any("--json" in a.option_strings for a in parser._actions)


def _parsers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    return dict(_commands(build_parser()))


def test_every_json_the_docs_show_is_taken_by_its_command() -> None:
    parsers = _parsers()
    seen = 0
    for doc in DOCS:
        for shown in SHOWN.findall(doc.read_text(encoding="utf-8")):
            words = shown.replace("\\|", "|").split()
            for second in words[1].split("|") if len(words) > 1 else [""]:  # leds|buttons
                tried = [words[0], second]
                path = next((tuple(tried[:n]) for n in (2, 1) if tuple(tried[:n]) in parsers), None)
                assert path is not None, f"{doc.name}: `firebet {shown}` names no command"
                assert _takes_json(parsers[path]), f"{doc.name}: `firebet {shown}`: no --json"
                seen += 1
    assert seen >= 20  # the scan finds the docs' examples


def _promised_refusal_objects(parsers: dict[tuple[str, ...], argparse.ArgumentParser]) -> set:  # type: ignore[type-arg]
    """The commands docs/cli.md's "Refusal codes" says print the refusal object."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    start = text.index("\n## Refusal codes\n")
    listed = re.search(r"With `--json` \(([^)]*)\)", text[start:], re.S)
    assert listed is not None
    named = listed[1].replace("\n", " ")
    promised = {tuple(n.split()) for n in re.findall(r"`([a-z][a-z -]*)`", named)}
    if "every dealer action" in named:
        dealer = text[text.index("\n### Dealer actions\n") :]
        dealer = dealer[: dealer.index("\n### ", 1)]
        promised |= {(w,) for w in re.findall(r"^- `firebet ([a-z-]+)", dealer, re.M)}
    expanded = set()
    for path in promised:
        under = {p for p in parsers if p[: len(path)] == path}
        assert under, f"docs/cli.md promises the refusal object of {path}: no such command"
        expanded |= under
    return expanded


def test_the_commands_promised_the_refusal_object_are_those_that_print_it() -> None:
    parsers = _parsers()
    promised = _promised_refusal_objects(parsers)
    printing = {p for p, parser in parsers.items() if parser._defaults.get("_json_refusal")}
    assert {("clear-halt",), ("status",), ("journal", "init"), ("bet",)} <= promised
    assert promised == printing
    for path in printing:
        assert _takes_json(parsers[path]), path


def _code_outside_the_declaration() -> str:
    """The program's source, without the lines that declare the codes and their exits."""
    parts = []
    for source in [*(ROOT / "controller").rglob("*.py"), *(ROOT / "drivers").rglob("*.py")]:
        text = source.read_text(encoding="utf-8")
        if source.name == "errors.py" and source.parent.name == "core":
            text = text[text.index("class FirebetError") :]  # the enum and the exit table off
        parts.append(text)
    return "\n".join(parts)


def test_every_documented_code_is_one_the_code_gives() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    start = text.index("\n## Refusal codes\n")
    table = text[start : text.index("\n## ", start + 1)]
    documented = set(re.findall(r"^\| `([a-z_]+)` \| \d \|", table, re.M))
    assert documented == {r.value for r in Refusal}
    source = _code_outside_the_declaration()
    for code in Refusal:
        given = f"Refusal.{code.name}" in source or re.search(rf"[\"']{code.value}[\"']", source)
        assert given, f"the documented code {code.value!r} is given nowhere in the program"
    each = text[text.index("\n## Each command: flags, refusals and usage errors\n") :]
    for row in re.findall(r"^\| `[a-z-]+` \|(.*)\|$", each, re.M):
        for code in re.findall(r"`([a-z]+_[a-z_]+|[a-z]+)`", row):
            if code in {"held", "apply", "discard", "yes", "no"} or code.isdigit():
                continue
            assert code in documented, f"docs/cli.md names the code {code!r}: not a code"
