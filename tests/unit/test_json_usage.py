"""Under ``--json`` every usage error is the refusal object with its documented code
(issue 33): ``bet 2 0`` is ``not_an_amount``, ``roll 7 1`` ``bad_dice``, an over-long
``--request-id`` ``bad_input``; a walk of the parser gives every command that takes
``--json`` a usage error and finds the object, valid by the shipped schema, each time."""

from __future__ import annotations

import json

import pytest

from controller.cli import USAGE_CODES, build_parser, main
from tests import schemas
from tests.support import ROOT
from tests.unit.test_cli_contract import _commands


def _refusal(capsys: pytest.CaptureFixture[str], *words: str) -> dict[str, object]:
    with pytest.raises(SystemExit) as stopped:
        main(list(words))
    assert stopped.value.code == 2, words
    out, err = capsys.readouterr()
    assert "usage:" in err  # the words and the usage stay on standard error
    (line,) = out.splitlines()
    body: dict[str, object] = json.loads(line)
    schemas.check("cli-refusal", body)
    assert body["exit"] == 2
    return body


@pytest.mark.parametrize(
    ("words", "code"),
    [
        (("bet", "2", "0", "--json"), "not_an_amount"),
        (("bet", "2", "ten", "--json"), "not_an_amount"),
        (("bet", "x", "5", "--json"), "no_such_position"),
        (("roll", "7", "1", "--json"), "bad_dice"),
        (("roll", "3", "0", "--json"), "bad_dice"),
        (("correct", "9", "1", "--json"), "bad_dice"),
        (("bet", "2", "5", "--json", "--request-id", "x" * 129), "bad_input"),
        (("status", "--json", "--no-such-flag"), "bad_input"),
    ],
)
def test_a_usage_error_under_json_is_the_refusal_with_its_code(
    capsys: pytest.CaptureFixture[str], words: tuple[str, ...], code: str
) -> None:
    assert _refusal(capsys, *words)["code"] == code


def test_every_command_that_takes_json_answers_a_usage_error_in_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    walked = 0
    for path, parser in _commands(build_parser()):
        if "--json" not in {o for a in parser._actions for o in a.option_strings}:
            continue
        body = _refusal(capsys, *path, "--json", "--no-such-flag")
        assert body["code"] == "bad_input", path
        walked += 1
    assert walked >= 10  # every dealer action, status, history, doctor, verify, ...


def test_without_json_a_usage_error_prints_no_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bet", "2", "0"])
    assert capsys.readouterr().out == ""


def test_the_usage_codes_are_documented_with_exit_2() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for code in {*USAGE_CODES.values(), "bad_input"}:
        assert f"| `{code}` | 2 |" in doc, code
