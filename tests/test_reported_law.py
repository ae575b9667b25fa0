"""The law of a request's settings from a reference's top-K log-probabilities (issue 23, item 2).

``reported_boundary`` sees only the top-K raw log-probabilities of a position; the engine samples
from the whole distribution, within a logit tolerance of the reference's. Checked by brute force
on random and adversarial rows (flat tails at the cap, one heavy unreported token, penalties):

* every token the engine's filters keep is ``possible`` (a tail id only when the tail is), and
  every ``sure`` token is kept;
* the engine's law given a sure token is the reported law restricted to the sure tokens;
* the engine's mass outside the sure tokens is at most the stated bound;
* with the whole vocabulary reported it is the ordinary pipeline, and a setting that
  log-probabilities cannot express is refused with the reason.

A bound that forgot the tail (the buggy variant ``_no_tail``) is caught by the same checks.
"""

import dataclasses

import numpy as np
import pytest

from specverify import SamplingSettings
from specverify.dists import probs_from_logits
from specverify.dists._reported import ReportedRow, reported_boundary, reported_law_refuses

SETTINGS = [
    SamplingSettings(),
    SamplingSettings(temperature=0.0),
    SamplingSettings(temperature=0.6),
    SamplingSettings(temperature=1.5),
    SamplingSettings(top_k=5),
    SamplingSettings(top_p=0.8),
    SamplingSettings(temperature=0.7, top_p=0.9),
    SamplingSettings(min_p=0.1),
    SamplingSettings(temperature=0.9, top_k=12, top_p=0.85, min_p=0.08),
    SamplingSettings(temperature=1.3, top_p=0.7, presence_penalty=0.5, frequency_penalty=0.5),
    SamplingSettings(temperature=0.6, top_p=0.8, min_p=0.05, temperature_last=True),
]
V = 40


def _rows(rng):
    """Raw log-probability rows: normal logits at several scales, a flat tail at the cap, one
    unreported token holding most of the tail."""
    out = []
    for scale in (0.5, 1.5, 3.0):
        out.append(rng.normal(size=V) * scale)
    flat = rng.normal(size=V) * 2
    flat[np.argsort(-flat)[6:]] = np.sort(flat)[::-1][5] - 1e-9  # every tail token just below the 6th
    out.append(flat)
    heavy = rng.normal(size=V) * 2
    heavy[np.argsort(-heavy)[9:]] = -20.0  # past the 9th, nothing but one heavy token
    heavy[np.argsort(-heavy)[9]] = np.sort(heavy)[::-1][8] - 1e-6
    out.append(heavy)
    return [x - np.logaddexp.reduce(x) for x in out]


def _report(lp, k):
    top = np.argsort(-lp, kind="stable")[:k]
    return ReportedRow.from_mapping({int(i): float(lp[i]) for i in top}, k)


def _check(lp, k, s, tol, counts, rng, boundary=reported_boundary):
    row = _report(lp, k)
    probs, b = boundary(row, V, s, tol=tol, output_counts=counts)
    sure, possible, bound = b.sure[0], b.possible[0], float(b.ambiguous_bound[0])
    for noise in [np.zeros(V)] + [rng.uniform(-tol, tol, V) for _ in range(20)] + [tol * rng.choice([-1.0, 1.0], V)]:
        eng = probs_from_logits((lp + noise)[None], s, seen_counts=counts[None], output_counts=counts[None])[0]
        kept = eng > 0
        assert (sure <= kept).all(), f"a sure token is dropped ({s.short()}, k={k})"
        assert (kept <= possible).all(), f"a kept token is not possible ({s.short()}, k={k})"
        assert eng[~sure].sum() <= bound + 1e-9, f"mass off the sure set {eng[~sure].sum():.4g} > bound {bound:.4g}"
        if sure.any() and noise.any() == 0:
            want = eng[sure] / eng[sure].sum()
            got = probs[0, sure] / probs[0, sure].sum()
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    return sure, possible, bound


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.short())
def test_sure_and_possible_hold_for_every_engine_within_the_tolerance(s):
    rng = np.random.default_rng(0)
    seen_any = False
    for lp in _rows(rng):
        counts = (rng.random(V) < 0.2) * rng.integers(1, 3, V).astype(float)
        for k in (3, 8, 20, V - 1):
            for tol in (0.0, 0.02):
                sure, possible, _ = _check(lp, k, s, tol, counts, rng)
                seen_any |= bool((possible & ~sure).any())
    assert seen_any or s.is_greedy, "the rows must leave something ambiguous to be a test"


def test_a_greedy_near_tie_is_left_to_the_bound():
    lp = np.log(np.r_[0.3, 0.3 - 1e-4, np.full(V - 2, 0.4 / (V - 2))])
    _, b = reported_boundary(_report(lp, 5), V, SamplingSettings(temperature=0.0), tol=0.01)
    assert not b.sure[0].any() and b.possible[0][:2].all() and float(b.ambiguous_bound[0]) == 1.0
    _, b = reported_boundary(_report(lp, 5), V, SamplingSettings(temperature=0.0), tol=1e-6)
    assert b.sure[0].tolist() == [True] + [False] * (V - 1)


def test_the_whole_vocabulary_is_the_ordinary_pipeline():
    rng = np.random.default_rng(1)
    lp = _rows(rng)[1]
    s = SamplingSettings(temperature=0.7, top_p=0.9)
    probs, b = reported_boundary(_report(lp, V), V, s, tol=0.0)
    np.testing.assert_allclose(probs[0], probs_from_logits(lp[None], s)[0], atol=1e-12)
    assert b.sure[0].tolist() == (probs[0] > 0).tolist() and float(b.ambiguous_bound[0]) == 0.0


def test_top_k_within_the_report_is_exact_and_the_tail_is_cut():
    rng = np.random.default_rng(2)
    lp = _rows(rng)[2]
    probs, b = reported_boundary(_report(lp, 10), V, SamplingSettings(top_k=5), tol=0.0)
    want = probs_from_logits(lp[None], SamplingSettings(top_k=5))[0]
    assert b.sure[0].tolist() == (want > 0).tolist()
    assert not b.possible[0][want == 0].any() and float(b.ambiguous_bound[0]) == 0.0


def test_without_filters_the_bound_is_the_tail_mass():
    rng = np.random.default_rng(3)
    lp = _rows(rng)[0]
    k = 10
    _, b = reported_boundary(_report(lp, k), V, SamplingSettings(), tol=0.0)
    tail = np.exp(np.sort(lp)[::-1][k:]).sum()
    assert float(b.ambiguous_bound[0]) == pytest.approx(tail, rel=1e-9)


def _no_tail(row, vocab, s, *, tol, output_counts=None):
    """The buggy variant: the reported tokens taken for the whole vocabulary (the tail dropped)."""
    probs, b = reported_boundary(row, len(row.ids), s, tol=tol, output_counts=output_counts[: len(row.ids)] * 0)
    full = np.zeros((1, vocab))
    full[0, row.ids] = probs[0]
    sure = np.zeros((1, vocab), dtype=bool)
    sure[0, row.ids] = b.sure[0]
    possible = np.zeros((1, vocab), dtype=bool)
    possible[0, row.ids] = b.possible[0]
    return full, dataclasses.replace(b, sure=sure, possible=possible)


def test_a_bound_that_forgets_the_tail_is_caught():
    rng = np.random.default_rng(4)
    lp = _rows(rng)[0]
    # reindex so that the reported ids are 0..k-1 (the buggy variant sees only those)
    order = np.argsort(-lp, kind="stable")
    lp = lp[order]
    with pytest.raises(AssertionError, match="not possible|off the sure set"):
        _check(lp, 8, SamplingSettings(), 0.0, np.zeros(V), rng, boundary=_no_tail)


@pytest.mark.parametrize(
    ("s", "complete", "words"),
    [
        (SamplingSettings(repetition_penalty=1.2), True, "by its sign"),
        (SamplingSettings(logit_bias={3: 2.0}), False, "lift an unreported token"),
        (SamplingSettings(presence_penalty=-0.5), False, "negative penalties"),
        (SamplingSettings(top_p=0.9), False, None),
        (SamplingSettings(logit_bias={3: 2.0}), True, None),
    ],
)
def test_settings_that_logprobs_cannot_express_are_refused_with_the_reason(s, complete, words):
    why = reported_law_refuses(s, complete=complete)
    assert (why is None) if words is None else (words in why)


# -- the audit against a reported law, in process (the HTTP path is in tests/test_serve_http.py) ----


class _LocalReference:
    """A reference endpoint's reports, computed from a local model (the HTTP fetch replaced)."""

    def __new__(cls, model, k):
        import torch

        from specverify.audit.sources.reported_law import ReportedLaw
        from specverify.lm.transformers_lm import CausalLM

        lm = CausalLM(model)
        law = ReportedLaw("http://reference.invalid", vocab_size=int(model.config.vocab_size), top_logprobs=k)

        def fetch(ids):
            with torch.no_grad():
                lp = torch.log_softmax(lm.logits(list(ids))[:-1].double(), -1).numpy()
            return [None] + [
                ReportedRow.from_mapping({int(i): float(r[i]) for i in range(len(r))}, law.top) for r in lp
            ]

        law._fetch = fetch
        law._served._name = "local"
        return law


def _sampler(model, temperature):
    import torch

    from specverify.runners import target_only_generate

    def generate(prompt, n, seed, s):
        s = dataclasses.replace(s, temperature=temperature) if not s.is_greedy else s
        return target_only_generate(model, list(prompt), n, s, torch.Generator().manual_seed(seed)).tokens

    return generate


def test_an_engine_that_flattens_the_law_fails_on_the_mass_outside_the_reported_top_k():
    """An engine sampling at temperature 2 where 1 is asked puts more mass on the tokens a top-4
    reference does not report than their bound allows: the count FAILs, in those words; the same
    engine at the asked temperature never does."""
    import torch

    from specverify.audit.sources.lm_audit import audit_lm_reported
    from specverify.runners.serve import default_models

    torch.set_num_threads(1)
    model = default_models(vocab=32, seed=0)[0]
    opts = dict(prompts=[[1, 2, 3]], settings=(SamplingSettings(),), eps=0.5, length=4, greedy_check=False,
                long_length=0, max_sequences=120)  # fmt: skip
    good = audit_lm_reported(_sampler(model, 1.0), _LocalReference(model, 4), **opts)
    assert good.status in ("PASS", "INCONCLUSIVE"), good.headline()
    bad = audit_lm_reported(_sampler(model, 2.0), _LocalReference(model, 4), **opts)
    assert bad.status == "FAIL", bad.headline()
    assert "outside the reference's top 4 or at filter boundaries" in bad.checks[0].summary, bad.checks[0].summary
