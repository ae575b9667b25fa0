"""Hypothesis profiles for the property suite.

* ``ci`` (default): derandomised, 60 examples per property, no deadline. Runs in CI in minutes.
* ``thorough``: 2,000 examples per property, random seeds: ``pytest properties --hypothesis-profile=thorough``.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile("ci")
