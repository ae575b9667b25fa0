"""Calibration, small fixed-seed version: exact samplers rarely get FAIL.

40 audits of the reference and the decoys at family-wise alpha 0.1 (large, so that a calibration
error would show in 40 audits). Under correct calibration the number of FAILs is at most
Binomial(40, 0.1); the test allows the count k with P(Binomial(40, 0.1) > k) <= 1e-6, so it
false-fails with probability at most 1e-6 even with random seeds. The large study (1,000 audits)
is scripts/calibration_study.py. Negative control: the same procedure on a catalogued bug fails
every time.
"""

from scipy import stats

from specverify import SamplingSettings
from specverify.audit import SamplerAdapter, audit
from specverify.catalogue import DECOYS, bugs

N, ALPHA = 40, 0.1
LIMIT = int(stats.binom.isf(1e-6, N, ALPHA))


def _fails(classes):
    fails = 0
    for i in range(N):
        cls = classes[i % len(classes)]
        v = audit(
            SamplerAdapter(cls()),
            seed=500 + i,
            alpha=ALPHA,
            eps=0.15,
            exact_checks=False,
            settings=(SamplingSettings(),),
            diagnose=False,  # counts verdicts only
        )
        fails += v.status == "FAIL"
    return fails


def test_exact_samplers_fail_at_most_at_the_stated_rate():
    assert _fails(DECOYS) <= LIMIT


def test_negative_control_fails_every_time():
    assert _fails([bugs.ReplacementFromQ]) == N
