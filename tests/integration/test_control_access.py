"""Who may do what on the control socket: roles from peer credentials, the socket file."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from controller.control.client import ControlClient
from controller.control.ops import BENCH_ROLES
from controller.control.protocol import (
    BUILTIN_OPS,
    ROLES,
    Identity,
    Role,
    identify,
    peer_credentials,
    permission_error,
    role_of,
)
from controller.control.server import ControlServer
from controller.core.errors import FirebetError, ServiceUnreachable, UsageError
from tests.control_support import SERVICE_UID, Recorder, fake_identity
from tests.support import DEALERS, TECHS

# roles ---------------------------------------------------------------------------------


def test_roles_table_covers_every_client_op() -> None:
    assert {op for op, r in ROLES.items() if r is Role.READER} == {
        "ping", "whoami", "status", "history",
    }  # fmt: skip
    assert {op for op, r in ROLES.items() if r is Role.DEALER} == {
        "roll", "void", "correct", "surrender", "bet", "cancel", "ack", "held-apply",
        "held-discard",
    }  # fmt: skip
    assert {op for op, r in ROLES.items() if r is Role.TECHNICIAN} == {
        "clear-halt", "diagnostics-on", "diagnostics-off",
    }  # fmt: skip
    assert set(ROLES) >= BUILTIN_OPS
    # the bench device's op is no table's: registered only by a bench's composition
    assert BENCH_ROLES == {"sim-reader": Role.TECHNICIAN}


@pytest.mark.parametrize(
    ("uid", "groups", "role"),
    [
        (1001, set(), Role.READER),
        (1001, {"firebet", "staff"}, Role.READER),
        (1001, {DEALERS}, Role.DEALER),
        (1001, {TECHS}, Role.TECHNICIAN),
        (1001, {DEALERS, TECHS}, Role.TECHNICIAN),
        (0, set(), Role.TECHNICIAN),
        (SERVICE_UID, set(), Role.TECHNICIAN),
    ],
)
def test_role_of(uid: int, groups: set[str], role: Role) -> None:
    who = Identity(uid=uid, gid=uid, user="u", groups=frozenset(groups))
    assert role_of(who, DEALERS, TECHS, service_uid=SERVICE_UID) is role


def test_role_ranks() -> None:
    assert Role.TECHNICIAN.permits(Role.DEALER) and Role.TECHNICIAN.permits(Role.READER)
    assert Role.DEALER.permits(Role.READER) and not Role.DEALER.permits(Role.TECHNICIAN)
    assert not Role.READER.permits(Role.DEALER)


def test_permission_denied_for_non_member(make_server: Any, sock_path: Path) -> None:
    rec = Recorder()
    make_server(rec, identify=fake_identity("mallory", 1002, "firebet"), service_uid=SERVICE_UID)
    with ControlClient(sock_path) as client:
        assert client.request("status")["ok"] is True
        assert client.request("roll", d1=3, d2=4) == {
            "ok": False,
            "error": "permission denied: mallory is not in firebet-dealer or firebet-tech "
            "(needed for roll)",
            "code": "not_permitted",
        }
        assert client.request("clear-halt") == {
            "ok": False,
            "error": "permission denied: mallory is not in firebet-tech (needed for clear-halt)",
            "code": "not_permitted",
        }
        assert client.request("whoami")["role"] == "reader"
    assert [r.op for r in rec.requests] == ["status"]  # refused ops never reach the handler


def test_dealer_may_deal_but_not_clear_halt(make_server: Any, sock_path: Path) -> None:
    rec = Recorder()
    make_server(rec, identify=fake_identity("alice", 1001, DEALERS), service_uid=SERVICE_UID)
    with ControlClient(sock_path) as client:
        for op in ("roll", "void", "surrender", "bet", "cancel", "ack"):
            assert client.request(op)["ok"] is True, op
        for op in ("clear-halt", "diagnostics-on", "diagnostics-off"):
            reply = client.request(op)
            assert (
                reply["error"]
                == f"permission denied: alice is not in firebet-tech (needed for {op})"
            )
    assert all(r.actor == "alice(1001)" for r in rec.requests)


def test_technician_may_do_everything(make_server: Any, sock_path: Path) -> None:
    rec = Recorder()
    make_server(rec, identify=fake_identity("tess", 1003, TECHS), service_uid=SERVICE_UID)
    with ControlClient(sock_path) as client:
        for op in sorted(set(ROLES) - BUILTIN_OPS):
            assert client.request(op)["ok"] is True, op
    assert {r.op for r in rec.requests} == set(ROLES) - BUILTIN_OPS
    assert {r.role for r in rec.requests} == {Role.TECHNICIAN}


def test_custom_group_names_in_refusal(sock_path: Path) -> None:
    server = ControlServer(
        sock_path, Recorder(), "croupiers", "techs",
        identify=fake_identity("bob", 1004, "croupiers"), service_uid=SERVICE_UID,
    )  # fmt: skip
    with server, ControlClient(sock_path) as client:
        assert client.request("roll")["ok"] is True
        assert client.request("clear-halt")["error"] == (
            "permission denied: bob is not in techs (needed for clear-halt)"
        )


def test_permission_error_text() -> None:
    who = Identity(1001, 1001, "alice")
    groups = {Role.DEALER: DEALERS, Role.TECHNICIAN: TECHS}
    assert permission_error(who, "void", Role.DEALER, groups) == (
        "permission denied: alice is not in firebet-dealer or firebet-tech (needed for void)"
    )


def test_real_peer_credentials_of_this_process(make_server: Any, sock_path: Path) -> None:
    rec = Recorder()
    make_server(rec)  # the real identify: SO_PEERCRED + pwd/grp
    with ControlClient(sock_path) as client:
        me = client.request("whoami")
        client.request("clear-halt")
    uid = os.getuid()
    assert me["uid"] == uid
    assert me["user"] == identify(uid, os.getgid()).user
    assert me["actor"] == f"{me['user']}({uid})"
    # the test process is the service's own user (and root here): a technician
    assert me["role"] == "technician"
    assert rec.requests[0].identity.pid == os.getpid()


def test_peer_credentials_of_a_socketpair() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert peer_credentials(a) == (os.getpid(), os.getuid(), os.getgid())


def test_identify_real_and_unknown_users() -> None:
    me = identify(os.getuid(), os.getgid())
    assert me.uid == os.getuid() and me.user != str(os.getuid())
    assert me.groups  # at least the primary group
    ghost = identify(54321, 54321)
    assert ghost.user == "54321" and ghost.groups == frozenset({"54321"})
    assert ghost.actor == "54321(54321)"


def test_root_is_technician_even_when_service_runs_as_someone_else(
    make_server: Any, sock_path: Path
) -> None:
    make_server(identify=fake_identity("root", 0), service_uid=SERVICE_UID)
    with ControlClient(sock_path) as client:
        assert client.request("clear-halt")["ok"] is True


# the socket file ------------------------------------------------------------------------


def test_socket_file_mode_is_0660(make_server: Any, sock_path: Path) -> None:
    server = make_server()
    st = os.stat(sock_path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert server.address == str(sock_path)
    assert [p.name for p in sock_path.parent.iterdir()] == ["control.sock"]  # no temp left


def test_stale_socket_file_is_replaced(make_server: Any, sock_path: Path) -> None:
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_path))
    dead.close()  # a crashed service leaves its socket file behind
    assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
    make_server()
    with ControlClient(sock_path) as client:
        assert client.request("ping")["pong"] is True


def test_refuses_to_start_over_a_live_server(make_server: Any, sock_path: Path) -> None:
    make_server()
    second = ControlServer(sock_path, Recorder(), DEALERS, TECHS)
    with pytest.raises(FirebetError, match="already serving the control socket"):
        second.start()
    with ControlClient(sock_path) as client:  # the first one is untouched
        assert client.request("ping")["ok"] is True


def test_refuses_to_replace_a_regular_file(sock_path: Path) -> None:
    sock_path.write_text("precious")
    server = ControlServer(sock_path, Recorder(), DEALERS, TECHS)
    with pytest.raises(FirebetError, match="is not a socket"):
        server.start()
    assert sock_path.read_text() == "precious"


def test_path_too_long(tmp_path: Path) -> None:
    server = ControlServer(tmp_path / ("s" * 120), Recorder(), DEALERS, TECHS)
    with pytest.raises(UsageError, match="too long"):
        server.start()


def test_stop_removes_the_socket_and_closes_connections(sock_path: Path) -> None:
    server = ControlServer(sock_path, Recorder(), DEALERS, TECHS)
    server.start()
    client = ControlClient(sock_path)
    assert client.request("ping")["ok"] is True
    assert server.serving
    server.stop()
    assert not server.serving
    assert not sock_path.exists()
    with pytest.raises(ServiceUnreachable):
        client.request("ping")  # the old connection was closed
    server.stop()  # idempotent


def test_stop_leaves_a_successors_socket_alone(sock_path: Path) -> None:
    first = ControlServer(sock_path, Recorder(), DEALERS, TECHS)
    first.start()
    sock_path.unlink()  # e.g. an operator removed it and a new service bound the path
    with ControlServer(sock_path, Recorder(), DEALERS, TECHS):
        first.stop()
        assert sock_path.exists()
