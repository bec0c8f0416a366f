"""What crosses the broker between a table and the floor: the messages, their topics and
the MQTT client set-up, one definition that both ends import (docs/floor.md)."""
