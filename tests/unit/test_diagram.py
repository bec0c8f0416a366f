"""The state diagram is drawn from the hand machine and the committed page is current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.cli import diagram
from controller.core.engine import HAND_TRANSITIONS
from controller.core.state import Phase


def test_committed_diagram_is_up_to_date() -> None:
    committed = diagram.DOC_PATH.read_text(encoding="utf-8")
    assert committed == diagram.render(), (
        "docs/state-machine.md is stale: run `python -m controller.cli.diagram` and commit it"
    )


def test_mermaid_has_every_phase_and_transition() -> None:
    source = diagram.mermaid()
    assert source.startswith("---\ntitle: firebet hand\n---\nstateDiagram-v2\n")
    for phase in Phase:
        assert f'state "{phase.value}" as {phase.name}' in source
    assert "[*] --> NEW_SHOOTER" in source
    edges = re.findall(r"^\s*(\w+) --> (\w+): (.+)$", source, flags=re.M)
    labels = " | ".join(label for _, _, label in edges)
    for t in HAND_TRANSITIONS:
        condition = t.get("conditions")
        assert (f"{t['trigger']} [{condition}]" if condition else t["trigger"]) in labels
    assert ("POINT", "NEW_SHOOTER", "roll [is_seven]") in edges
    # a surrender keeps the point on (SPEC section 2, settled questions)
    assert ("POINT", "POINT", "roll [internal] | surrender [internal]") in edges
    assert ("POINT", "COME_OUT", "roll [makes_point]") in edges
    assert "classDef" not in source and "Class " not in source


def test_check_reports_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "state-machine.md"
    assert diagram.main(["--check", "--output", str(page)]) == 1  # missing
    page.write_text(diagram.render().replace("seven-out", "seven out"), encoding="utf-8")
    assert diagram.main(["--check", "--output", str(page)]) == 1
    assert "is stale" in capsys.readouterr().err
    assert diagram.main(["--output", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == diagram.render()
    assert diagram.main(["--check", "--output", str(page)]) == 0
