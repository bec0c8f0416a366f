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
    "EXIT STATUS": "0 ok, 1 failure or refused, 2 bad usage, input or configuration, "
    "3 service not reachable, 4 journal integrity failure.",
    "ENVIRONMENT": "FIREBET_CONFIG: the configuration file when --config is not given "
    "(then /etc/firebet/table.toml, then the defaults). FIREBET_STATE_DIR: the state "
    "directory when --state-dir is not given (then /var/lib/firebet for an installed "
    "program, ./var in a checkout).",
    "FILES": "/etc/firebet/table.toml (configuration), /etc/firebet/journal.key (the "
    "journal's key), /var/lib/firebet (state: journal), /run/firebet/control.sock "
    "(control socket).",
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
    page = str(Manpage(parser, _data=data, format="single-commands-section"))
    extra = "".join(f'.SH "{title}"\n{text}\n' for title, text in MAN_EXTRA.items())
    return page.rstrip("\n") + "\n" + extra


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
