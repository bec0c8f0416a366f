"""Program verification: the service checks its own installed code against a manifest.

GLI-style program integrity (``docs/runbook.md``, "Program integrity"). At install,
``systemd/install.sh`` writes a manifest of the SHA-256 digest of every file of the
installed program (the ``controller`` and ``drivers`` packages and the default
configuration in ``config``)::

    python -m controller.service.integrity write /etc/firebet/program.manifest

At every start the service digests the same files again and compares: a file that
differs, is missing or was added halts the table ("program integrity") until the
program is reinstalled. The program digest (SHA-256 over the sorted list of file
digests) is shown by ``firebet status --json`` (``program``) and ``firebet doctor``,
and it is journaled with each start.

A checkout (``make sim``, the tests, an editable install) has no manifest and runs
unchecked; it says so. An installed program (in a ``site-packages`` folder) whose
manifest is missing is a program-integrity failure, not a free pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import config as default_config
import controller
import drivers

MANIFEST_ENV = "FIREBET_MANIFEST"
DEFAULT_MANIFEST = Path("/etc/firebet/program.manifest")
MANIFEST_FORMAT = 1
PROGRAM_SUFFIXES = (".py", ".toml")


def program_roots() -> dict[str, Path]:
    """The installed folders of the program: package name -> folder."""
    return {
        pkg.__name__: Path(pkg.__file__ or "").resolve().parent
        for pkg in (controller, drivers, default_config)
    }


def program_files(roots: dict[str, Path] | None = None) -> dict[str, Path]:
    """Every file of the program, by its name in the manifest (``controller/core/engine.py``)."""
    files: dict[str, Path] = {}
    for name, root in (roots or program_roots()).items():
        for path in root.rglob("*"):
            if path.suffix in PROGRAM_SUFFIXES and "__pycache__" not in path.parts:
                files[f"{name}/{path.relative_to(root).as_posix()}"] = path
    return files


def file_digest(path: Path) -> str:
    """SHA-256 of one file's bytes, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_digests(roots: dict[str, Path] | None = None) -> dict[str, str]:
    """The digest of every program file, by name."""
    return {name: file_digest(path) for name, path in sorted(program_files(roots).items())}


def program_digest(digests: dict[str, str]) -> str:
    """The digest of the whole program: SHA-256 over ``"<digest>  <name>\\n"`` lines, sorted."""
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def manifest_path(roots: dict[str, Path] | None = None) -> Path | None:
    """Where the manifest is: ``$FIREBET_MANIFEST``, else ``/etc/firebet/program.manifest``
    for an installed program; None for a checkout (the system's manifest, if any, is the
    installed program's, not this one's)."""
    env = os.environ.get(MANIFEST_ENV)
    if env:
        return Path(env)
    return DEFAULT_MANIFEST if installed(roots) else None


def installed(roots: dict[str, Path] | None = None) -> bool:
    """Whether the program runs from an installation (site-packages), not a checkout."""
    return any("site-packages" in root.parts for root in (roots or program_roots()).values())


def write_manifest(path: Path, roots: dict[str, Path] | None = None) -> str:
    """Write the manifest of the program as installed now; returns the program digest."""
    digests = file_digests(roots)
    digest = program_digest(digests)
    body = {"format": MANIFEST_FORMAT, "program": digest, "files": digests}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return digest


@dataclass(frozen=True)
class ProgramCheck:
    """The outcome of checking the program against its manifest.

    ``digest``: the program digest computed now. ``manifest``: the manifest read
    (None when there is none). ``problem``: why the program may not run (None: fine).
    """

    digest: str
    manifest: Path | None
    problem: str | None

    @property
    def ok(self) -> bool:
        """True unless the program failed its check."""
        return self.problem is None

    def describe(self) -> str:
        """One line for ``doctor`` and the log."""
        if self.problem is not None:
            return f"program integrity: {self.problem}"
        if self.manifest is None:
            return f"program {self.digest[:16]}: running from a checkout, no manifest to check"
        return f"program {self.digest[:16]} matches {self.manifest}"

    def to_dict(self) -> dict[str, object]:
        """``status --json`` ``program``."""
        return {
            "digest": self.digest,
            "manifest": str(self.manifest) if self.manifest is not None else None,
            "ok": self.ok,
            "problem": self.problem,
        }


def check_program(path: Path | None = None, roots: dict[str, Path] | None = None) -> ProgramCheck:
    """Digest the program and compare it with the manifest at ``path`` (see module doc)."""
    path = path or manifest_path(roots)
    digests = file_digests(roots)
    digest = program_digest(digests)
    if path is None:
        return ProgramCheck(digest, None, None)
    if not path.exists():
        if installed(roots):
            return ProgramCheck(digest, None, f"no manifest at {path}: reinstall firebet")
        return ProgramCheck(digest, None, None)
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        recorded = body["files"]
        if not isinstance(recorded, dict):
            raise TypeError("files is not a table")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return ProgramCheck(digest, path, f"manifest {path} cannot be read: {exc}")
    for name in sorted(set(recorded) | set(digests)):
        if name not in digests:
            return ProgramCheck(digest, path, f"{name} is missing (the manifest lists it)")
        if name not in recorded:
            return ProgramCheck(digest, path, f"{name} is not in the manifest {path}")
        if recorded[name] != digests[name]:
            return ProgramCheck(digest, path, f"{name} differs from the manifest {path}")
    return ProgramCheck(digest, path, None)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m controller.service.integrity write PATH | check [PATH]`` (used by install)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "write":
        print(write_manifest(Path(args[1])))
        return 0
    if len(args) in (1, 2) and args[0] == "check":
        result = check_program(Path(args[1]) if len(args) == 2 else None)
        print(result.describe())
        return 0 if result.ok else 1
    print(
        "usage: python -m controller.service.integrity write PATH | check [PATH]", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
