"""docs/architecture.md draws the arrows between the packages exactly as the code has them."""

from __future__ import annotations

import re

import grimp

from tests.support import ROOT

ROOMS = ("cli", "service", "floor", "link", "control", "wire", "journal", "core", "clock")


def _room(module: str) -> str | None:
    if module == "drivers" or module.startswith("drivers."):
        return "drivers"
    parts = module.split(".")
    if parts[0] == "controller" and len(parts) > 1 and parts[1] in ROOMS:
        return parts[1]
    return None


def code_edges() -> set[tuple[str, str]]:
    graph = grimp.build_graph("controller", "drivers")
    edges = set()
    for module in graph.modules:
        here = _room(module)
        for imported in graph.find_modules_directly_imported_by(module):
            there = _room(imported)
            if here and there and here != there:
                edges.add((here, there))
    return edges


def documented_edges() -> set[tuple[str, str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"<!-- edges -->\n```\n(.*?)```\n<!-- /edges -->", text, re.S)
    assert block, "docs/architecture.md has no edges block"
    edges = set()
    for line in block.group(1).splitlines():
        source, _, targets = line.partition("->")
        edges |= {(source.strip(), t.strip()) for t in targets.split(",") if t.strip()}
    return edges


def test_the_documented_arrows_are_the_imports() -> None:
    assert documented_edges() == code_edges()


def test_the_table_s_service_and_the_floor_service_never_import_each_other() -> None:
    edges = code_edges()
    assert ("service", "floor") not in edges and ("floor", "service") not in edges
    assert not {("floor", "link"), ("floor", "control"), ("link", "control")} & edges
