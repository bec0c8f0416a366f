"""The service's answers to the control socket and to local tools.

Reading requests (``status``, ``history``) are answered on the socket's lane threads from
the published snapshot and the recall worker; a retry of a request the journal decided
before the service restarted is answered by the recall worker too (what that record
decided, replayed from the journal there), so nothing on the engine thread folds the
journal. Whatever changes the table becomes a :class:`~controller.service.jobs.Job` on
the one queue, answered by the engine thread when done (journal first, then outputs,
then the reply). See ``docs/architecture.md`` (the control socket).
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, Protocol

from controller.control.ops import Op
from controller.control.protocol import CLIENT_GRACE_S, EncodedReply, Request
from controller.core.commands import Command
from controller.core.errors import FirebetError, Refusal
from controller.core.events import Refused
from controller.core.lamps import Mode
from controller.journal import Journal
from controller.service.jobs import Job, log_game_events
from controller.service.recall import HistoryRecall
from controller.service.requests import dealer_command
from controller.service.status import Published
from controller.service.table import Table

log = logging.getLogger("firebet.service")


class Service(Protocol):
    """What the answers need of the service (:class:`controller.service.service.Service`)."""

    @property
    def table(self) -> Table | None: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def queue(self) -> queue.Queue[Any]: ...
    @property
    def recall(self) -> HistoryRecall: ...
    @property
    def published(self) -> Published | None: ...
    @property
    def first_record(self) -> int: ...
    def status(self) -> dict[str, Any]: ...


def on_request(
    service: Service, request: Request
) -> Mapping[str, Any] | EncodedReply | Future[Mapping[str, Any]]:
    """Called on a socket lane thread, never the engine's.

    ``status`` is answered from the last published snapshot, ``history`` and a retry of
    a request decided before a restart by the recall worker
    (:mod:`controller.service.recall`), all off the engine thread; whatever changes the
    table becomes an engine job, answered when done.
    """
    if request.op == Op.STATUS:
        return service.status()
    if request.op == Op.HISTORY:
        return service.recall.history(service.journal, request)
    if request.decided_at is not None:
        return already_decided(service, request)
    job = Job(request, deadline=request.deadline)
    service.queue.put(job)
    return job.future


def submit(service: Service, command: Command, timeout: float = 10.0) -> dict[str, Any]:
    """Post ``command`` from a local tool (sim, scripts) and wait for the engine's reply.

    Not started within ``timeout``: answered "not done", and never done later.
    """
    job = Job(None, command, deadline=time.monotonic() + timeout)
    service.queue.put(job)
    if not job.done.wait(timeout + CLIENT_GRACE_S):
        return {
            "ok": False,
            "error": f"the engine did not finish {command.name} within "
            f"{timeout + CLIENT_GRACE_S:g} s; it may still: check the status",
        }
    return job.reply


def run_job(service: Service, job: Job) -> None:
    """On the engine thread: answer ``job`` (never start one whose deadline passed)."""
    if time.monotonic() > job.deadline:
        what = job.what
        log.warning("%s not started: its deadline passed while the engine was busy", what)
        job.finish(
            {
                "ok": False,
                "expired": True,
                "code": Refusal.EXPIRED,
                "error": f"{what} not done: the table was busy past the request's "
                "deadline; nothing was changed, try again",
            }
        )
        return
    try:
        if job.command is not None:
            reply = reply_to(service, job.command)
        else:
            assert job.request is not None
            reply = answer(service, job.request)
    except FirebetError as exc:
        reply = {"ok": False, "error": str(exc), "code": exc.code, "exit": exc.exit_code}
    job.finish(reply)


def answer(service: Service, request: Request) -> dict[str, Any]:
    """On the engine thread: a control-socket request that changes the table."""
    table = service.table
    assert table is not None
    op, args, actor = request.op, request.args, request.actor
    if op == Op.CLEAR_HALT and args.get("preview"):
        return table.preview_clear_halt()
    if op == Op.CLEAR_HALT:
        reply = table.clear_halt(actor, str(args.get("note", "")))
    elif op in (Op.DIAGNOSTICS_ON, Op.DIAGNOSTICS_OFF):
        reply = table.switch_diagnostics(op == Op.DIAGNOSTICS_ON, actor)
    else:
        return reply_to(service, dealer_command(op, args, actor, table.mode, request=request.tag))
    if reply.get("ok"):
        reply["status"] = service.status()
    return reply


def already_decided(service: Service, request: Request) -> dict[str, Any]:
    """The reply to a retry of a request the journal decided before the service restarted
    (its first reply was lost with the old process), or longer ago than the replies the
    socket keeps: what was decided then, replayed from the journal by the recall worker;
    nothing is done again."""
    record = request.decided_at
    assert record is not None
    when = ", before the service restarted" if record <= service.first_record else ""
    before = f"decided at record {record}{when}; not done again"
    events = service.recall.decided(service.journal, record, request.deadline)
    if events is None:
        return {
            "ok": False,
            "error": f"this request was {before}, and what it did cannot be re-derived; "
            "see firebet history",
        }
    for event in events:
        if event.get("event") == Refused.name:
            code = Refusal.of(event.get("code"))
            return {
                "ok": False,
                "error": f"{event.get('reason')} ({before})",
                "code": code,
                "exit": code.exit_code,
            }
    return {"ok": True, "repeated": before, "events": events, "status": service.status()}


def reply_to(service: Service, command: Command) -> dict[str, Any]:
    """Apply a dealer's command (journal first, then outputs) and say what it did."""
    table = service.table
    assert table is not None
    if table.mode == Mode.DIAGNOSTICS:
        return {
            "ok": False,
            "code": Refusal.DIAGNOSTICS,
            "error": "diagnostics mode: game input is paused until a technician ends it "
            "(firebet diagnostics off)",
        }
    outcome = table.record(command)
    table.refresh()
    log_game_events(log, outcome.events)
    refused = outcome.refused
    if isinstance(refused, Refused):
        code = Refusal.of(refused.code)
        return {"ok": False, "error": refused.reason, "code": code, "exit": code.exit_code}
    return {
        "ok": True,
        "events": [e.to_dict() for e in outcome.events],
        "status": service.status(),
    }
