"""A resumed audit never lies: the checkpoint is keyed on the implementation and the options, the
units read back keep sampling until their plan is met, and the verdict equals the uninterrupted
one (the batches are seeded by their index, so a resumed run draws exactly what an uninterrupted
run draws)."""

import numpy as np
import pytest

from specverify import SamplingSettings
from specverify.algorithms import verify_chain_batch
from specverify.audit import KernelAdapter, audit
from specverify.errors import SpecVerifyError

OPTS = dict(settings=(SamplingSettings(), SamplingSettings(temperature=0.7)), eps=0.08, exact_checks=False, batch=2000)


def kernel(draft_tokens, draft_probs, target_probs, generator):
    b, g = draft_tokens.shape
    return verify_chain_batch(
        draft_tokens, draft_probs, target_probs, generator.random((b, g)), generator.random(b)
    ).tokens


def residual_from_p(draft_tokens, draft_probs, target_probs, generator):
    b, g = draft_tokens.shape
    return verify_chain_batch(
        draft_tokens, np.zeros_like(draft_probs) + 1e-300, target_probs, generator.random((b, g)), generator.random(b)
    ).tokens


def test_interrupted_by_the_cap_then_resumed_gives_the_uninterrupted_verdict_and_eps(tmp_path):
    ck = str(tmp_path / "ck.npz")
    full = audit(KernelAdapter(kernel), **OPTS)
    cut = audit(KernelAdapter(kernel), budget_s=0.05, checkpoint=ck, **OPTS)
    assert cut.status == "INCONCLUSIVE" and full.status == "PASS"
    # no unit of an INCONCLUSIVE verdict is shown as PASS
    assert all(c.status != "PASS" or c.eps <= 0.08 for c in cut.checks)
    assert "not reached" in " ".join(
        c.summary for c in cut.checks if c.status == "INCONCLUSIVE"
    ) or "not sampled" in " ".join(c.summary for c in cut.checks)
    # what would settle it is a sentence, consistent with what was collected
    statement = cut.needed["statement"]
    assert "--rounds" in statement and "--budget of at least" in statement
    assert all(u["needed"] is None or u["needed"] > u["collected"] for u in cut.needed["units"])
    resumed = audit(KernelAdapter(kernel), checkpoint=ck, resume=True, **OPTS)
    assert resumed.status == full.status and resumed.eps == pytest.approx(full.eps)
    assert resumed.samples == full.samples
    assert [c.pvalue for c in resumed.checks] == pytest.approx([c.pvalue for c in full.checks])


def test_a_checkpoint_of_one_implementation_is_refused_for_another(tmp_path):
    ck = str(tmp_path / "ck.npz")
    audit(KernelAdapter(kernel, name="verify"), budget_s=0.05, checkpoint=ck, **OPTS)
    with pytest.raises(SpecVerifyError, match="belongs to another audit"):
        audit(KernelAdapter(residual_from_p, name="verify"), checkpoint=ck, resume=True, **OPTS)
    with pytest.raises(SpecVerifyError, match="belongs to another audit"):  # other options
        audit(KernelAdapter(kernel, name="verify"), checkpoint=ck, resume=True, **{**OPTS, "eps": 0.1})


def test_a_corrupt_checkpoint_is_a_clear_error(tmp_path):
    ck = tmp_path / "ck.npz"
    ck.write_bytes(b"not a checkpoint")
    with pytest.raises(SpecVerifyError, match="cannot be read"):
        audit(KernelAdapter(kernel), checkpoint=str(ck), resume=True, **OPTS)


def test_same_verdict_with_workers():
    a = audit(KernelAdapter(kernel), **OPTS)
    b = audit(KernelAdapter(kernel), workers=2, **OPTS)
    assert a.samples == b.samples and [c.pvalue for c in a.checks] == pytest.approx([c.pvalue for c in b.checks])


def _round_step(prefix, draft, target, gamma, rng):
    """A correct round step: docs/examples/round_step.py, in the test so the test reads on its own."""

    def sample(w):
        c = np.asarray(w, dtype=np.float64).cumsum()
        return int(min(c.searchsorted(rng.random() * c[-1], side="right"), c.searchsorted(c[-1])))

    xs, qs = [], []
    for _ in range(gamma):
        qs.append(np.asarray(draft(list(prefix) + xs)))
        xs.append(sample(qs[-1]))
    ps = np.asarray(target(list(prefix), xs))
    for i, x in enumerate(xs):
        if rng.random() >= min(1.0, ps[i][x] / qs[i][x]):
            return xs[:i] + [sample(np.maximum(ps[i] - qs[i], 0.0))]
    return xs + [sample(ps[gamma])]


def test_workers_that_compute_the_next_units_ahead_leave_the_verdict_and_no_process_behind():
    """Workers start the next units' batches before a unit is done (collect.WorkerPool): what each
    unit absorbs is still its batches in order, so every check's samples and p-value are those of
    the serial run; and no worker outlives the audit (one left computing a batch nobody reads kept
    the CLI's stdout open after its verdict: a subprocess caller hung)."""
    import multiprocessing

    from specverify.audit import RoundAdapter

    opts = dict(settings=(SamplingSettings(), SamplingSettings(temperature=0.7)), eps=0.15, exact_checks=False)
    serial = audit(RoundAdapter(_round_step), workers=1, **opts)
    parallel = audit(RoundAdapter(_round_step), workers=2, **opts)
    assert multiprocessing.active_children() == []
    assert serial.status == parallel.status == "PASS"
    assert [(c.name, c.n, c.pvalue) for c in serial.checks] == [(c.name, c.n, c.pvalue) for c in parallel.checks]
    assert len(serial.checks) >= 4 and serial.samples == parallel.samples


_ROUNDS_RUN = [0]


def _inverse_cdf(w, u, reverse):
    """An exact draw from the weights ``w`` by inverse CDF, over the ids in either order."""
    order = np.arange(len(w))[::-1] if reverse else np.arange(len(w))
    c = np.cumsum(np.asarray(w, dtype=np.float64)[order])
    return int(order[min(np.searchsorted(c, u * c[-1], side="right"), len(w) - 1)])


def alternating_step(prefix, draft, target, gamma, rng):
    """Lossless, but with a state: each round takes the ids in the order opposite to the round before
    it in this process, so its tokens depend on how many rounds the process ran before."""
    _ROUNDS_RUN[0] += 1
    rev = bool(_ROUNDS_RUN[0] % 2)
    xs, qs = [], []
    for _ in range(gamma):
        qs.append(np.asarray(draft(list(prefix) + xs), dtype=np.float64))
        xs.append(_inverse_cdf(qs[-1], rng.random(), rev))
    ps = np.asarray(target(list(prefix), xs), dtype=np.float64)
    for i, x in enumerate(xs):
        if rng.random() >= min(1.0, ps[i][x] / qs[i][x]):
            return [*xs[:i], _inverse_cdf(np.maximum(ps[i] - qs[i], 0.0), rng.random(), rev)]
    return [*xs, _inverse_cdf(ps[gamma], rng.random(), rev)]


def test_a_resumed_audit_of_a_step_with_a_state_draws_what_the_uninterrupted_one_draws(tmp_path, monkeypatch):
    """Isolated (each batch in a fresh fork, as the CLI runs wherever forking is safe), a step whose
    tokens depend on the rounds its process ran before draws, resumed after an interruption at the
    fourth batch, exactly what it draws uninterrupted. In this process (isolate_batches=False: tried)
    the samples differ and this test fails."""
    from specverify.audit import RoundAdapter
    from specverify.audit.pipeline import collect

    opts = dict(settings=(SamplingSettings(),), rounds=120, batch=320, exact_checks=False, long_length=0)
    opts |= dict(stop_token_ids=(), isolate_batches=True, eps=0.3)
    full = audit(RoundAdapter(alternating_step), **opts)
    absorb, absorbed = collect._absorb, []

    def interrupted(*args):
        if len(absorbed) == 3:
            raise KeyboardInterrupt
        absorbed.append(1)
        return absorb(*args)

    monkeypatch.setattr(collect, "_absorb", interrupted)
    ck = str(tmp_path / "ck.npz")
    with pytest.raises(KeyboardInterrupt):
        audit(RoundAdapter(alternating_step), checkpoint=ck, **opts)
    monkeypatch.setattr(collect, "_absorb", absorb)
    resumed = audit(RoundAdapter(alternating_step), checkpoint=ck, resume=True, **opts)
    assert full.status == resumed.status == "PASS" and resumed.samples == full.samples
    assert [c.pvalue for c in resumed.checks] == [c.pvalue for c in full.checks]
