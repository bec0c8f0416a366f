"""Only ASCII digits are numbers (docs/rules.md): scripts, command arguments, configuration keys."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.config import load_config
from controller.core.errors import ConfigError
from controller.core.numbers import decimal_number, whole_number

Firebet = Callable[..., subprocess.CompletedProcess[str]]
NOT_ASCII = ["٣", "²", "①", "５", "߃", "𝟙", "3٣", "３"]


@given(st.text(max_size=6))
def test_whole_number_is_ascii_digits_only(text: str) -> None:
    value = whole_number(text)
    if text and all(c in "0123456789" for c in text):
        assert value == int(text)
    else:
        assert value is None


@given(st.text(max_size=8))
def test_decimal_number_is_ascii_digits_and_one_point(text: str) -> None:
    value = decimal_number(text)
    if value is not None:
        assert set(text) <= set("0123456789.") and text.count(".") <= 1
        assert value == float(text)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("roll", "٣", "١"),
        ("roll", "3", "²"),
        ("roll", "①", "2"),
        ("bet", "٣", "5"),
        ("bet", "3", "５"),
        ("cancel", "²"),
        ("odds", "--simulate", "٣"),
        ("odds", "--simulate", "10", "--seed", "٣"),
        ("history", "--hands", "٣"),
        ("sim", "--rolls", "٣"),
        ("sim", "--interval", "٣"),
        ("diag", "reader", "--count", "٣"),
        ("run", "--sim-seed", "٣"),
        ("status", "--watch", "٣"),
        ("run", "--sim-interval", "٣"),
    ],
)
def test_command_arguments_take_ascii_digits_only(
    firebet: Firebet, tmp_path: Path, args: tuple[str, ...]
) -> None:
    # argument checks come first: no service, journal or port is needed to refuse these
    proc = (
        firebet(*args, "--socket", str(tmp_path / "none.sock"))
        if args[0]
        in (
            "roll",
            "bet",
            "cancel",
        )
        else firebet(*args)
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    bad = next(a for a in args if not a.isascii())
    assert repr(bad) in proc.stderr


@pytest.mark.parametrize("key", [*NOT_ASCII[:4], " 4", "4_0", "+4", "04 "])
def test_pay_table_keys_take_ascii_digits_only(tmp_path: Path, key: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(f'[firebet]\npreset = "custom"\npays = {{ "{key}" = 24, 5 = 249 }}\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.key == f"firebet.pays.{key}" and "digits 0-9" in str(err.value)
