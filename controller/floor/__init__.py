"""The floor service: the surveillance room's program (``firebet floor``, docs/floor.md).

It hears every table through the broker (the messages of :mod:`controller.wire`), keeps
each table's records once, checks them with its own second opinion and serves the
console. The table's service never imports it.
"""
