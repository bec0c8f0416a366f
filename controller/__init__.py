"""firebet: the fire-bet table controller for live craps and mini-craps."""

__version__ = "0.1.0"
