"""docs/examples/consumer.py, the floor's example consumer (issue 33), against a real
mosquitto with the shipped ACL: as the ACL's own ``consumer`` user it hears a table's
records, state and presence, finds each valid by the shipped schemas, can send nothing,
and takes nobody's session."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from controller.cli.contract import SCHEMA_DIR
from tests import schemas
from tests.broker import Mosquitto, Subscriber, one_shot
from tests.floor_support import Publisher, TableJournal, make_points
from tests.support import PROCESS_DEADLINE_S, ROOT, wait_for

CONSUMER = ROOT / "docs" / "examples" / "consumer.py"


def test_the_example_consumer_validates_every_message_and_sends_nothing(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    floor = Subscriber(mosquitto)  # the floor, logged in as floor: it must stay on
    table = Publisher(mosquitto, "CR-07")
    journal = TableJournal(tmp_path / "journal", table="CR-07")
    records = journal.do("bet 1 10", *make_points(4, 5), "6 1")
    table.online(len(records))
    table.state(schemas.idle_status("CR-07"))
    expected = 2 + len(records)  # online and state (retained), then every record
    errors = tmp_path / "consumer.err"
    said: list[str] = []
    with (
        errors.open("w") as err,
        subprocess.Popen(
            [
                sys.executable, str(CONSUMER), "--broker", mosquitto.url,
                "--password-file", str(mosquitto.password_file("consumer")),
                "--schemas", str(SCHEMA_DIR), "--count", str(expected),
            ],
            stdout=subprocess.PIPE, stderr=err, text=True,
        ) as consumer,
    ):  # fmt: skip
        out = consumer.stdout
        assert out is not None
        reader = threading.Thread(target=lambda: said.extend(out), daemon=True)
        reader.start()
        try:
            # subscribed once the retained online and state came: the records go out after
            wait_for(lambda: len(said) >= 2, PROCESS_DEADLINE_S, "the consumer's subscription")
            table.publish(records)
            consumer.wait(timeout=PROCESS_DEADLINE_S)
            reader.join(timeout=PROCESS_DEADLINE_S)
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
    assert consumer.returncode == 0, errors.read_text()
    lines = [json.loads(line) for line in said]
    out = "".join(said)
    assert len(lines) == expected, out
    assert all(line["valid"] for line in lines), [line for line in lines if not line["valid"]]
    assert sorted(line["record"] for line in lines if line["leaf"] == "event") == [
        r.record for r in records
    ]
    assert {line["leaf"] for line in lines} == {"event", "state", "online"}
    # read-only: the broker refuses its command and its record (MQTT 5 "Not authorized")
    confirm = {"op": "confirm", "hand": 1, "by": "x", "id": "1", "v": 1}
    assert one_shot(mosquitto, "consumer", "firebet/CR-07/command", confirm) == 135
    assert one_shot(mosquitto, "consumer", "firebet/CR-07/event", {"x": 1}) == 135
    # nobody's session was taken: the floor and the table stayed connected throughout
    assert table.disconnects == 0
    assert "already connected" not in mosquitto_clients(mosquitto)  # mosquitto's words
    floor.close()
    table.close()


def mosquitto_clients(broker: Mosquitto) -> str:
    """The broker's log so far (each login is a line naming its client id)."""
    return "".join(p.read_text(errors="replace") for p in broker.folder.glob("mosquitto-*.log"))


def test_the_example_consumer_says_an_invalid_message_is_not_valid() -> None:
    sys.path.insert(0, str(CONSUMER.parent))
    try:
        import consumer  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(CONSUMER.parent))
    validators = consumer.schemas(SCHEMA_DIR)
    bad = consumer.judged("event", "CR-07", b'{"table": "CR-07", "record": 0}', validators)
    assert bad["valid"] is False and bad["problem"]
    good = consumer.judged("online", "CR-07", b'{"online": false, "v": 1}', validators)
    assert good["valid"] is True
