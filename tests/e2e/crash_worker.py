"""Crash-test worker: applies a seeded list of table commands through engine + journal.

``python tests/crash_worker.py STATE_DIR SEED COUNT START`` prints ``READY`` after
recovery, ``ACK <i>`` after command ``i`` is durably journaled, ``DONE`` at the end.
Paced by the test: before each command it reads one line from standard input; at the
end of its input it runs the rest freely (so a kill finds at most one command in flight,
however busy the machine, and the test's count of kills never depends on timing).
On a restart the test passes the first un-ACKed index as START: that command is
sent again, like a reader retransmitting a ROLL (same seq: the engine sees a
duplicate) or a client repeating a request (recognised by the last record).
"""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from controller.core.commands import Ack, Bet, Cancel, Command, Roll, Surrender, Void  # noqa: E402
from controller.core.engine import Engine  # noqa: E402
from controller.journal import Journal, recover  # noqa: E402
from controller.journal.play import decide  # noqa: E402

SNAPSHOT_EVERY = 7
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def script(seed: int, count: int) -> list[Command]:
    """The seeded table session: mostly reader rolls, some dealer actions."""
    rnd = random.Random(seed)
    commands: list[Command] = []
    for i in range(count):
        at = (EPOCH + timedelta(seconds=i)).isoformat()
        pick = rnd.random()
        if pick < 0.78:
            commands.append(
                Roll(rnd.randint(1, 6), rnd.randint(1, 6), seq=i % 65536, actor="reader", at=at)
            )
        elif pick < 0.90:
            commands.append(Bet(rnd.randint(1, 4), rnd.randint(1, 5), actor="dealer", at=at))
        elif pick < 0.92:
            commands.append(Cancel(rnd.randint(1, 4), actor="dealer", at=at))
        elif pick < 0.95:
            commands.append(Void(actor="dealer", at=at))
        elif pick < 0.97:
            commands.append(Surrender(kind="voluntary", actor="boxman", at=at))
        else:
            commands.append(Ack(actor="surveillance", at=at))
    return commands


def main(argv: list[str]) -> int:
    state_dir, seed, count, start = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    engine = Engine()
    commands = script(seed, count)
    with Journal(Path(state_dir) / "journal.db", snapshot_every=SNAPSHOT_EVERY) as journal:
        recovered = recover(journal, engine.rules)
        if recovered.halted is not None:
            print(f"HALTED {recovered.halted.describe()}", flush=True)
            return 3
        print("READY", flush=True)
        paced = True
        for i in range(start, count):
            if paced and not sys.stdin.readline():
                paced = False  # the test closed our input: the rest at full speed
            command = commands[i]
            if i == start and not isinstance(command, Roll):
                last = journal.last()
                if last is not None and last.kind == "command" and last.command() == command:
                    print(f"ACK {i}", flush=True)  # it was durable: only the reply was lost
                    continue
            decide(journal, recovered.replay, command)
            print(f"ACK {i}", flush=True)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
