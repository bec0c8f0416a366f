"""docs/cli.md is the command line (issue 23): every documented flag and environment
variable exists, and everything that exists is documented. Walks the argparse parser
(every subcommand, every option) and the page, and fails on either side's extra; the
refusal codes the page lists are the code's."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from controller.cli import build_parser
from controller.core.errors import Refusal
from tests.support import ROOT

DOC = ROOT / "docs" / "cli.md"
LOCATION = "[--config F] [--socket P] [--state-dir D] [--verbose]"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
SECTION = "\n## Each command: flags, refusals and usage errors\n"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command's path (``("journal", "verify")``) and parser; a parser with
    subcommands counts too when it takes options of its own (``firebet floor``)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs or (path and _flags(parser)):
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*path, name))


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    """The long options ``parser`` takes and shows (a hidden one is refused anyway)."""
    return {
        o for a in parser._actions if a.help != argparse.SUPPRESS
        for o in a.option_strings if o.startswith("--") and o != "--help"
    }  # fmt: skip


def _usage_lines() -> dict[tuple[str, ...], str]:
    """The usage line of each command in the page's "Each command" section."""
    text = DOC.read_text(encoding="utf-8")
    body = text[text.index(SECTION) :]
    found: dict[tuple[str, ...], str] = {}
    for line in re.findall(r"^- `(firebet [^`]+)`$", body, re.M):
        words = line.replace("[LOCATION]", LOCATION).split()
        path = tuple(w for w in words[1:3] if re.fullmatch(r"[a-z][a-z-]*", w))
        found[path] = " ".join(words)
    return found


def test_every_command_has_its_usage_line_and_no_other_is_there() -> None:
    parser = build_parser()
    paths = {path for path, _ in _commands(parser)}
    usage = _usage_lines()
    # a line's words that are literal choices (held apply|discard) are not commands
    documented = {p if p in paths else p[:1] for p in usage}
    assert documented == paths


def test_each_usage_line_names_exactly_the_flags_the_command_takes() -> None:
    usage = _usage_lines()
    for path, parser in _commands(build_parser()):
        line = usage.get(path) or usage[next(p for p in usage if p[:1] == path)]
        assert set(FLAG.findall(line)) == _flags(parser), " ".join(path)


def test_every_flag_anywhere_on_the_page_exists() -> None:
    parser = build_parser()
    known = {o for a in parser._actions for o in a.option_strings}  # --version, ...
    for _, sub in _commands(parser):  # a hidden flag exists too (clear-halt's refused --actor)
        known |= {o for a in sub._actions for o in a.option_strings}
    text = DOC.read_text(encoding="utf-8")
    extra = set(FLAG.findall(text)) - known
    assert not extra, f"documented but not taken by any command: {sorted(extra)}"


def _environment_read() -> set[str]:
    """The environment variables the program reads: every ``environ`` or ``getenv``
    lookup by name, and every ``FIREBET_*`` name it spells out."""
    names: set[str] = set()
    for source in [*(ROOT / "controller").rglob("*.py"), *(ROOT / "drivers").rglob("*.py")]:
        text = source.read_text(encoding="utf-8")
        names |= set(re.findall(r"""(?:environ(?:\.get)?|getenv)[\[(]\s*["']([A-Z_]+)["']""", text))
        names |= set(re.findall(r"""["'](FIREBET_[A-Z][A-Z_]*)["']""", text))
    return names


def test_every_environment_variable_read_is_documented_and_no_other() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## Environment\n")
    table = text[start : text.index("\n## ", start + 1)]
    documented = set(re.findall(r"`([A-Z][A-Z_]+)`", table))
    read = _environment_read()
    assert {"FIREBET_CONFIG", "FIREBET_STATE_DIR", "SUDO_UID"} <= read  # the scan works
    assert documented == read


def test_the_refusal_codes_on_the_page_are_the_codes_with_their_exits() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## Refusal codes\n")
    table = text[start : text.index("\n## ", start + 1)]
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (\d) \|", table, re.M))
    assert rows == {code.value: str(code.exit_code) for code in Refusal}
