#!/usr/bin/env python3
"""A consumer of the floor's messages (docs/floor.md, "Consuming the floor's messages").

Logs in to the broker as a consumer user of its own (the shipped ACL's ``consumer``:
read-only on every table's event, state and online topics), validates each message
against the JSON Schemas firebet ships (``firebet --contract-version`` names their
folder), and prints one JSON line a message:

    {"table": "CR-07", "leaf": "event", "valid": true, "kind": "command", "record": 12}

A message that is not valid prints ``"valid": false`` and ``"problem"``. Needs paho-mqtt
(2.x) and jsonschema (4.18 or newer); run ``python3 consumer.py --help``.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

LEAVES = ("event", "state", "online")


def schemas(folder: Path) -> dict[str, Any]:
    """A validator for each leaf, from ``floor-<leaf>.schema.json`` in ``folder``."""
    found = {}
    for leaf in LEAVES:
        schema = json.loads((folder / f"floor-{leaf}.schema.json").read_text(encoding="utf-8"))
        found[leaf] = jsonschema.validators.validator_for(schema)(schema)
    return found


def judged(leaf: str, table: str, payload: bytes, validators: dict[str, Any]) -> dict[str, Any]:
    """What one message is: its table, leaf, whether it is valid and what it says."""
    line: dict[str, Any] = {"table": table, "leaf": leaf}
    try:
        body = json.loads(payload)
    except ValueError as exc:
        return line | {"valid": False, "problem": f"not JSON: {exc}"}
    error = jsonschema.exceptions.best_match(validators[leaf].iter_errors(body))
    line["valid"] = error is None
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(top)"
        line["problem"] = f"at {where}: {error.message[:200]}"
    if isinstance(body, dict):
        for key in ("kind", "record", "online", "mode", "hand"):
            if key in body and not isinstance(body[key], (dict, list)):
                line[key] = body[key]
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883", help="mqtt:// or mqtts://")
    parser.add_argument("--user", default="consumer", help="this consumer's own broker user")
    parser.add_argument("--password-file", required=True, help="its password, first line")
    parser.add_argument("--cafile", default=None, help="the CA of an mqtts:// broker")
    parser.add_argument("--prefix", default="firebet", help="the tables' [floor] topic_prefix")
    parser.add_argument("--schemas", required=True, type=Path, help="the schemas' folder")
    parser.add_argument("--count", type=int, default=0, help="stop after N messages (0: never)")
    args = parser.parse_args()

    validators = schemas(args.schemas)
    url = urlsplit(args.broker)
    password = Path(args.password_file).read_text(encoding="utf-8").splitlines()[0]
    # the client id is the user name at a broker with use_username_as_clientid (shipped)
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=args.user, protocol=mqtt.MQTTv5)
    client.username_pw_set(args.user, password)
    if url.scheme == "mqtts":
        client.tls_set_context(ssl.create_default_context(cafile=args.cafile))
    seen = 0
    done = threading.Event()
    lock = threading.Lock()

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            print(f"consumer: the broker refused the login: {reason}", file=sys.stderr)
            done.set()
            return
        c.subscribe([(f"{args.prefix}/+/{leaf}", 1) for leaf in LEAVES])

    def on_message(c: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        nonlocal seen
        parts = message.topic.split("/")
        if len(parts) < 3 or parts[-1] not in LEAVES:
            return
        line = judged(parts[-1], parts[-2], message.payload, validators)
        with lock:
            print(json.dumps(line), flush=True)
            seen += 1
            if args.count and seen >= args.count:
                done.set()

    client.on_connect = on_connect
    client.on_message = on_message
    client.connect(
        url.hostname or "127.0.0.1", url.port or (8883 if url.scheme == "mqtts" else 1883)
    )
    client.loop_start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        client.disconnect()
        client.loop_stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
