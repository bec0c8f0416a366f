"""Program verification: digests of the installed files against the install's manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from controller.service.integrity import (
    check_program,
    file_digests,
    main,
    program_digest,
    program_roots,
    write_manifest,
)


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    """A copy of the program's files, as an installation would hold them."""
    copies = {}
    for name, root in program_roots().items():
        dest = tmp_path / "prog" / name
        shutil.copytree(root, dest, ignore=shutil.ignore_patterns("__pycache__"))
        copies[name] = dest
    return copies


def test_the_manifest_covers_code_and_default_config() -> None:
    names = set(file_digests())
    assert {"controller/core/engine.py", "drivers/codec.py", "config/table.toml"} <= names
    assert not [n for n in names if "__pycache__" in n]


def test_a_matching_program_passes_and_the_digest_is_stable(
    roots: dict[str, Path], tmp_path: Path
) -> None:
    digest = write_manifest(tmp_path / "m.json", roots)
    result = check_program(tmp_path / "m.json", roots)
    assert result.ok and result.digest == digest and result.problem is None
    assert digest == program_digest(file_digests(roots)) == check_program(roots=roots).digest
    assert "matches" in result.describe()


def test_a_changed_file_is_named(roots: dict[str, Path], tmp_path: Path) -> None:
    write_manifest(tmp_path / "m.json", roots)
    engine = roots["controller"] / "core" / "engine.py"
    engine.write_text(engine.read_text() + "\n# one more line\n")
    result = check_program(tmp_path / "m.json", roots)
    assert not result.ok
    assert result.describe().startswith("program integrity: controller/core/engine.py differs")


def test_a_missing_and_an_added_file_are_named(roots: dict[str, Path], tmp_path: Path) -> None:
    write_manifest(tmp_path / "m.json", roots)
    (roots["drivers"] / "extra.py").write_text("print('hello')\n")
    assert "drivers/extra.py is not in the manifest" in str(
        check_program(tmp_path / "m.json", roots).problem
    )
    (roots["drivers"] / "extra.py").unlink()
    (roots["config"] / "table.toml").unlink()
    assert "config/table.toml is missing" in str(check_program(tmp_path / "m.json", roots).problem)


def test_a_damaged_manifest_fails(roots: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text("{not json")
    assert "cannot be read" in str(check_program(tmp_path / "m.json", roots).problem)
    (tmp_path / "m.json").write_text(json.dumps({"format": 1}))
    assert "cannot be read" in str(check_program(tmp_path / "m.json", roots).problem)


def test_no_manifest_is_fine_for_a_checkout_but_not_for_an_installation(tmp_path: Path) -> None:
    checkout = check_program(tmp_path / "none.json")
    assert checkout.ok and "running from a checkout" in checkout.describe()
    installed = {}
    for name, root in program_roots().items():
        dest = tmp_path / "venv" / "lib" / "site-packages" / name
        shutil.copytree(root, dest, ignore=shutil.ignore_patterns("__pycache__"))
        installed[name] = dest
    result = check_program(tmp_path / "none.json", installed)
    assert not result.ok and "no manifest" in str(result.problem)


def test_the_install_entry_point_writes_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["write", str(tmp_path / "m.json")]) == 0
    digest = capsys.readouterr().out.strip()
    assert json.loads((tmp_path / "m.json").read_text())["program"] == digest
    assert main(["check", str(tmp_path / "m.json")]) == 0
    assert main(["frobnicate"]) == 2
