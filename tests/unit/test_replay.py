"""`firebet replay`: the script format and the JSON lines of docs/cli.md, run as the real CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.cli.replay import json_line
from controller.core.commands import Ack, Bet, Cancel, Command, Roll, Surrender, Void
from controller.core.config import FireBetRules
from controller.core.engine import Engine
from controller.core.errors import ScriptError
from controller.core.events import RollVoided, Settlement
from controller.core.script import (
    Replayer,
    parse_line,
    parse_script,
    script_lines,
)
from controller.core.state import TableState


def replay(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "hand.txt"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, "-m", "controller", "replay", str(path), *args],
        capture_output=True,
        text=True,
    )


CLI_EXAMPLE = """\
# the example line of docs/cli.md
bet 3 5
6 6        # craps on the come-out
3 3
3 3        # 6 made: 1st
4 4
4 4        # 8 made: 2nd
2 3
3 2        # 5 made: 3rd
1 3
2 2        # 4 made: 4th
2 2
3 4        # loser 7
"""


def test_spec_example_line(tmp_path: Path) -> None:
    proc = replay(tmp_path, CLI_EXAMPLE, "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [json.loads(x) for x in lines] == [
        {
            "hand": 1,
            "points": [6, 8, 5, 4],
            "unique_points": 4,
            "result": "win",
            "odds_to_one": 24,
            "payouts": {"3": 120},
        }
    ]
    assert lines[0] == (
        '{"hand": 1, "points": [6, 8, 5, 4], "unique_points": 4, "result": "win", '
        '"odds_to_one": 24, "payouts": {"3": 120}}'
    )


def test_every_hand_ending_at_a_loser_7_gets_a_line_with_or_without_wagers(tmp_path: Path) -> None:
    proc = replay(tmp_path, "2 2\n3 4\nbet 1 2\n5 5\n1 6\n", "--json")
    hands = [json.loads(x) for x in proc.stdout.splitlines()]
    assert hands == [
        {
            "hand": 1,
            "points": [],
            "unique_points": 0,
            "result": "lose",
            "odds_to_one": 0,
            "payouts": {},
        },
        {
            "hand": 2,
            "points": [],
            "unique_points": 0,
            "result": "lose",
            "odds_to_one": 0,
            "payouts": {"1": 0},
        },
    ]


def test_a_voided_settlement_is_not_printed(tmp_path: Path) -> None:
    proc = replay(tmp_path, "bet 1 5\n2 2\n3 4\nvoid\n2 2\n", "--json")
    assert proc.returncode == 0 and proc.stdout == ""


def test_surrendered_hand_keeps_its_number_until_it_settles(tmp_path: Path) -> None:
    script = "bet 1 5\n2 2\n2 2\nsurrender\n3 3\n3 3\n3 3\n4 3\n2 2\n3 4\n"
    hands = [json.loads(x) for x in replay(tmp_path, script, "--json").stdout.splitlines()]
    assert [(h["hand"], h["points"]) for h in hands] == [(1, [4, 6]), (2, [])]


def test_pay_six_immediately_prints_at_the_sixth_point(tmp_path: Path) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text("[firebet]\npreset = 'custom'\npay_six_immediately = true\n")
    points = "2 2\n2 2\n2 3\n2 3\n3 3\n3 3\n4 4\n4 4\n4 5\n4 5\n5 5\n5 5\n"
    proc = replay(tmp_path, "bet 2 5\n" + points, "--json", "--config", str(cfg))
    (line,) = [json.loads(x) for x in proc.stdout.splitlines()]
    assert line["unique_points"] == 6 and line["payouts"] == {"2": 4995}
    proc = replay(tmp_path, "bet 2 5\n" + points + "2 2\n3 4\n", "--json", "--config", str(cfg))
    assert len(proc.stdout.splitlines()) == 1


def test_refused_action_goes_to_stderr_and_the_replay_goes_on(tmp_path: Path) -> None:
    proc = replay(tmp_path, "bet 3 6\nbet 3 5\n2 2\n3 4\n", "--json")
    assert proc.returncode == 0
    assert "hand.txt:1: refused: position 3: $6 is over the $5 maximum" in proc.stderr
    assert json.loads(proc.stdout)["payouts"] == {"3": 0}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("7 1", "die 1 shows 7"),
        ("3", "a roll is two dice"),
        ("3 4 5", "a roll is two dice"),
        ("bet x", "a bet is 'bet POSITION AMOUNT'"),
        ("bet x 5", "the position must be a whole number"),
        ("bet 3 2.50", "whole dollars"),
        ("cancel", "a cancel is 'cancel POSITION'"),
        ("surrender maybe", "voluntary' or 'compulsory"),
        ("roll 3 4", "not a script item"),
    ],
)
def test_malformed_line_exits_2_with_its_line_number(tmp_path: Path, line: str, why: str) -> None:
    proc = replay(tmp_path, f"# header\n3 4\n{line}\n", "--json")
    assert proc.returncode == 2
    assert "hand.txt:3:" in proc.stderr and why in proc.stderr
    assert proc.stdout == ""


def test_a_bad_line_late_in_a_long_script_stops_it_before_any_output(tmp_path: Path) -> None:
    hands = "bet 3 6\n2 2\n3 4\n" * 30_000  # a refusal and a settled hand each time
    proc = replay(tmp_path, hands + "3 4 5\n", "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    (message,) = proc.stderr.splitlines()  # the error alone: no refusal before it
    assert message.startswith("firebet: ") and message.endswith(
        "hand.txt:90001: a roll is two dice, like '3 4': '3 4 5'"
    ), message
    proc = replay(tmp_path, hands)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(proc.stderr.splitlines()) == 30_000
    assert lines[-2].startswith("now: hand 30001,") and len(lines) == 30_002
    assert lines[-1] == "money: 30,000 hands settled; wagers $0, paid $0, hold $0"


def test_refusals_and_hands_come_out_in_the_order_they_happened(tmp_path: Path) -> None:
    path = tmp_path / "hand.txt"
    path.write_text("bet 3 6\n2 2\n3 4\n2 2\nbet 3 9\n3 4\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "replay", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one pipe: the order the two streams were written in
        text=True,
    )
    said = [line.split(": ", 1)[-1][:18] for line in proc.stdout.splitlines()]
    assert said == [
        "refused: position ", "0 different points", "refused: position ",
        "0 different points", "hand 3, shooter 3,", "2 hands settled; w",
    ], proc.stdout  # fmt: skip


def test_comments_and_blank_lines_are_ignored() -> None:
    assert parse_line("   # just a note") is None
    assert parse_line("") is None
    with pytest.raises(ScriptError):
        parse_line("void now")


def test_table_printout_for_people(tmp_path: Path) -> None:
    proc = replay(tmp_path, CLI_EXAMPLE)
    assert "hand 1: 4 different points (6, 8, 5, 4) - WIN 24 to 1" in proc.stdout
    assert "position 3: $5 wins $120" in proc.stdout


def test_missing_script_file_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "replay", str(tmp_path / "nope.txt")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "nope.txt" in proc.stderr


@pytest.mark.parametrize(
    ("line", "word"),
    [
        ("٣ ١", "'٣'"),  # Arabic-Indic digits: int() would take them as 3 and 1
        ("3 ²", "'²'"),  # superscript: isdigit() is true, int() raises
        ("① 2", "'①'"),
        ("bet ³ 5", "'³'"),
        ("bet 3 ５", "'５'"),  # fullwidth
        ("cancel ٣", "'٣'"),
        ("-1 3", "'-1'"),
    ],
)
def test_only_ascii_digits_are_numbers_in_a_script(tmp_path: Path, line: str, word: str) -> None:
    proc = replay(tmp_path, f"bet 1 5\n{line}\n3 4\n", "--json")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "hand.txt:2:" in proc.stderr and word in proc.stderr
    assert "digits 0-9" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("odd", ["\f", "\v", "\u2028", "\u2029", "\x85", "\x1c", "\r"])
def test_line_n_is_the_nth_newline_terminated_line(tmp_path: Path, odd: str) -> None:
    # the odd character sits inside a comment, so the lines themselves are good ...
    script = f"# a note{odd}with a line separator in it\n3 4\n2 2\nbet 1 5\n"
    proc = replay(tmp_path, script, "--json")
    assert proc.returncode == 0, proc.stderr
    # ... and the refusal of line 4 is reported as line 4, not 5
    assert "hand.txt:4: refused: position 1: betting is closed" in proc.stderr
    proc = replay(tmp_path, f"3 4{odd}\n2 2\nbogus\n", "--json")
    assert "hand.txt:3:" in proc.stderr and proc.returncode == 2


def test_script_lines_split_at_newline_only() -> None:
    text = "1 1\f\n2 2\u2028# x\n\r\n3 3"
    assert script_lines(text) == ["1 1\f", "2 2\u2028# x", "\r", "3 3"]
    assert [no for no, _ in parse_script(script_lines(text))] == [1, 2, 4]


# -- streaming --------------------------------------------------------------------------

dice = st.integers(1, 6)
script_commands = st.lists(
    st.one_of(
        st.builds(Roll, dice, dice, source=st.just("script")),
        st.builds(Roll, dice, dice, source=st.just("script")),
        st.builds(Roll, dice, dice, source=st.just("script")),
        st.builds(Bet, st.integers(0, 17), st.integers(0, 7)),
        st.builds(Cancel, st.integers(0, 17)),
        st.builds(Void),
        st.builds(Void),
        st.builds(Surrender),
        st.builds(Ack),
    ),
    max_size=150,
)


def _whole_history(engine: Engine, commands: list[Command]) -> list[Settlement]:
    """The settlements that stand, by keeping them all and striking the reversed ones."""
    state, kept = TableState(), []
    for command in commands:
        state, events = engine.apply(state, command)
        for e in events:
            if isinstance(e, Settlement):
                kept.append(e)
            elif isinstance(e, RollVoided) and e.reversed_settlement is not None:
                kept.remove(e.reversed_settlement)
    return kept


@settings(max_examples=150, deadline=None)
@given(script_commands, st.booleans())
def test_streamed_settlements_are_those_that_stand(commands: list[Command], six_now: bool) -> None:
    engine = Engine(FireBetRules(pay_six_immediately=six_now, surveillance_at=3))
    replayer = Replayer(engine)
    streamed = [e for _, e in replayer.run(enumerate(commands)) if isinstance(e, Settlement)]
    assert streamed == _whole_history(engine, commands)
    assert replayer.state == engine.run(commands)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 10**6),
    st.lists(st.sampled_from([4, 5, 6, 8, 9, 10]), max_size=6, unique=True),
    st.sampled_from([0, 24, 249, 999]),
    st.dictionaries(st.integers(1, 16), st.integers(0, 5000), max_size=16),
)
def test_json_line_is_json_dumps_of_the_report(
    hand: int, points: list[int], odds: int, payouts: dict[int, int]
) -> None:
    s = Settlement(
        hand=hand,
        points=tuple(points),
        unique_points=len(points),
        result="win" if odds else "lose",
        odds_to_one=odds,
        tier=len(points),
        payouts=payouts,
    )
    assert json_line(s) == json.dumps(s.report())


def test_replay_memory_does_not_grow_with_the_script() -> None:
    engine = Engine()

    def peak(lines: int) -> int:
        script = (f"{1 + n % 6} {1 + n * 7 % 6}" for n in range(lines))
        tracemalloc.start()
        try:
            for _ in Replayer(engine).run(parse_script(script)):
                pass
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(2_000), peak(40_000)
    assert large < small + 64_000, (small, large)


def test_replay_reads_standard_input(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "replay", "-", "--json"],
        input=CLI_EXAMPLE + "bogus\n",
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "-:14:" in proc.stderr and proc.stdout == ""
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "replay", "-", "--json"],
        input=CLI_EXAMPLE,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["payouts"] == {"3": 120}


def test_a_script_that_is_not_utf8_exits_2_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "hand.txt"
    path.write_bytes(b"3 4\n2 2\n\xff\xfe 3\n")
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "replay", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "not UTF-8" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


script_line = st.one_of(
    st.builds("{} {}\n".format, st.integers(1, 6), st.integers(1, 6)),
    st.builds("{} {}\n".format, st.integers(1, 6), st.integers(1, 6)),
    st.builds("{} {}\n".format, st.integers(1, 6), st.integers(1, 6)),
    st.builds("bet {} {}\n".format, st.integers(1, 3), st.integers(1, 5)),
    st.builds("cancel {}\n".format, st.integers(1, 3)),
    st.sampled_from(["void\n", "surrender\n", "ack\n", "\n", "# note\n", "4  4 # hard\n"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(script_line, max_size=120), st.integers(1, 40), st.booleans())
@example(["4 4\n", "6 1\n", "2 2\n", "bet 1 5\n"], 10, False)  # held back, then rolls
def test_a_script_read_in_chunks_replays_as_line_by_line(
    lines: list[str], size: int, six_now: bool
) -> None:
    engine = Engine(FireBetRules(positions=3, pay_six_immediately=six_now, surveillance_at=3))
    one = Replayer(engine)
    expected = list(one.run(parse_script(lines)))
    data = [line.encode() for line in lines]
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    many = Replayer(engine)
    assert list(many.run_lines(chunks)) == expected
    assert many.state.to_dict() == one.state.to_dict()


def test_a_line_that_is_not_utf8_is_named_in_chunks() -> None:
    chunks = [[b"3 4\n", b"2 2\n"], [b"1 1\n", b"\xff\xfe 3\n"]]
    with pytest.raises(ScriptError) as caught:
        list(Replayer(Engine()).run_lines(chunks, "s.txt"))
    assert "s.txt:4:" in str(caught.value) and "not UTF-8" in str(caught.value)


def test_the_replay_ends_with_the_money_wagered_paid_and_held(tmp_path: Path) -> None:
    """#33: a replay of many hands said nothing of the money; hold as the floor counts it
    (wagers - paid - the winning wagers returned)."""
    # $5 on 3 and $2 on 4 win 24 to 1 (the example's own bet 3 5 is over the maximum: refused),
    # then $5 on 1 loses: 12 - 168 - 7 = -163
    script = "bet 3 5\nbet 4 2\n" + CLI_EXAMPLE + "bet 1 5\n4 4\n3 4\n"
    proc = replay(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == (
        "money: 2 hands settled; wagers $12, paid $168 (+$7 returned), hold -$163 (-1358.3%)"
    )
    quiet = replay(tmp_path, script, "--json")  # a script's streams: JSON lines, no summary
    assert "money" not in quiet.stdout + quiet.stderr


def _replay_on_a_terminal(tmp_path: Path, script: str, *args: str) -> tuple[str, str]:
    """``firebet replay`` with standard error on a pty (a person watching) and standard
    output in a file: (stdout, what the terminal showed)."""
    path = tmp_path / "long.txt"
    path.write_text(script)
    master, slave = os.openpty()
    with (tmp_path / "out.txt").open("w+") as out:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "controller", "replay", str(path), *args],
                stdout=out, stderr=slave,
            )  # fmt: skip
            os.close(slave)
            shown = b""
            while True:  # read the terminal as it goes (EIO once the process has closed it)
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                shown += chunk
            proc.wait(timeout=120)
        finally:
            os.close(master)
        out.seek(0)
        written = out.read()
    assert proc.returncode == 0, shown
    return written, shown.decode(errors="replace")


def test_progress_is_drawn_on_a_terminal_and_wiped_before_the_output(tmp_path: Path) -> None:
    """#33: 500,000 lines replayed in silence; now a line counts them on a terminal."""
    script = "2 2\n3 4\n" * 20_000
    out, shown = _replay_on_a_terminal(tmp_path, script, "--json")
    assert re.search(r"replay: [0-9,]+ lines", shown), shown[:300]
    assert re.search(r"\r +\r", shown)  # drawn in place, then wiped
    assert shown.index("money:") > shown.rindex("replay: ")  # the summary after it
    assert "money: 20,000 hands settled" in shown  # --json: the summary on the terminal only
    assert len(out.splitlines()) == 20_000 and out.startswith('{"hand": 1,')
    piped = replay(tmp_path, script, "--json")  # standard error a pipe: nothing drawn
    assert "replay:" not in piped.stderr and piped.stdout == out
