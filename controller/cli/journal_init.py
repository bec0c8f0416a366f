"""Technician's journal tools: ``journal init`` (a new journal over a damaged one) and
``journal migrate`` (a format-1 journal moved to the keyed format). Both run only
while the service is stopped (they take the journal's writer lock) and only for
root or the technician group (docs/runbook.md)."""

from __future__ import annotations

import argparse
import grp
import json
import os
from collections.abc import Callable
from typing import Any

from controller.cli import options as paths
from controller.core.errors import FirebetError
from controller.journal import Journal
from controller.journal.init import init_journal
from controller.journal.legacy import migrate


def _require_technician(group: str) -> None:
    if os.geteuid() == 0:
        return
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        gid = None
    if gid is not None and (gid == os.getegid() or gid in os.getgroups()):
        return
    raise FirebetError(
        f"only a technician may do this: root or a member of the group {group!r} "
        "([control] technician_group)"
    )


def _who() -> str:
    """Who runs this, as the OS says (as ``clear-halt`` records it)."""
    return paths.os_actor()


def run_init(args: argparse.Namespace) -> int:
    """Move a damaged journal aside and start a new one, recorded with who and why."""
    where = paths.locate(args)
    config = where.config
    _require_technician(config.control.technician_group)
    journal = Journal.open(where.state_dir, config)
    actor = _who()
    done = init_journal(journal, config.firebet, actor, args.reason or "")
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "journal": str(journal.path),
                    "aside": str(done.aside) if done.aside is not None else None,
                    "moved": list(done.moved),
                    "key_made": done.key_made,
                    "actor": actor,
                }
            )
        )
        return 0
    if done.aside is not None:
        print(f"moved {', '.join(done.moved)} to {done.aside}")
    if done.key_made:
        print(f"made a new journal key {journal.key_file} (mode 0600)")
    print(f"new journal {journal.path}; its first record names {actor} and the reason")
    return 0


def run_migrate(args: argparse.Namespace) -> int:
    """Move a format-1 or format-2 journal to format 3 (the old files are kept aside)."""
    where = paths.locate(args)
    config = where.config
    _require_technician(config.control.technician_group)
    journal = Journal.open(where.state_dir, config)
    actor = _who()
    done = migrate(
        journal.path,
        journal.key_file,
        config.firebet,
        actor,
        config.journal.snapshot_every,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "records": done.records,
                    "old_head": done.old_head,
                    "from_format": done.from_format,
                    "aside": str(done.aside),
                    "actor": actor,
                }
            )
        )
        return 0
    if done.from_format == 2:
        print(
            f"migrated {done.records} records to format 3 (the same records and chain, a "
            f"reader roll's body stored packed; chain head {done.old_head[:16]}); the "
            f"format-2 files are in {done.aside}"
        )
        return 0
    print(
        f"migrated {done.records} records to the keyed format (old chain head "
        f"{done.old_head[:16]}); the format-1 files are in {done.aside}"
    )
    return 0


def register(tools: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``journal init`` and ``journal migrate`` to the ``journal`` group."""
    init = tools.add_parser(
        "init", help="technician: a new journal over a damaged one (the old files kept aside)"
    )
    init.add_argument("--reason", required=True, help="what happened to the old journal")
    _json_flag(init, "one JSON object: the new journal, where the old files went, who")
    common(init)
    init.set_defaults(func=run_init, _json_refusal=True)
    move = tools.add_parser(
        "migrate", help="technician: move a format-1 or format-2 journal to format 3"
    )
    _json_flag(move, "one JSON object: the records moved, the old chain head, the old files")
    common(move)
    move.set_defaults(func=run_migrate, _json_refusal=True)


def _json_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=what + "; a refusal's code and words")
