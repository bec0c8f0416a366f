"""Exact fire-bet odds by the Markov chain, house edge, and the Monte Carlo check."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
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
    surrender_edge,
    surrender_policy,
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


# -- surrender policies (issue 30; SPEC section 2, settled questions) ---------------------

POLICIES = [("none", 0), ("made-before", 0), ("new-point", 0), ("always", 0)] + [
    ("random", seed) for seed in range(3)
]


@pytest.mark.parametrize("carries", [True, False])
@pytest.mark.parametrize(("policy", "seed"), POLICIES)
def test_no_surrender_policy_changes_the_exact_house_edge(
    policy: str, seed: int, carries: bool
) -> None:
    # the exact chain of the real engine: with the points carried a surrender keeps the
    # point and the points made, so the edge is the one without surrenders to the last
    # digit; without carrying them a surrender can only take points away from the players
    # (the old ruling, the point thrown away, gave players +461.40% under made-before)
    for rules in (FireBetRules(), FireBetRules(pays={3: 7, 4: 30, 5: 300, 6: 1200})):
        rules = replace(rules, surrender_carries_points=carries)
        edge = surrender_edge(rules, surrender_policy(policy, seed))
        if carries or policy == "none":
            assert edge == house_edge(rules), (policy, seed)
        else:
            assert edge >= house_edge(rules), (policy, seed)


def test_the_surrender_chain_without_surrenders_is_the_points_chain() -> None:
    # two chains, built apart (the points' and the engine's): the same fraction
    rules = FireBetRules(pays={4: 24, 5: 249, 6: 999})
    assert surrender_edge(rules, surrender_policy("none")) == house_edge(rules)
    assert str(house_edge(rules)).startswith("3155010189076512755518373649266277142847/")


def test_an_unknown_surrender_policy_is_named() -> None:
    with pytest.raises(ValueError, match="unknown surrender policy 'sulk'"):
        surrender_policy("sulk")


def test_the_simulation_under_the_exploit_agrees_with_the_exact_edge() -> None:
    data = report(FireBetRules(), simulate_hands=6000, seed=11, surrender="made-before")
    given, sim = data["surrender"], data["simulation"]
    assert given["same_as_without"] and given["exact"] == data["exact"]["house_edge"]
    assert sim["surrender"] == "made-before"
    assert abs(sim["house_edge"] - given["house_edge"]) <= 4 * sim["house_edge_stderr"]


def test_odds_cli_proves_the_edge_under_a_surrender_policy(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "controller", "odds", "--surrender", "made-before"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert (
        "house edge with shooters surrendering by policy made-before (exact chain of the "
        "engine, surrender_carries_points = true): 20.7628% (the same, exactly)"
    ) in done.stdout
