"""docs/floor.md's `events` schema is the code's (issue 23): every event type and every
field ``Event.to_dict()`` gives, and no other, walking every event class."""

from __future__ import annotations

import dataclasses
import re

from controller.core.commands import RollSource
from controller.core.events import PUBLISHED, RollOutcome
from tests.support import ROOT

DOC = ROOT / "docs" / "floor.md"
ROW = re.compile(r"^\| `([a-z_]+)` \| `([a-z_0-9]+)` \| ([^|]+) \| (.+) \|$")


def _documented() -> dict[str, list[str]]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n### The `events` schema\n")
    end = text.index("\n### ", start + 1)
    fields: dict[str, list[str]] = {}
    for line in text[start:end].splitlines():
        found = ROW.match(line)
        if found:
            fields.setdefault(found[1], []).append(found[2])
    return fields


def test_the_doc_lists_exactly_the_event_types_and_fields_the_code_emits() -> None:
    documented = _documented()
    emitted = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in PUBLISHED.items()}
    assert sorted(documented) == sorted(emitted), "event types"
    for name, names in emitted.items():
        assert documented[name] == names, f"the fields of {name!r}, in order"


def test_each_event_class_gives_the_documented_keys_in_to_dict() -> None:
    """``to_dict`` is what the link sends: ``"event"`` and the fields, no more."""
    documented = _documented()
    for name, cls in PUBLISHED.items():
        defaults = {
            f.name: 1 for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }  # fmt: skip
        if name == "roll":
            defaults.update(outcome=RollOutcome.NATURAL, phase="come_out", point=None)
        if name == "settlement":
            defaults.update(points=(4,), result="lose")
        optional = getattr(cls, "optional_keys", ())  # written only when not the default
        defaults.update(dict.fromkeys(optional, 2))
        event = cls(**defaults)
        assert list(event.to_dict()) == ["event", *documented[name]], name


def test_the_values_the_doc_names_are_the_codes() -> None:
    text = DOC.read_text(encoding="utf-8")
    outcome_row = next(
        line for line in text.splitlines() if line.startswith("| `roll` | `outcome`")
    )
    source_row = next(line for line in text.splitlines() if line.startswith("| `roll` | `source`"))
    for o in RollOutcome:
        if o is not RollOutcome.SURRENDER:  # never a roll's
            assert f"`{o.value}`" in outcome_row
    for s in RollSource:
        assert f"`{s.value}`" in source_row
