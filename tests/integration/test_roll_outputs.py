"""A roll that changes nothing the lamps show drives no lamp (issue 31, SPEC section 7: a
roll's CPU): the table keeps the view the lamps show and drives them only when it changes;
a point made still lights its marker at once."""

from __future__ import annotations

from pathlib import Path

from controller.core.lamps import Outputs
from tests.support import table_running


def test_the_lamps_are_driven_only_when_their_view_changes(tmp_path: Path) -> None:
    with table_running(tmp_path / "state", tmp_path / "control.sock") as table:
        lights = table.controller.lights
        assert lights is not None
        driven: list[Outputs] = []
        real = lights.apply

        def counting(outputs: Outputs) -> None:
            driven.append(outputs)
            real(outputs)

        lights.apply = counting  # type: ignore[method-assign]
        for _ in range(5):  # craps on the come-out: the lamps show the same thing
            table.throw(1, 2)
        assert driven == []
        table.make(6)  # a point made: its marker lights, once
        assert driven and driven[-1].markers[6].value in ("pulse", "on")
        assert table.status()["markers"]["6"]["lit"] is True
