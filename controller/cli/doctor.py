"""``firebet doctor``: a technician's checklist, each failure with the command that fixes it.

Config, where the table is (state directory and journal key), serial device and
permissions, GPIO with the configured pin factory, pins not used twice, journal, free
disk, clock (and its synchronisation: a Pi has no clock battery), and the service
itself. Exit 0 when every check passes (a warning, marked ``!``, does not fail it), 2
when the configuration is bad, 1 when any other fails.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.cli import options as paths
from controller.cli.wording import reader_answers, reader_identity
from controller.control.client import ControlClient
from controller.control.ops import Op
from controller.core.config import Config
from controller.core.errors import ConfigError, FirebetError, ServiceUnreachable
from controller.journal import Journal, JournalKeyUnreadable, parse_time, recover, verify
from controller.link.cursor import CursorError, CursorFile
from controller.link.probe import probe_broker
from controller.service.integrity import check_program

MIN_FREE_MB = 100


@dataclass
class Check:
    """One line of the checklist; ``warning``: passed, but worth a look (``!``)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "fix": self.fix,
            "warning": self.warning,
        }

    @property
    def mark(self) -> str:
        """``✓`` passed, ``!`` a warning, ``✗`` failed."""
        return "!" if self.warning else "✓" if self.ok else "✗"


def clock_synchronised(
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
) -> tuple[bool | None, str]:
    """Whether the system clock is synchronised (NTP), as ``timedatectl`` says, and how it
    was told; None when it cannot be told. ``run`` is injectable for tests."""
    try:
        done = run(
            ["timedatectl", "show", "--property=NTPSynchronized", "--property=NTP"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except FileNotFoundError:
        return None, "timedatectl is not installed (no systemd?)"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"timedatectl did not answer: {exc}"
    values = dict(
        line.split("=", 1) for line in done.stdout.splitlines() if "=" in line
    )  # NTPSynchronized=yes / NTP=yes
    synced = values.get("NTPSynchronized")
    if done.returncode != 0 or synced not in ("yes", "no"):
        why = (done.stderr or done.stdout).strip().splitlines()
        return None, f"timedatectl cannot tell ({why[-1] if why else f'exit {done.returncode}'})"
    ntp = "NTP on" if values.get("NTP") == "yes" else "NTP off"
    return synced == "yes", f"timedatectl: synchronised {synced}, {ntp}"


SERVICE_USER = "firebet"  # User= of systemd/firebet.service


UNIT = "firebet.service"
SANDBOX_KEYS = (
    "LoadState", "PrivateNetwork", "RestrictAddressFamilies", "IPAddressDeny", "IPAddressAllow",
)  # fmt: skip
FLOOR_DROP_IN = (
    "sudo install -D -m 0644 /usr/share/firebet/floor-link.conf "
    "/etc/systemd/system/firebet.service.d/floor-link.conf && sudo systemctl daemon-reload "
    "&& sudo systemctl restart firebet   (docs/install.md, The floor link)"
)


def unit_properties(unit: str = UNIT) -> dict[str, str] | None:
    """The unit's sandbox as systemd has it loaded, drop-ins included (``systemctl show``);
    None where there is no systemd or no such unit (a bench, a container)."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None
    try:
        done = subprocess.run(
            [systemctl, "show", unit, *(f"--property={k}" for k in SANDBOX_KEYS)],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    found = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    if done.returncode != 0 or found.get("LoadState") != "loaded":
        return None
    return found


def sandbox_problem(props: dict[str, str]) -> str | None:
    """Why the unit's sandbox keeps its floor link from the broker (None: it does not):
    doctor itself runs outside the sandbox, so reaching the broker proves nothing there."""
    families = props.get("RestrictAddressFamilies", "").split()
    allow_list = bool(families) and not families[0].startswith("~")
    denied = {f.lstrip("~") for f in families} if not allow_list else set()
    why = []
    if props.get("PrivateNetwork") == "yes":
        why.append("PrivateNetwork=yes")
    if (allow_list and "AF_INET" not in families) or "AF_INET" in denied:
        why.append(f"RestrictAddressFamilies={' '.join(families)}")
    deny = props.get("IPAddressDeny", "").split()
    allowed = props.get("IPAddressAllow", "").split()  # the broker's alone: doctor's probe says
    if not allowed and any(d in ("0.0.0.0/0", "::/0", "any") for d in deny):
        why.append(f"IPAddressDeny={' '.join(deny)}")
    if not why:
        return None
    return f"the unit {UNIT} allows the link no network ({', '.join(why)})"


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _group_fix(group: str) -> str:
    """Who to add to ``group``: the caller, or the service's user when root asks (root needs
    no group, the service does)."""
    who = SERVICE_USER if os.geteuid() == 0 else _user()
    return f"sudo usermod -aG {group} {who}" + (
        "" if who == SERVICE_USER else " (then log in again)"
    )


def _frames(counters: dict[str, int]) -> str:
    """``ok 107, bad 3 (bad_checksum 2, overlong 1)``: the reader's counters in words."""
    bad = {k: v for k, v in counters.items() if k != "ok" and v}
    text = f"ok {counters.get('ok', 0)}, bad {sum(bad.values())}"
    return text + (" (" + ", ".join(f"{k} {v}" for k, v in bad.items()) + ")" if bad else "")


class Doctor:
    """Runs the checks in order; later checks use what earlier ones found."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.checks: list[Check] = []
        self.config: Config | None = None
        self.service: dict[str, Any] | None = None
        self.last_record_at: datetime | None = None  # read by the journal check, for the clock
        self.clock_sync = clock_synchronised  # injectable for tests
        self.unit_sandbox = unit_properties  # likewise

    def add(self, name: str, ok: bool, detail: str, fix: str = "") -> None:
        self.checks.append(Check(name, ok, detail, fix if not ok else ""))

    def warn(self, name: str, detail: str, fix: str) -> None:
        """A check that passed with a warning: shown with its fix, does not fail doctor."""
        self.checks.append(Check(name, True, detail, fix, warning=True))

    def run(self) -> list[Check]:
        steps: list[Callable[[], None]] = [
            self.check_config,
            self.check_where,
            self.check_program,
            self.check_service,
            self.check_rules,
            self.check_serial,
            self.check_gpio,
            self.check_journal,
            self.check_disk,
            self.check_clock,
            self.check_floor,
        ]
        for step in steps:
            if step != self.check_config and self.config is None:
                break
            try:
                step()
            except Exception as exc:  # a check that crashes is a failed check, not a crash
                self.add(
                    step.__name__.removeprefix("check_"), False, f"{type(exc).__name__}: {exc}"
                )
        return self.checks

    def check_config(self) -> None:
        try:
            source = paths.config_source(self.args.config)
            self.where = paths.locate(self.args)
            self.config = self.where.config
        except ConfigError as exc:
            self.add(
                "config", False, str(exc), f"edit {exc.source} and fix {exc.key or 'the file'}"
            )
            return
        c = self.config
        self.add(
            "config",
            True,
            f"{source}: table {c.table.id}, {c.table.game}, preset {c.preset}, "
            f"{len(c.pins())} pins, each used once",
        )

    def check_where(self) -> None:
        """Which state directory and journal key every other check (and command) uses."""
        w = self.where
        self.add(
            "table",
            True,
            f"state directory {w.state_dir.absolute()} ({w.state_from}); journal key "
            f"{w.key_file.absolute()} ({w.key_from})",
        )

    def check_program(self) -> None:
        result = check_program()
        self.add(
            "program",
            result.ok,
            result.describe(),
            "reinstall firebet (sudo systemd/install.sh), then sudo systemctl restart firebet",
        )

    @property
    def state_dir(self) -> Path:
        return self.where.state_dir

    def check_service(self) -> None:
        assert self.config is not None
        path = paths.socket_path(self.config, self.args.socket, self.state_dir)
        try:
            with ControlClient(path, timeout=3.0) as client:
                reply = client.request(Op.STATUS)
        except ServiceUnreachable as exc:
            self.add(
                "service",
                False,
                str(exc),
                "sudo systemctl start firebet   (logs: journalctl -u firebet -e)",
            )
            return
        if not reply.get("ok", True):
            self.add(
                "service", False, f"answers but: {reply.get('error')}", "journalctl -u firebet -e"
            )
            return
        self.service = reply
        mode = reply.get("mode")
        fix = {
            "halted": "firebet journal verify, deal with the cause, then firebet clear-halt",
            "reader_fault": "see the serial check below; firebet diag reader",
            "storage_fault": "free disk space in the state directory or fix the read-only "
            "file system; play resumes by itself (runbook: Disk full or read-only)",
        }.get(str(mode), "")
        self.add("service", mode == "running", f"answering on {path}: mode {mode}", fix)

    def check_rules(self) -> None:
        """The rules the running service plays under: a warning when they changed at its
        start, and when that change waits for the hand in play to end (a hand keeps the
        rules it opened under: docs/rules.md)."""
        rules = (self.service or {}).get("rules")
        if not isinstance(rules, dict):
            return  # no service answered (its check says so), or no rules record yet
        changed = rules.get("changed") or {}
        waiting = rules.get("pending")
        if isinstance(waiting, dict):
            self.warn(
                "rules",
                f"a rules change is pending (record {waiting.get('record')}): {waiting.get('why')}",
                "nothing to do if the change was meant (firebet status shows when it "
                "takes effect); if not, restart the service on the configuration the "
                "hand opened under before the hand ends",
            )
        elif changed:
            what = ", ".join(sorted(changed))
            self.warn(
                "rules",
                f"the rules changed at the last start (record {rules.get('record')}): {what}",
                "firebet history shows which rules record decided each hand",
            )
        else:
            self.add("rules", True, f"in force since record {rules.get('record')}")

    def check_serial(self) -> None:
        assert self.config is not None
        port = self.args.serial or self.config.reader.port
        if self.service is not None:
            reader = self.service.get("reader", {})
            ok = bool(reader.get("connected")) and not reader.get("fault")
            counters = reader.get("counters", {})
            self.add(
                "serial",
                ok,
                f"{reader.get('port')}{reader_identity(reader)}: the service reads it: "
                f"connected {reader.get('connected')}, fault {reader.get('fault') or 'none'}; "
                f"frames {_frames(counters)}{reader_answers(reader)}"
                + (f"; last NAK {reader['last_nak']}" if reader.get("last_nak") else ""),
                "check the reader's cable and power; firebet diag reader (with the service "
                "stopped) shows every frame",
            )
            return
        if "://" in port:
            self.add("serial", True, f"{port} is a URL: opened when the service starts")
            return
        device = Path(port)
        if not device.exists():
            self.add(
                "serial",
                False,
                f"{port} does not exist",
                "plug the reader in (ls /dev/ttyUSB* /dev/ttyACM*), or set reader.port",
            )
            return
        if not os.access(device, os.R_OK | os.W_OK):
            self.add(
                "serial",
                False,
                f"{port}: no read/write permission for {_user()}",
                _group_fix("dialout"),
            )
            return
        from controller.core.errors import HardwareError
        from drivers.serial_reader import open_port

        try:
            open_port(port, self.config.reader.baud, timeout=0.1).close()
        except HardwareError as exc:
            self.add("serial", False, str(exc), "firebet diag reader")
            return
        self.add("serial", True, f"{port} opens at {self.config.reader.baud} baud")

    def check_gpio(self) -> None:
        assert self.config is not None
        name = self.args.pin_factory
        if self.service is not None:
            self.add("gpio", True, "the service holds the pins (markers as the service shows them)")
            return
        from drivers.pins import make_pin_factory

        try:
            factory = make_pin_factory(name)
        except FirebetError as exc:
            self.add("gpio", False, str(exc), f"{_group_fix('gpio')}; or --pin-factory")
            return
        from gpiozero import LED

        claimed: list[Any] = []
        try:
            for key, pin in self.config.pins().items():
                try:
                    claimed.append(LED(pin, pin_factory=factory))
                except Exception as exc:
                    self.add(
                        "gpio",
                        False,
                        f"{key} (BCM {pin}) cannot be claimed: {exc}",
                        "stop whatever holds the pin (the service?) or fix the pin in the config",
                    )
                    return
        finally:
            for device in claimed:
                device.close()
            factory.close()
        self.add(
            "gpio", True, f"{len(claimed)} pins claimed and released ({type(factory).__name__})"
        )

    def check_journal(self) -> None:
        assert self.config is not None
        journal = Journal.open(self.state_dir, self.config, read_only=True)
        if not journal.path.exists() and not journal.files.traces():
            self.add("journal", True, f"no journal yet at {journal.path} (a new table)")
            return
        rules = self.config.firebet
        with journal:
            try:
                recover(journal, rules)
            except JournalKeyUnreadable as exc:
                self.add("journal", False, str(exc), "sudo firebet doctor")
                return
            report = verify(journal, rules)
            last = journal.last() if report.records else None
            self.last_record_at = parse_time(last.at) if last is not None else None
            self.last_record = last.record if last is not None else 0
        self.add(
            "journal",
            report.ok,
            report.summary(),
            f"firebet journal verify --state-dir {self.state_dir}; after dealing with the cause: "
            "firebet clear-halt",
        )

    def check_floor(self) -> None:
        """The floor link: the broker answers (probed as nobody: doctor never takes the
        table's session); the table's login as the running service's link reports it; the
        publish cursor and backlog."""
        assert self.config is not None
        floor = self.config.floor
        if not floor.enabled:
            self.add("floor", True, "no floor link ([floor] broker is empty)")
            return
        fix = (
            "check [floor] broker, username and password_file, the network and the broker's "
            "log on the floor server (docs/floor.md)"
        )
        props = self.unit_sandbox()
        problem = sandbox_problem(props) if props is not None else None
        if problem is not None:  # the broker may answer doctor and never the service
            self.add("floor sandbox", False, f"{problem}: it cannot reach {floor.broker}",
                     FLOOR_DROP_IN)  # fmt: skip
        probe = probe_broker(floor, f"firebet-doctor-{os.getpid()}")
        try:
            cursor: Any = CursorFile(self.state_dir).load().record
        except CursorError as exc:
            cursor = f"unreadable ({exc})"
        link = (self.service or {}).get("floor") or {}
        if link.get("enabled"):  # the running service's own view is the fresher one
            cursor, backlog = link.get("cursor"), link.get("backlog")
        else:
            head = getattr(self, "last_record", None)
            backlog = head - cursor if isinstance(head, int) and isinstance(cursor, int) else "?"
        where = f"{floor.broker} as {floor.username or '(no user)'}"
        if probe.problem is not None:
            self.add(
                "floor", False, f"{where}: {probe.problem}; cursor {cursor}, backlog {backlog}", fix
            )
            return
        reached = f"{where}: the broker answers (probed as nobody, so no session is taken)"
        shown = f"publish cursor {cursor}, backlog {backlog}"
        if link.get("enabled"):
            ok = bool(link.get("connected"))
            login = (
                "the service's link is connected" if ok else "the service's link is NOT connected"
            )
            if link.get("last_error"):
                login += f", last error: {link['last_error']}"
            self.add("floor", ok, f"{reached}; {login}; {shown}", "" if ok else fix)
            return
        self.warn(
            "floor",
            f"{reached}; the table's login is not checked without the service (its link "
            f"reports it: firebet status); {shown}",
            "start the service and look at firebet status (floor: connected)",
        )

    def check_disk(self) -> None:
        where = self.state_dir if self.state_dir.exists() else Path(".")
        free_mb = shutil.disk_usage(where).free // (1024 * 1024)
        self.add(
            "disk",
            free_mb >= MIN_FREE_MB,
            f"{free_mb} MB free in {where.resolve()}",
            f"free space under {where.resolve()} (old logs: sudo journalctl --vacuum-size=50M)",
        )

    def check_clock(self) -> None:
        assert self.config is not None
        now = datetime.now(UTC)
        if now.year < 2025:
            self.add("clock", False, f"the clock says {now:%Y-%m-%d}", "timedatectl; check NTP")
            return
        last_at = self.last_record_at
        if last_at is not None and last_at > now:
            self.add(
                "clock",
                False,
                f"the clock ({now:%Y-%m-%d %H:%M}) is behind the journal's last record ({last_at})",
                "timedatectl set-ntp true; check the network time source",
            )
            return
        synced, how = self.clock_sync()
        shown = f"{now:%Y-%m-%d %H:%M:%S} UTC"
        fix = (
            "the journal's times come from this clock and a Pi has no clock battery: "
            "sudo timedatectl set-ntp true, and give the Pi a time server it can reach "
            "(timedatectl timesync-status)"
        )
        if synced is None:
            self.warn("clock", f"{shown}; cannot tell whether it is synchronised: {how}", fix)
        elif not synced:
            self.warn("clock", f"{shown}; NOT synchronised ({how})", fix)
        else:
            self.add("clock", True, f"{shown}, synchronised ({how})")


def run(args: argparse.Namespace) -> int:
    checks = Doctor(args).run()
    if args.json:
        for c in checks:
            print(json.dumps(c.to_dict()))
    else:
        for c in checks:
            print(f"{c.mark} {c.name:<8} {c.detail}")
            if c.fix:
                print(f"           fix: {c.fix}")
    failed = [c for c in checks if not c.ok]
    if failed and not args.json:
        print(f"{len(failed)} check(s) failed", file=sys.stderr)
    if any(c.name == "config" for c in failed):
        return 2  # a bad configuration is bad input, as for every command
    return 1 if failed else 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor", help="technician's checklist: config, serial, GPIO, journal, disk, service"
    )
    paths.add_location_options(p)
    p.add_argument("--serial", metavar="URL", help="reader port to check (reader.port)")
    p.add_argument("--pin-factory", metavar="NAME", help="gpiozero pin factory to check with")
    p.add_argument("--json", action="store_true", help="one JSON object a line per check")
    p.set_defaults(func=run)
