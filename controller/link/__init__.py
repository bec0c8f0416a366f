"""The table's link to the floor: its journal published to the broker, the floor's
commands taken (docs/floor.md). The table's service runs it; it sits beside the control
socket (siblings: neither imports the other) and speaks the messages of
:mod:`controller.wire`.
"""
