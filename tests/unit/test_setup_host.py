"""``.ci/setup-host``, the set-up step of ``make test`` and CI, on a fresh machine stood
for by a PATH that holds only stand-ins: what is missing, who installs it, and the one
command to run when nobody may."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support import ROOT

SCRIPT = ROOT / ".ci" / "setup-host"
BASICS = ("bash", "env", "sed", "cat")  # what the script itself runs, from the real system


def fresh_machine(tmp_path: Path, have: tuple[str, ...], uid: int) -> Path:
    """A bin folder with the basics, ``id -u`` saying ``uid``, stand-ins for ``have`` and a
    recording ``apt-get`` (and ``sudo`` when listed in ``have``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in BASICS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    log = tmp_path / "calls.log"
    stubs = {
        "id": f'[ "$1" = -u ] && echo {uid}',
        "apt-get": f'echo "apt-get $*" >>{log}',
        "python3.11": "exit 0",
    }
    for tool in have:
        stubs.setdefault(tool, "exit 0")
    if "sudo" in have:
        stubs["sudo"] = f'[ "$1" = -n ] && exit 0; echo "sudo $1" >>{log}; "$@"'
    for name, body in stubs.items():
        stub = bin_dir / name
        stub.write_text(f"#!{shutil.which('bash')}\n{body}\n", encoding="utf-8")
        stub.chmod(0o755)
    return bin_dir


def setup_host(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(bin_dir), "SETUP_HOST_SBIN": "", "PYTHON": "python3.11"}
    return subprocess.run(
        [str(bin_dir / "bash"), str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        cwd=ROOT,
    )


ALL = ("mosquitto", "chromium", "chromedriver", "tmux", "pg_ctlcluster", "promtool")


def test_nothing_missing_installs_nothing(tmp_path: Path) -> None:
    bin_dir = fresh_machine(tmp_path, ALL, uid=1000)
    done = setup_host(bin_dir, "python", "test")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not (tmp_path / "calls.log").exists()


def test_root_installs_what_is_missing_and_says_so(tmp_path: Path) -> None:
    bin_dir = fresh_machine(tmp_path, ("tmux", "pg_ctlcluster", "promtool"), uid=0)
    done = setup_host(bin_dir, "python", "test")
    assert done.returncode == 0, done.stderr
    assert "installing mosquitto chromium chromium-driver (apt-get, as root)" in done.stdout
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls == [
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends mosquitto chromium chromium-driver",
    ]


def test_a_user_with_sudo_installs_through_it(tmp_path: Path) -> None:
    have = ("sudo", "mosquitto", "chromium", "chromedriver", "pg_ctlcluster", "promtool")
    bin_dir = fresh_machine(tmp_path, have, uid=1000)
    done = setup_host(bin_dir, "test")
    assert done.returncode == 0, done.stderr
    assert "installing tmux (apt-get, through sudo)" in done.stdout
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls[0] == "sudo apt-get" and calls[-1].endswith("--no-install-recommends tmux")


def test_without_root_or_sudo_it_stops_at_once_with_the_command_to_run(tmp_path: Path) -> None:
    bin_dir = fresh_machine(tmp_path, (), uid=1000)
    done = setup_host(bin_dir, "test")
    assert done.returncode == 1
    assert "sudo apt-get update && sudo apt-get install -y --no-install-recommends mosquitto " \
        "chromium chromium-driver tmux postgresql prometheus" in done.stderr  # fmt: skip
    assert not (tmp_path / "calls.log").exists()


def test_check_only_says_what_is_missing(tmp_path: Path) -> None:
    bin_dir = fresh_machine(tmp_path, ALL, uid=0)
    (bin_dir / "python3.11").unlink()
    done = setup_host(bin_dir, "--check", "python", "test")
    assert done.returncode == 1
    assert "missing: python3.11 python3.11-venv" in done.stdout
    assert not (tmp_path / "calls.log").exists()


def test_a_bad_group_is_bad_usage(tmp_path: Path) -> None:
    done = setup_host(fresh_machine(tmp_path, ALL, uid=0), "browsers")
    assert done.returncode == 2 and "unknown group or option 'browsers'" in done.stderr


def test_make_test_and_ci_call_this_same_step() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "SETUP  := .ci/setup-host" in makefile
    assert "test: setup-test " in makefile and "$(SETUP) python test" in makefile
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test\n" in ci and "apt-get" not in ci  # no set-up of its own to drift
    assert os.access(SCRIPT, os.X_OK)


def test_make_deb_needs_no_debootstrap_only_the_package_test_does(tmp_path: Path) -> None:
    """#33: `make deb` installed debootstrap, which only `make test-deb` uses."""
    bin_dir = fresh_machine(tmp_path, (), uid=0)
    deb = setup_host(bin_dir, "--check", "deb")
    assert deb.returncode == 1 and "missing: dpkg " in deb.stdout + " "
    assert "debootstrap" not in deb.stdout
    test_deb = setup_host(bin_dir, "--check", "deb-test")
    assert "missing: dpkg debootstrap" in test_deb.stdout
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "deb: $(STAMP)\n\t@$(SETUP) deb\n" in makefile
    assert "test-deb: $(STAMP)\n\t@$(SETUP) deb-test\n" in makefile
