"""The diagnosis names the request-level classes (issue 21): round steps written as users write them,
each after a real report, FAIL and their diagnosis names the class whose law is exact for them.

The penalised steps are in tests/test_request_penalties.py and the logit bias added after
temperature in tests/test_parity_grid_combined.py (their audits are asserted there). Here: the logit
bias dropped on the speculative path (sgl-project/sglang#10617), on the parity grid's bias setting
(table laws: the round scorer) and its combined setting (penalties: the token scorer), the correct
step on the same settings, and one random stream for every request (NVIDIA/TensorRT-LLM#19487),
whose tokens each follow their law: the seed check's finding names it. Fixed seeds, deterministic."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from test_request_seeds import one_stream_restarted  # noqa: E402
from user_impls import logits_steppers as L  # noqa: E402

from specverify.audit import GeneratorAdapter, RoundAdapter, audit  # noqa: E402
from specverify.audit.pipeline.plan import PARITY_GRID  # noqa: E402
from specverify.diagnosis import diagnose_penalty  # noqa: E402
from specverify.diagnosis._lm import _always_accept_from, finding_explains_statistics, repeated_requests  # noqa: E402
from specverify.diagnosis._tokens import TokenScores  # noqa: E402
from specverify.harness import make_context_pair  # noqa: E402

#: the parity grid's bias setting alone and its combined setting (every knob, a bias and penalties)
BIAS = tuple(s for s in PARITY_GRID if s.logit_bias)
OPTIONS = dict(settings=BIAS, eps=0.15)


def test_the_bias_settings_are_the_grids_bias_knob_and_its_combined_setting():
    assert len(BIAS) == 2 and BIAS[1] == PARITY_GRID[-1] and not BIAS[0].uses_history and BIAS[1].uses_history


def test_a_logit_bias_dropped_on_the_speculative_path_is_named():
    v = audit(RoundAdapter(L.step_logits_bias_ignored, logits=True, name="bias_ignored"), **OPTIONS)
    assert v.status == "FAIL", v.headline()
    lead = v.diagnosis_lead()[0]
    assert v.diagnosis["verdict"] == "logit_bias_ignored", lead
    assert lead.startswith("Diagnosis: most likely logit_bias_ignored (likelihood ratio e^"), lead


def test_the_correct_step_passes_the_bias_settings_without_a_diagnosis():
    v = audit(RoundAdapter(L.step_logits_correct, logits=True, name="correct"), **OPTIONS)
    assert v.status == "PASS", v.headline()
    assert v.diagnosis is None and v.diagnosis_lead() == []


def test_the_combined_setting_alone_names_the_bias_from_its_rebuilt_histories():
    # the penalty scorer on the combined setting (the audit above is named by the round scorer first)
    s = BIAS[1]
    pair = make_context_pair(64, "high", seed=3, settings=s)
    for fn, truth in (("step_logits_bias_ignored", "logit_bias_ignored"), ("step_logits_correct", "not a known class")):
        step = RoundAdapter(getattr(L, fn), logits=True, name=fn)
        gen = step.generate(pair, 200, 4, np.random.default_rng(0), s)
        d = diagnose_penalty([(gen, pair, s, "unit")])
        assert d.verdict == truth, [(c.name, c.llr_vs_target, c.explained) for c in d.candidates[:3]]


def test_one_stream_for_every_request_is_named_by_the_seed_check():
    v = audit(GeneratorAdapter(one_stream_restarted, name="gen"), eps=0.1)
    assert v.status == "FAIL"
    assert any(c.status == "FAIL" and c.kind == "statistical" for c in v.checks), v.headline()
    assert v.diagnosis["verdict"] == "seed_not_honoured", v.diagnosis_lead()
    assert v.diagnosis_lead()[0].startswith("Diagnosis: seed_not_honoured (signature of the exact check")


def test_repeated_requests_count_exact_repeats_of_one_prompt():
    prompts = [[1, 2], [1, 2], [3], [1, 2], [3]]
    seqs = [[5, 6, 7], [5, 6, 7], [5, 6, 7], [5, 6, 8], [9]]  # a one-token repeat proves nothing
    assert repeated_requests([(prompts, seqs)]) == (1, 5)
    assert repeated_requests([(prompts[:1], seqs[:1]), (prompts[1:2], seqs[1:2])]) == (0, 2)  # units apart
    d = finding_explains_statistics("seed_not_honoured", "seed independence", [(prompts, seqs)])
    assert d.verdict == "seed_not_honoured"
    assert "1 of the sampled units' 5 requests repeat an earlier request of the same prompt" in " ".join(d.facts)


def _buffer_that_runs_out(k: int, g: int, *, seqs: int = 12, length: int = 512, vocab: int = 16, seed: int = 3):
    """Tokens of a generator exact up to token k that keeps every draft from there on (rounds of g drafts
    and one target token), with the target's and the draft's laws of each token: (t, d, y, idx)."""
    rng = np.random.default_rng(seed)
    n = seqs * length
    t, d = rng.dirichlet(np.ones(vocab), n), rng.dirichlet(np.ones(vocab), n)
    idx = np.tile(np.arange(length), seqs)
    law = np.where(((idx >= k) & ((idx - k) % (g + 1) != g))[:, None], d, t)
    y = (law.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    return t, d, y, idx


def test_a_draft_buffer_that_runs_out_at_a_block_is_fitted_where_it_runs_out():
    # tests/user_impls/request_generators.py:draft_buffer_of_one_block: exact for 256 tokens, then every draft kept
    t, d, y, idx = _buffer_that_runs_out(256, 3)
    law, g, k = _always_accept_from(t, d, y, idx)
    assert (g, k) == (3, 256)
    acc = TokenScores(1, "token")
    acc.add_unit("u", {"target": t, "always_accept_from": law}, y, np.zeros(t.shape, dtype=np.int64))
    assert acc.ranked()[0].llr_vs_target > 100
    # exact output: the fitted class gains nothing worth naming over the target (it pays log(8 x 511) nats)
    t, d, y0, idx = _buffer_that_runs_out(10**6, 3)
    law, g, k = _always_accept_from(t, d, y0, idx)
    acc = TokenScores(1, "token")
    acc.add_unit("u", {"target": t, "always_accept_from": law}, y0, np.zeros(t.shape, dtype=np.int64))
    assert acc.ranked()[0].llr_vs_target - np.log(8 * 511) < 10
    # a unit of short exact requests costs the class nothing (k = L: no change there is one of its fits), so
    # units that never reach the change do not hide the one that does
    for seed in range(5):
        t, d, y0, idx = _buffer_that_runs_out(10**6, 3, length=20, seed=seed)
        law, g, k = _always_accept_from(t, d, y0, idx)
        acc = TokenScores(1, "token")
        acc.add_unit("u", {"target": t, "always_accept_from": law}, y0, np.zeros(t.shape, dtype=np.int64))
        assert acc.ranked()[0].llr_vs_target >= 0, (seed, k, g)
