"""FAIL-only tests of a table unit beside its strata: consecutive tokens, offset buckets, stop counts.

Each joins the unit's Holm family (``TestFamily.serial`` and ``TestFamily.extra``; the plan sizes
the unit's sample with them in the family):

* every unit tests that consecutive tokens of a sequence are independent given their laws
  (:func:`specverify.stats.serial_dependence_test`): randomness reused across the positions of a
  round (flashinfer#424/#425; a bonus drawn with the last draft's uniform) keeps every token's
  margin exact, so only the pairs show it.

* a long unit (``AuditUnit.length``) tests the tokens of each offset bucket of its sequences on
  their own (:func:`~.plan.offset_buckets`: 0-63, 64-127, 128-255, 256-511), so a bug from some
  offset on (a cache block, a rotating window) shows in its bucket undiluted by the tokens before
  it. Which bucket a token falls in depends on how many tokens came before it, never on its value,
  so each bucket is a sample from the target's law like the whole.
* a stop unit (settings with ``stop_token_ids``) counts the requests that ended at a stop against
  the sum over every emitted token of the target's mass on the stop ids
  (:func:`specverify.stats.event_count_test`, valid because each probability holds given the
  prefix before it): a stop that is skipped, or one emitted where the law puts less mass, shows
  there even when the token law's bins pool the stop ids with others.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from ...stats import SERIAL_STRATUM, StreamLaw, default_stream_test, event_count_test, serial_dependence_test
from .plan import offset_buckets, offsets_in_sequence

if TYPE_CHECKING:
    from ...harness import Generation
    from ...stats import GofResult, StreamTestResult
    from .config import AuditConfig
    from .plan import AuditUnit

__all__ = ["RequestTest", "request_tests", "serial_tests"]

#: a bucket with fewer tokens is not tested (it cannot fail at the family's alpha anyway)
MIN_BUCKET_TOKENS = 50


@dataclasses.dataclass(frozen=True)
class RequestTest:
    """One FAIL-only test: its stratum, p-value and facts; a bucket keeps its stream result, the stop
    count its text."""

    stratum: str
    pvalue: float
    facts: dict[str, Any]
    stream: StreamTestResult | None = None
    text: str = ""
    gof: GofResult | None = None  # a single test's result (the consecutive-pairs table)


def serial_tests(
    unit: AuditUnit, law: StreamLaw, rows: np.ndarray, gen: Generation, cfg: AuditConfig
) -> list[RequestTest]:
    """The consecutive-pairs test (module docstring), when the unit's family holds it."""
    if not unit.family.serial:
        return []
    rng = np.random.default_rng([cfg.seed, unit.index, 5])
    r = serial_dependence_test(law, gen.tokens, rows, gen.sequence, gen.position, rng=rng)
    facts = {"consecutive_pairs": {"n": r.n, "groups_df": r.df, "pvalue": r.pvalue}}
    return [RequestTest(SERIAL_STRATUM, r.pvalue, facts, gof=r)]


def request_tests(
    unit: AuditUnit, law: StreamLaw, rows: np.ndarray, gen: Generation, cfg: AuditConfig
) -> list[RequestTest]:
    """The unit's request-level tests (module docstring); none for an ordinary unit."""
    if unit.length:
        return _bucket_tests(unit, law, rows, gen, cfg)
    if unit.is_stop_unit:
        return [_stop_count(unit, law, rows, gen)]
    return []


def _bucket_tests(
    unit: AuditUnit, law: StreamLaw, rows: np.ndarray, gen: Generation, cfg: AuditConfig
) -> list[RequestTest]:
    assert unit.length
    offsets = offsets_in_sequence(gen.sequence)
    rng = np.random.default_rng([cfg.seed, unit.index, 4])
    alpha = unit.family.alpha_fixed / unit.family.size  # the first Holm step, as for every stratum
    out, facts = [], []
    for lo, hi in offset_buckets(unit.length):
        inside = (offsets >= lo) & (offsets < hi)
        if inside.sum() < MIN_BUCKET_TOKENS:
            facts.append({"tokens": [lo, hi - 1], "n": int(inside.sum()), "pvalue": None, "detects_tv": None})
            continue
        stratum = f"tokens {lo}-{hi - 1} of each sequence"
        res = default_stream_test(law, gen.tokens[inside], rows[inside], rng=rng, alpha=alpha, beta=unit.family.beta,
                                  stratum=stratum)  # fmt: skip
        out.append(RequestTest(stratum, res.pvalue, {}, stream=res))
        facts.append({"tokens": [lo, hi - 1], "n": res.n, "pvalue": res.pvalue, "detects_tv": res.min_detectable_tv})
    # the power each bucket had (its own detectable TV at the first Holm step), for the report
    return [dataclasses.replace(out[0], facts={"offset_buckets": facts}), *out[1:]] if out else out


def _stop_count(unit: AuditUnit, law: StreamLaw, rows: np.ndarray, gen: Generation) -> RequestTest:
    stops = list(unit.settings.stop_token_ids)
    r = event_count_test(np.isin(gen.tokens, stops), law.table[rows][:, stops].sum(axis=1))
    ended = len(np.unique(gen.sequence))
    text = (
        f"{r.observed:,} of {ended:,} requests ended at a stop id {stops}; over the {len(gen.tokens):,} tokens "
        f"emitted, the target's law expects {r.expected:,.1f} stops (sd {r.sd:.1f}; p = {r.pvalue:.2g}): "
        f"{r.direction} stops than target-only sampling makes"
    )
    facts = {
        "stops": {"observed": r.observed, "expected": round(r.expected, 1), "sd": round(r.sd, 1), "pvalue": r.pvalue}
    }
    return RequestTest("where requests end", r.pvalue, facts, text=text)
