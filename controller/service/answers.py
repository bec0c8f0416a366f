"""The service's answers to the control socket and to local tools.

Reading requests (``status``, ``history``) are answered on the socket's lane threads from
the published snapshot and the recall's own journal connection; whatever changes the
table becomes a :class:`~controller.service.jobs.Job` on the one queue, answered by the
engine thread when done (journal first, then outputs, then the reply). See
``docs/architecture.md`` (the control socket).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from controller.control.protocol import CLIENT_GRACE_S, EncodedReply, Request
from controller.core.commands import Command
from controller.core.errors import FirebetError
from controller.core.events import Refused
from controller.core.lamps import Mode
from controller.journal import describe_clear
from controller.link.fold import LinkFold
from controller.service import bench
from controller.service.jobs import Job
from controller.service.requests import dealer_command

if TYPE_CHECKING:
    from controller.service.controller import Controller

log = logging.getLogger("firebet.service")


def on_request(
    table: Controller, request: Request
) -> Mapping[str, Any] | EncodedReply | Future[Mapping[str, Any]]:
    """Called on a socket lane thread, never the engine's.

    ``status`` is answered from the last published snapshot and ``history`` by the
    recall process (:mod:`controller.service.recall`), both off the engine thread;
    whatever changes the table becomes an engine job, answered when done.
    """
    if request.op == "status":
        return table.status()
    if request.op == "sim-reader":
        return bench.act(table.simulated_reader, request.args)
    if request.op == "history":
        assert table.journal is not None
        return table.recall.history(table.journal, request)
    job = Job(request, deadline=request.deadline)
    table.queue.put(job)
    return job.future


def submit(table: Controller, command: Command, timeout: float = 10.0) -> dict[str, Any]:
    """Post ``command`` from a local tool (sim, scripts) and wait for the engine's reply.

    Not started within ``timeout``: answered "not done", and never done later.
    """
    job = Job(None, command, deadline=time.monotonic() + timeout)
    table.queue.put(job)
    if not job.done.wait(timeout + CLIENT_GRACE_S):
        return {
            "ok": False,
            "error": f"the engine did not finish {command.name} within "
            f"{timeout + CLIENT_GRACE_S:g} s; it may still: check the status",
        }
    return job.reply


def run_job(table: Controller, job: Job) -> None:
    """On the engine thread: answer ``job`` (never start one whose deadline passed)."""
    if time.monotonic() > job.deadline:
        what = job.what
        log.warning("%s not started: its deadline passed while the engine was busy", what)
        job.finish(
            {
                "ok": False,
                "expired": True,
                "error": f"{what} not done: the table was busy past the request's "
                "deadline; nothing was changed, try again",
            }
        )
        return
    try:
        if job.command is not None:
            reply = reply_to(table, job.command)
        else:
            assert job.request is not None
            reply = answer(table, job.request)
    except FirebetError as exc:
        reply = {"ok": False, "error": str(exc), "exit": exc.exit_code}
    job.finish(reply)


def answer(table: Controller, request: Request) -> dict[str, Any]:
    """On the engine thread: a control-socket request that changes the table."""
    op, args, actor = request.op, request.args, request.actor
    assert table.journal is not None
    if request.decided_at is not None:
        return already_decided(table, request.decided_at)
    if op == "clear-halt":
        if table.journal.halted is None and table.program_problem is not None:
            return {
                "ok": False,
                "error": f"{table.program_problem}: clear-halt cannot lift this; "
                "reinstall firebet (systemd/install.sh) and restart the service",
            }
        if table.journal.halted is None:
            return {"ok": False, "error": "the table is not halted: nothing to clear"}
        was = table.journal.halted.describe()
        record = table.journal.clear_halt(actor, note=str(args.get("note", "")))
        table.refresh()
        done = describe_clear(record.data()) if record is not None else ""
        return {"ok": True, "cleared": was, "resumed": done, "status": table.status()}
    if op in ("diagnostics-on", "diagnostics-off"):
        on = op == "diagnostics-on"
        if on == table.diagnostics:
            return {
                "ok": False,
                "error": f"diagnostics mode is already {'on' if on else 'off'}",
            }
        table.journal.append_system("mode", actor=actor, payload={"diagnostics": on})
        table.diagnostics = on
        table.refresh()
        return {"ok": True, "status": table.status()}
    return reply_to(table, dealer_command(op, args, actor, table.mode, request=request.tag))


def already_decided(table: Controller, record: int) -> dict[str, Any]:
    """The reply to a retry of a request the journal decided at ``record`` before the
    service restarted (its first reply was lost with the old process): what was decided
    then, re-derived from the journal by the table's engine; nothing is done again."""
    assert table.journal is not None
    before = f"decided at record {record}, before the service restarted; not done again"
    found = table.journal.batch(record - 1, 1)
    events = None
    if found and found[0].record == record:
        events = LinkFold(table.engine.rules, live_from=table.live_from).events(
            table.journal, found[0]
        )
    if events is None:
        return {
            "ok": False,
            "error": f"this request was {before}, and what it did cannot be re-derived; "
            "see firebet history",
        }
    for event in events:
        if event.get("event") == Refused.name:
            return {"ok": False, "error": f"{event.get('reason')} ({before})"}
    return {"ok": True, "repeated": before, "events": events, "status": table.status()}


def reply_to(table: Controller, command: Command) -> dict[str, Any]:
    """Apply a dealer's command (journal first, then outputs) and say what it did."""
    if table.mode == Mode.DIAGNOSTICS:
        return {
            "ok": False,
            "error": "diagnostics mode: game input is paused until a technician ends it "
            "(firebet diagnostics off)",
        }
    outcome = table.record(command)
    table.refresh()
    refused = outcome.refused
    if isinstance(refused, Refused):
        return {"ok": False, "error": refused.reason}
    return {
        "ok": True,
        "events": [e.to_dict() for e in outcome.events],
        "status": table.status(),
    }
