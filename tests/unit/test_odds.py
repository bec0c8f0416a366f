"""Exact fire-bet odds by the Markov chain, house edge, and the Monte Carlo check."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.config import FireBetRules
from controller.core.odds import (
    exact_distribution,
    faces,
    house_edge,
    report,
    simulate,
    simulate_roll_by_roll,
)


def test_exact_distribution_is_fractions_summing_to_one() -> None:
    p = exact_distribution()
    assert len(p) == 7 and all(isinstance(x, Fraction) for x in p)
    assert sum(p) == 1
    assert p[0] == Fraction(98, 165)  # 1 - P(make the first point): 1 - 67/165


def test_known_values_for_four_five_and_six_points() -> None:
    p = exact_distribution()
    assert round(float(p[4]), 6) == 0.008798
    assert round(float(p[5]), 6) == 0.001640
    assert round(float(p[6]), 7) == 0.0001624


def test_house_edge_follows_the_configured_pay_table() -> None:
    nj = house_edge(FireBetRules())
    assert round(float(nj), 4) == 0.2076
    richer = house_edge(FireBetRules(pays={4: 30, 5: 300, 6: 1200}))
    assert richer < nj
    p = exact_distribution()
    expected = (
        1
        - sum(p[k] for k in range(4)) * 0
        - sum(p[k] * (o + 1) for k, o in ((4, 24), (5, 249), (6, 999)))
    )
    assert nj == expected


def test_monte_carlo_agrees_within_its_standard_error() -> None:
    data = report(FireBetRules(), simulate_hands=6000, seed=7)
    sim = data["simulation"]
    for k in range(7):
        assert abs(sim["p"][k] - data["p"][k]) <= 4 * sim["p_stderr"][k] + 1e-12, k
    assert abs(sim["house_edge"] - data["house_edge"]) <= 4 * sim["house_edge_stderr"]


def test_simulation_is_seeded() -> None:
    assert simulate(FireBetRules(), 500, seed=3) == simulate(FireBetRules(), 500, seed=3)
    assert sum(simulate(FireBetRules(), 500, seed=3)) == 500


def test_cli_odds_json_and_to_1_wording(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "controller", "odds", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert set(data) >= {"p", "house_edge"} and len(data["p"]) == 7
    assert abs(sum(data["p"]) - 1) < 1e-12
    text = subprocess.run(
        [sys.executable, "-m", "controller", "odds"], capture_output=True, text=True, check=True
    ).stdout
    assert "999 to 1" in text and " for 1" not in text
    cfg = tmp_path / "t.toml"
    cfg.write_text('[firebet]\npreset = "three-tier"\n')
    three = json.loads(
        subprocess.run(
            [sys.executable, "-m", "controller", "odds", "--json", "--config", str(cfg)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert three["house_edge"] != data["house_edge"] and three["pays"]["3"] == 6


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**64), st.integers(1, 50))
def test_faces_are_the_faces_randint_shows(seed: int, chunk: int) -> None:
    rng = random.Random(seed)
    expected = bytes(rng.randint(1, 6) for _ in range(600))
    got = b""
    for part in faces(seed, chunk):
        got += part
        if len(got) >= len(expected):
            break
    assert got[: len(expected)] == expected


@settings(max_examples=15, deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(1, 400),
    st.sampled_from([FireBetRules(), FireBetRules(pays={3: 6, 4: 29, 5: 149, 6: 299})]),
    st.booleans(),
    st.sampled_from(["first_roll", "first_point"]),
)
def test_simulation_is_the_engine_rolled_on_the_same_dice(
    seed: int, hands: int, rules: FireBetRules, six_now: bool, closes: str
) -> None:
    rules = replace(rules, pay_six_immediately=six_now, betting_closes=closes)
    assert simulate(rules, hands, seed) == simulate_roll_by_roll(rules, hands, seed)
