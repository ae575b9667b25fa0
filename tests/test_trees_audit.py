"""Tree / multi-draft variants: procedural samplers follow the exact node laws; audits PASS the
exact pairings, FAIL the inexact ones, and label Medusa's typical acceptance lossy by design."""

from collections import Counter

import numpy as np
import pytest
from scipy import stats

from specverify import SamplingSettings
from specverify.algorithms.multi_draft import (
    PAIRINGS,
    candidate_law,
    draw_candidates,
    node_outcome_law,
    verify_node_procedural,
)
from specverify.audit import SamplerAdapter, audit
from specverify.catalogue import TreeSampler


@pytest.mark.parametrize("pairing", PAIRINGS, ids=lambda p: p.name)
def test_procedural_node_sampler_follows_the_exact_node_law(pairing):
    rng = np.random.default_rng(0)
    p = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    q = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    law = Counter()
    for cands, cw in candidate_law(list(q), 2, pairing.mechanism).items():
        for (kind, val), w in node_outcome_law(list(p), list(q), cands, pairing.rule).items():
            law[cands[val] if kind == "accept" else val] += cw * w
    n = 40_000
    got = Counter()
    for _ in range(n):
        c = draw_candidates(q, 2, pairing.mechanism, rng)
        kind, val = verify_node_procedural(p, q, c, pairing.rule, rng)
        got[c[val] if kind == "accept" else val] += 1
    keys = sorted(set(law) | set(got))
    assert set(got) <= {k for k in keys if law[k] > 0}
    exp = np.array([law[k] for k in keys]) * n
    obs = np.array([got[k] for k in keys])
    keep = exp > 0
    if keep.sum() > 1:  # a point-mass law is fully checked by the support assertion above
        assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-7


@pytest.mark.parametrize("pairing", PAIRINGS, ids=lambda p: p.name)
def test_audit_verdicts_for_every_pairing(pairing):
    v = audit(
        SamplerAdapter(TreeSampler(pairing)),
        eps=0.1,
        vocab=6,
        target_alpha=0.4,
        settings=(SamplingSettings(),),
        batch=1000,
    )
    assert v.status == ("PASS" if pairing.exact else "FAIL"), v.headline()
    dev = {c.name: c for c in v.checks}["deviation of the rule, computed exactly"]
    assert (dev.status == "PASS") == pairing.exact
    if pairing.lossy_by_design:
        assert v.lossy_by_design and "[lossy by design]" in v.headline() and "lossy by design" in dev.summary
