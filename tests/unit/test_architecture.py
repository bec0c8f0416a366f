"""docs/architecture.md draws the arrows between the packages exactly as the code has them."""

from __future__ import annotations

import ast
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


# the reader's numbering has one home (issue 29): the table's order of a seq against the last
# (controller/core/table.py order), and the simulated reader numbering its own frames as a
# real reader does; anywhere else, arithmetic on a seq would be a second guess at it
SEQ_ARITHMETIC_HOMES = {"controller/core/table.py", "drivers/sim_reader.py"}


def _named(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def test_nothing_but_the_session_s_home_does_seq_arithmetic() -> None:
    found = []
    for top in ("controller", "drivers"):
        for path in sorted((ROOT / top).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.BinOp):
                    op, sides = node.op, (node.left, node.right)
                elif isinstance(node, ast.AugAssign):
                    op, sides = node.op, (node.target, node.value)
                else:
                    continue
                if isinstance(op, ast.Add | ast.Sub | ast.Mod) and any(
                    "seq" in _named(side).lower() for side in sides
                ):
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    strays = [f for f in found if f.split(":")[0] not in SEQ_ARITHMETIC_HOMES]
    assert not strays, "seq arithmetic outside its home:\n" + "\n".join(strays)
    assert any(f.startswith("controller/core/table.py") for f in found)  # the scan sees it
