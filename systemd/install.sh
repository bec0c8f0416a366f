#!/usr/bin/env bash
# Install or upgrade firebet as a systemd service on the Raspberry Pi (run as root).
#
#   sudo systemd/install.sh              install or upgrade, then (re)start the service
#   sudo systemd/install.sh --no-start   install or upgrade, leave the service stopped
#   sudo systemd/install.sh --rollback   go back to the version before the last upgrade
#   systemd/install.sh --dry-run         print what it would do, change nothing
#
# Idempotent: run it again after `git pull` to upgrade. It never touches an existing
# /etc/firebet/table.toml, the journal key /etc/firebet/journal.key or the journal in
# /var/lib/firebet.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${FIREBET_PREFIX:-/opt/firebet}"
ETC="${FIREBET_ETC:-/etc/firebet}"
UNIT_DIR="${FIREBET_UNIT_DIR:-/etc/systemd/system}"
BIN_LINK="${FIREBET_BIN_LINK:-/usr/local/bin/firebet}"
BASH_COMPLETION_DIR="${FIREBET_BASH_COMPLETION_DIR:-/usr/share/bash-completion/completions}"
ZSH_COMPLETION_DIR="${FIREBET_ZSH_COMPLETION_DIR:-/usr/local/share/zsh/site-functions}"
MAN_DIR="${FIREBET_MAN_DIR:-/usr/local/share/man/man1}"
PYTHON="${PYTHON:-python3}"
SERVICE_USER=firebet
GROUPS_NEEDED=(firebet firebet-dealer firebet-tech gpio dialout firebet-key)
VENV="$PREFIX/.venv"

DRY_RUN=0
START=1
ROLLBACK=0

usage() {
    sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

for arg in "$@"; do
    case "$arg" in
        --dry-run) DRY_RUN=1 ;;
        --no-start) START=0 ;;
        --rollback) ROLLBACK=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
    esac
done

say() { printf '==> %s\n' "$*"; }
warn() { printf 'install.sh: warning: %s\n' "$*" >&2; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

# run a command that changes the system; with --dry-run only print it
run() {
    if [ "$DRY_RUN" = 1 ]; then
        printf '+'
        printf ' %q' "$@"
        printf '\n'
    else
        "$@"
    fi
}

# run a command and write what it prints to FILE; with --dry-run only print it
run_to() {
    local file="$1"
    shift
    if [ "$DRY_RUN" = 1 ]; then
        printf '+'
        printf ' %q' "$@"
        printf ' > %q\n' "$file"
    else
        "$@" >"$file"
    fi
}

have_systemd() { [ -d /run/systemd/system ]; }

systemctl_do() {
    if have_systemd || [ "$DRY_RUN" = 1 ]; then
        run systemctl "$@"
    else
        warn "systemd is not running here: skipped 'systemctl $*'"
    fi
}

preflight() {
    if [ "$DRY_RUN" = 0 ] && [ "$(id -u)" != 0 ]; then
        die "run as root: sudo $0 $*"
    fi
    [ -f "$REPO/pyproject.toml" ] || die "$REPO does not look like the firebet repository"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
        || die "$PYTHON is missing or older than 3.11 (Raspberry Pi OS Bookworm has 3.11)"
    "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
        || die "the venv module is missing: sudo apt install python3-venv"
    "$PYTHON" -c 'import lgpio' 2>/dev/null \
        || warn "python3-lgpio is not installed: the service cannot drive real pins (sudo apt install python3-lgpio)"
}

create_groups_and_user() {
    local g
    for g in "${GROUPS_NEEDED[@]}"; do
        if getent group "$g" >/dev/null; then
            say "group $g exists"
        else
            say "creating group $g"
            run groupadd --system "$g"
        fi
    done
    if id -u "$SERVICE_USER" >/dev/null 2>&1; then
        say "user $SERVICE_USER exists"
    else
        say "creating system user $SERVICE_USER"
        run useradd --system --gid firebet --no-create-home --home-dir /var/lib/firebet \
            --shell /usr/sbin/nologin --comment "firebet table controller" "$SERVICE_USER"
    fi
    # the unit adds these too (SupplementaryGroups=); here they serve `sudo -u firebet ...`
    run usermod --append --groups gpio,dialout,firebet-key "$SERVICE_USER"
}

install_code() {
    run install -d -m 0755 "$PREFIX" "$PREFIX/docs"
    if [ -x "$VENV/bin/python" ]; then
        say "keeping the current version in $VENV.previous for --rollback"
        run rm -rf "$VENV.previous"
        run cp -a "$VENV" "$VENV.previous"
    else
        say "creating $VENV (with the system's site packages, for python3-lgpio)"
        run "$PYTHON" -m venv --system-site-packages "$VENV"
    fi
    say "installing firebet from $REPO"
    run "$VENV/bin/pip" install --quiet --disable-pip-version-check "$REPO"
    # the same version number twice still replaces the code with this checkout's
    run "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$REPO"
    run install -m 0644 "$REPO"/docs/*.md "$PREFIX/docs/"
    run ln -sfn "$VENV/bin/firebet" "$BIN_LINK"
}

# shell completion and the man page, generated from the installed version's own parser
install_shell_help() {
    say "installing shell completion (bash, zsh) and the man page firebet(1)"
    local gen=("$VENV/bin/python" -m controller.cli.generated)
    run install -d -m 0755 "$BASH_COMPLETION_DIR" "$ZSH_COMPLETION_DIR" "$MAN_DIR"
    run_to "$BASH_COMPLETION_DIR/firebet" "${gen[@]}" completion bash
    run_to "$ZSH_COMPLETION_DIR/_firebet" "${gen[@]}" completion zsh
    run_to "$MAN_DIR/firebet.1" "${gen[@]}" man
    if [ "$DRY_RUN" = 0 ] && command -v mandb >/dev/null 2>&1; then
        mandb --quiet >/dev/null 2>&1 || true
    fi
}

install_config() {
    run install -d -m 0750 -o root -g firebet "$ETC"
    if [ -e "$ETC/table.toml" ]; then
        say "keeping the existing $ETC/table.toml"
    else
        say "installing the default configuration as $ETC/table.toml (edit it for this table)"
        run install -m 0640 -o root -g firebet "$REPO/config/table.toml" "$ETC/table.toml"
        # clients read the socket path from this file: the one the unit serves
        run sed -i 's#^socket = "control.sock"#socket = "/run/firebet/control.sock"#' "$ETC/table.toml"
    fi
}

# program verification: the digest of every installed file, checked by the service at start
write_manifest() {
    say "writing the program manifest $ETC/program.manifest"
    run "$VENV/bin/python" -m controller.service.integrity write "$ETC/program.manifest"
    run chown root:firebet "$ETC/program.manifest"
}

install_key() {
    # the journal's secret: the chain is HMAC-SHA256 with it (docs/journal.md). Never replaced:
    # a journal whose key is gone halts the table. Back it up with the table's papers.
    # Root's, 0640, group firebet-key (the service's own group: dealers are in firebet), so
    # a service that is broken into cannot replace it; a key from before #33 is moved over.
    if [ -e "$ETC/journal.key" ]; then
        say "keeping the existing $ETC/journal.key (root's, 0640, group firebet-key)"
    else
        say "making the journal key $ETC/journal.key (root's, 0640, group firebet-key): back it up"
        run sh -c 'umask 077 && "$1" -c "import secrets; print(secrets.token_hex(32))" > "$2"' \
            sh "$VENV/bin/python" "$ETC/journal.key"
    fi
    run chown root:firebet-key "$ETC/journal.key"
    run chmod 0640 "$ETC/journal.key"
}

install_unit() {
    say "installing $UNIT_DIR/firebet.service"
    run install -m 0644 "$REPO/systemd/firebet.service" "$UNIT_DIR/firebet.service"
    systemctl_do daemon-reload
    systemctl_do enable firebet.service
    if [ "$START" = 1 ]; then
        say "(re)starting firebet"
        systemctl_do restart firebet.service
    fi
}

rollback() {
    [ -x "$VENV.previous/bin/python" ] || die "nothing to roll back to: no $VENV.previous"
    say "rolling back to the version kept in $VENV.previous"
    systemctl_do stop firebet.service
    run rm -rf "$VENV.failed"
    run mv "$VENV" "$VENV.failed"
    run mv "$VENV.previous" "$VENV"
    write_manifest
    if [ "$START" = 1 ]; then
        systemctl_do start firebet.service
    fi
    say "rolled back; the version you left is in $VENV.failed"
}

main() {
    preflight "$@"
    if [ "$DRY_RUN" = 1 ]; then
        say "dry run: nothing is changed"
    fi
    if [ "$ROLLBACK" = 1 ]; then
        rollback
        return
    fi
    create_groups_and_user
    install_code
    install_shell_help
    install_config
    write_manifest
    install_key
    install_unit
    say "done. Next: edit $ETC/table.toml, add dealers and technicians to their groups"
    say "(usermod -aG firebet,firebet-dealer NAME / firebet,firebet-tech NAME), then: firebet doctor"
}

main "$@"
