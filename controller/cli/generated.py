"""Shell completion and the man page, generated from the one argument parser.

Nothing here is written by hand: ``shtab`` turns the parser into completion
scripts and ``argparse-manpage`` into ``firebet(1)``, so both follow every new
command and option. ``systemd/install.sh`` installs them::

    python -m controller.cli.generated completion bash   # or zsh, tcsh
    python -m controller.cli.generated man               # roff for man -l
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import shtab
from argparse_manpage.manpage import Manpage

from controller import __version__
from controller.cli import build_parser

SHELLS = ("bash", "zsh", "tcsh")

MAN_EXTRA = {
    "EXIT STATUS": "0 ok, 1 refused or failed, 2 bad usage, input or configuration (a "
    "position not on the layout too), 3 service not reachable, 4 journal integrity "
    "failure. With --json a refusal also prints its stable code (docs/cli.md).",
    "ENVIRONMENT": "FIREBET_CONFIG: the configuration file when --config is not given "
    "(then /etc/firebet/table.toml, then the defaults). FIREBET_STATE_DIR: the state "
    "directory when --state-dir is not given (then /var/lib/firebet for an installed "
    "program, ./var in a checkout).",
    "FILES": "/etc/firebet/table.toml (configuration), /etc/firebet/journal.key (the "
    "journal's key), /var/lib/firebet (state: journal), /run/firebet/control.sock "
    "(control socket).",
    "EXAMPLES": "firebet status (the table now); firebet bet 3 5 (a $5 fire bet on position "
    "3); firebet roll 3 4 (a roll keyed by hand while the reader is in fault); firebet held "
    "apply 1 (count a held reader roll); firebet history --hands 1 (the last hand, roll by "
    "roll); sudo firebet journal verify --state-dir /var/lib/firebet; firebet clear-halt "
    "--note 'SD card replaced, ticket 4711' (shows what it sets aside, then asks); firebet "
    "run --simulated-reader --pin-factory mock --state-dir /tmp/bench (a bench service); "
    "firebet sim (the whole table in the terminal).",
    "SEE ALSO": "/usr/share/doc/firebet (the package; /opt/firebet/docs from a checkout's "
    "install.sh): install.md, runbook.md, cli.md, bench.md, reader-protocol.md.",
}


def completion(shell: str) -> str:
    """The completion script for ``shell`` (bash, zsh or tcsh)."""
    if shell not in SHELLS:
        raise ValueError(f"no completion for {shell!r}: one of {', '.join(SHELLS)}")
    script: str = shtab.complete(build_parser(), shell=shell)
    return script


def man_page() -> str:
    """``firebet(1)`` in roff, every command and option from the parser."""
    parser = build_parser()
    data = {
        "prog": "firebet",
        "project_name": "firebet",
        "version": __version__,
        "description": parser.description or "",
        "manual_section": "1",
        "manual_title": "firebet manual",
        "date": "",
    }
    page = _usage_unfilled(str(Manpage(parser, _data=data, format="single-commands-section")))
    extra = "".join(f'.SH "{title}"\n{text}\n' for title, text in MAN_EXTRA.items())
    return page.rstrip("\n") + "\n" + extra


def _usage_unfilled(page: str) -> str:
    """Each command's ``usage:`` lines as argparse laid them out (``.nf`` ... ``.fi``):
    filled like prose, man ran them together into one mangled paragraph."""
    out: list[str] = []
    lines = page.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("usage: "):
            out.append(".nf")
            out.append(lines[i])
            i += 1
            while i < len(lines) and lines[i].startswith(" ") and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(".fi")
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m controller.cli.generated completion SHELL | man``."""
    parser = argparse.ArgumentParser(
        prog="python -m controller.cli.generated",
        description="Print firebet's shell completion or man page, generated from its parser.",
    )
    what = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    comp = what.add_parser("completion", help="a shell completion script")
    comp.add_argument("shell", choices=SHELLS, help="the shell it is for")
    what.add_parser("man", help="the man page firebet(1), in roff")
    args = parser.parse_args(argv)
    sys.stdout.write(completion(args.shell) if args.what == "completion" else man_page())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
