"""The firebet test suite (``docs/architecture.md`` says what each folder holds).

Hypothesis runs every property without its per-example deadline (200 ms by default):
a busy machine makes an example slow, not wrong, and a slow example is not a failure.
The profile is loaded here, before any test module builds its ``@settings``.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("firebet", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("firebet")
