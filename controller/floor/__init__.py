"""The floor: the MQTT link that publishes a table's journal, and the floor service.

See ``docs/floor.md``. It sits between the service and the control socket in the
layers (``pyproject.toml``, import-linter): the service runs the table's link; the
floor service is started by the command line.
"""
