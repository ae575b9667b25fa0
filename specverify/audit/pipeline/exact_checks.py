"""Exact checks: no sampling error, no rates. Each returns a CheckOutcome (or None when the
adapter cannot support it).

* boundary: with acceptance uniforms forced to 0, a draft token whose target probability is 0
  must still be rejected (an inclusive comparison, sglang#35771, fails this);
* greedy equivalence: at temperature 0 every emitted token is the target's argmax given its true
  prefix (lowest id on exact ties), token for token. Round steps that take the settings, greedy
  steppers and generators get RAW rows (never one-hot) of a pair built for it: exact ties on the
  top, near ties (margin 1e-6), draft argmax != target argmax, and high agreement so that every
  position of the round, the bonus included, is reached; a position never reached makes the check
  INCONCLUSIVE. Kernels get the one-hot rows of a high-overlap pair (they receive no settings);
* differential (kernels that accept injected uniforms): the same draws give the reference's tokens
  exactly: accept iff u < p(x)/q(x), the replacement is the residual's inverse-CDF draw at
  u_final, the bonus comes from row gamma + 1; probed at u = 0, at u just below and at each
  acceptance ratio, and at the residual's CDF breakpoints; plus batch invariance (a round's output
  does not depend on the other rounds in its batch);
* reproducibility: the same seed gives the same output.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...algorithms.chain_numpy import verify_chain_batch
from ...catalogue import Uniforms
from ...dists import GREEDY, SamplingSettings
from ...harness import SequenceView, as_token_ids, greedy_raw_run, make_context_pair
from ...harness._contexts import GREEDY_RUN_SALT
from ...lm.synthetic import TablePair, make_markov_pair, make_positional_pair
from ...stats import FAIL, INCONCLUSIVE, PASS, CheckOutcome
from ..sources.adapters import (
    GeneratorAdapter,
    KernelAdapter,
    SamplerAdapter,
    _check_round_tokens,
    call_with_timeout,
)

if TYPE_CHECKING:
    from ...harness import Generation
    from ..sources.adapters import Adapter
    from .config import AuditConfig
    from .plan import AuditPlan

__all__ = [
    "EXACT_CHECKS",
    "ExactCheck",
    "boundary_check",
    "greedy_check",
    "differential_check",
    "reproducibility_check",
]


def boundary_check(adapter: Adapter, cfg: AuditConfig, **_: Any) -> CheckOutcome | None:
    name = "boundary: u = 0 against p(x) = 0"
    s = SamplingSettings(top_k=3)
    pair = make_positional_pair(cfg.vocab, cfg.gamma, alpha=0.3, seed=cfg.seed + 77)
    if isinstance(adapter, KernelAdapter) and adapter.accepts_uniforms and not adapter.logits:
        bad, tokens = _boundary_kernel(adapter, cfg, pair, s)
    elif isinstance(adapter, SamplerAdapter):
        bad, tokens = _boundary_sampler(adapter, cfg, pair, s)
    else:
        return None
    if bad.any():
        return CheckOutcome(
            name=name,
            status=FAIL,
            kind="exact",
            summary=f"with every acceptance uniform at 0, {int(bad.sum())} token(s) with target "
            f"probability 0 were emitted (first: token {int(np.asarray(tokens)[bad][0])}); the acceptance "
            "comparison must be strict: accept iff u < p(x)/q(x)",
        )
    return CheckOutcome(
        name=name,
        status=PASS,
        kind="exact",
        summary="no zero-probability token emitted with every acceptance uniform at 0",
    )


def _boundary_kernel(
    adapter: KernelAdapter, cfg: AuditConfig, pair: Any, s: SamplingSettings
) -> tuple[np.ndarray, np.ndarray]:
    """A kernel called with every acceptance uniform at 0 on drafts of target probability 0 (where q has
    any): (bad, tokens)."""
    P = np.broadcast_to(pair.target_table(s)[None, : cfg.gamma + 1], (256, cfg.gamma + 1, cfg.vocab))
    Q = np.broadcast_to(pair.draft_table(s)[None, : cfg.gamma], (256, cfg.gamma, cfg.vocab))
    rng = np.random.default_rng(cfg.seed)
    # Drafts from q's support where the target has probability 0, where one exists.
    X = np.empty((256, cfg.gamma), dtype=np.int64)
    for j in range(cfg.gamma):
        zero = np.nonzero((Q[0, j] > 0) & (P[0, j] == 0))[0]
        support = zero if len(zero) else np.nonzero(Q[0, j] > 0)[0]
        X[:, j] = rng.choice(support, 256)
    u = (np.zeros((256, cfg.gamma)), rng.random(256))
    out = call_with_timeout(
        adapter.fn,
        X,
        None if adapter.one_hot else Q,
        P,
        rng,
        uniforms=u,
        timeout=adapter.call_timeout,
        what=adapter.name,
    )
    tokens, n_acc = _check_round_tokens(np.asarray(out), X, cfg.gamma, cfg.vocab, adapter.name)
    p_emit = np.stack([P[0, j][tokens[:, j].clip(0)] for j in range(cfg.gamma + 1)], 1)
    bad = (tokens >= 0) & (p_emit <= 0)
    return bad, tokens


def _boundary_sampler(
    adapter: SamplerAdapter, cfg: AuditConfig, pair: Any, s: SamplingSettings
) -> tuple[np.ndarray, np.ndarray]:
    """A catalogue sampler run with its acceptance uniforms replaced by 0: (bad, tokens)."""
    if adapter.harness == "sequence":
        pair = make_markov_pair(cfg.vocab, alpha=0.3, seed=cfg.seed + 77)
    sampler = adapter.sampler
    orig = sampler.uniforms

    def zero_u(rng: np.random.Generator, b: int, g: int) -> Uniforms:
        U = orig(rng, b, g)
        return Uniforms(U.draft, np.zeros_like(U.accept), U.final, U.target)

    # the sampler's hook replaced for this one run (the instance attribute shadows the method)
    sampler.uniforms = zero_u  # type: ignore[method-assign]
    try:
        gen = adapter.generate(pair, 2000, cfg.gamma, np.random.default_rng(cfg.seed), s)
    finally:
        sampler.uniforms = orig  # type: ignore[method-assign]
    bad = pair.target_table(s)[gen.row, gen.tokens] <= 0
    tokens = gen.tokens
    return bad, tokens


def greedy_check(adapter: Adapter, cfg: AuditConfig, **_: Any) -> CheckOutcome | None:
    """Exact greedy equivalence on raw rows (see the module docstring)."""
    if adapter.harness == "context":
        if not adapter.takes_settings and not adapter.greedy:
            return None  # a 5-argument step cannot be told to decode greedily
        return _greedy_on_raw_rows(adapter, cfg)
    name = "greedy equivalence (temperature 0)"
    # High overlap, so that every position of a round, the bonus included, is reached often.
    if adapter.harness == "sequence":
        pair: TablePair = make_markov_pair(cfg.vocab, alpha=0.95, seed=cfg.seed + 99)
    else:
        pair = make_positional_pair(cfg.vocab, cfg.gamma, alpha=0.95, seed=cfg.seed + 99)
    n = 500 if adapter.harness == "sequence" else 2000
    gen = adapter.generate(pair, n, cfg.gamma, np.random.default_rng(cfg.seed), GREEDY)
    return _greedy_outcome(name, pair, gen, cfg, raw=False)


#: sequences of the long greedy run (of cfg.long_length tokens each, on the raw greedy rows)
GREEDY_LONG_SEQUENCES = 8


def long_greedy_check(adapter: Adapter, cfg: AuditConfig, **_: Any) -> CheckOutcome | None:
    """Greedy equivalence on raw rows over sequences of ``cfg.long_length`` tokens (round steps and
    generators told the settings, or greedy ones): a divergence that starts past a KV block (a
    rotating cache, a position bug after a few hundred tokens) shows here and not in 32-token runs."""
    if adapter.harness != "context" or not cfg.long_length or not (adapter.takes_settings or adapter.greedy):
        return None
    pair = make_context_pair(cfg.vocab, "greedy", seed=cfg.seed + GREEDY_RUN_SALT + 1)
    rng = np.random.default_rng([cfg.seed, GREEDY_RUN_SALT, 1])
    long_run = adapter.generate  # a sequence adapter's (round steps, generators): it takes a length
    gen = long_run(pair, GREEDY_LONG_SEQUENCES, cfg.gamma, rng, GREEDY, length=cfg.long_length)  # type: ignore[call-arg]
    name = f"greedy equivalence over {cfg.long_length}-token sequences (raw rows)"
    return _greedy_outcome(name, pair, gen, cfg, raw=True)


def _greedy_on_raw_rows(adapter: Adapter, cfg: AuditConfig) -> CheckOutcome:
    pair, gen = greedy_raw_run(adapter.generate, cfg.vocab, cfg.gamma, cfg.seed)
    return _greedy_outcome(
        "greedy equivalence (raw rows: ties, near ties, draft disagreements)", pair, gen, cfg, raw=True
    )


def _greedy_outcome(name: str, pair: Any, gen: Generation, cfg: AuditConfig, *, raw: bool) -> CheckOutcome:
    """FAIL at the first token that is not the target's argmax given its true prefix (lowest id on
    exact ties unless cfg.greedy_ties == 'any'); INCONCLUSIVE when a round position was never
    reached; else PASS with the count per position."""
    logits = pair.target_logits[gen.row]  # [N, V]
    top = logits.max(-1)
    want = np.argmax(logits, -1)
    tied = (logits == top[:, None]).sum(-1) > 1
    ok = gen.tokens == want
    if cfg.greedy_ties == "any":
        ok |= logits[np.arange(len(want)), gen.tokens] == top
    counts = np.bincount(gen.position, minlength=cfg.gamma + 1)
    where = ", ".join(f"{j}: {int(c):,}" for j, c in enumerate(counts))
    if not ok.all():
        i = int(np.nonzero(~ok)[0][0])
        srt = np.sort(logits[i])[::-1]
        margin = srt[0] - srt[1]
        kind = "an exact tie (lowest id wins)" if margin == 0 else f"top-2 logit margin {margin:.3g}"
        # most tokens off the argmax: the implementation sampled although it was asked for temperature 0
        hint = (
            "; it was asked for temperature 0 (settings.temperature == 0): decode greedily then, or raise "
            "NotImplementedError to decline greedy decoding (UNSUPPORTED, not FAIL)"
            if raw and (~ok).mean() > 0.5
            else ""
        )
        return CheckOutcome(
            name=name,
            status=FAIL,
            kind="exact",
            summary=f"{int((~ok).sum())} of {len(ok):,} tokens differ from target-only greedy; "
            f"first at round position {int(gen.position[i])}: emitted {int(gen.tokens[i])}, target argmax "
            f"{int(want[i])} ({kind}); tokens per position {where}{hint}",
        )
    missing = [j for j, c in enumerate(counts) if c == 0]
    if raw and missing:
        return CheckOutcome(
            name=name,
            status=INCONCLUSIVE,
            kind="exact",
            summary=f"every token equals target-only greedy, but round position(s) {missing} "
            f"were never reached (tokens per position {where}); raise --gamma's coverage with more --rounds",
        )
    ties = f"; {int(tied.sum()):,} at exact ties" if tied.any() else ""
    return CheckOutcome(
        name=name,
        status=PASS,
        kind="exact",
        summary=f"{len(ok):,} tokens, every one the target's argmax given its prefix{ties}; tokens per position "
        f"{where}",
    )


def _probe_uniforms(
    P: np.ndarray, Q: np.ndarray, X: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Acceptance uniforms at 0, just below and exactly at each ratio; final uniforms at the
    residual's CDF breakpoints (just above each), and random ones."""
    b, g = X.shape
    ar = np.arange(g)
    ratio = np.minimum(P[0, ar, X] / Q[0, ar, X], 1.0)  # [b, g]
    choice = rng.integers(0, 4, (b, g))
    ua = np.select(
        [choice == 0, choice == 1, choice == 2], [np.zeros((b, g)), np.nextafter(ratio, 0), ratio], rng.random((b, g))
    )
    ua = np.minimum(ua, np.nextafter(1.0, 0))
    uf = np.asarray(rng.random(b), dtype=np.float64)
    k = rng.integers(0, g + 1, b)
    for i in range(b):
        w = P[0, k[i]] if k[i] == g else np.maximum(P[0, k[i]] - Q[0, k[i]], 0)
        if w.sum() > 0 and rng.random() < 0.5:
            cum = np.cumsum(w) / np.cumsum(w)[-1]
            uf[i] = min(np.nextafter(cum[rng.integers(0, len(w))], 2.0), np.nextafter(1.0, 0))
    return ua, uf


def differential_check(adapter: Adapter, cfg: AuditConfig, **_: Any) -> CheckOutcome | None:
    if not (
        isinstance(adapter, KernelAdapter) and adapter.accepts_uniforms and not adapter.one_hot and not adapter.logits
    ):
        return None
    name = "differential: injected uniforms against the reference"
    rng = np.random.default_rng(cfg.seed + 5)
    failure = _differential_synthetic(adapter, cfg, name, rng)
    if failure is None:
        failure, n_cases = _differential_conformance(adapter, name, rng)
    if failure is not None:
        return failure
    return CheckOutcome(
        name=name,
        status=PASS,
        kind="exact",
        summary=f"1,536 synthetic rounds and {n_cases} conformance cases probed at u = 0, at the acceptance "
        "ratios and the residual's CDF breakpoints: tokens identical to the reference; batch invariant",
    )


def _differential_synthetic(
    adapter: KernelAdapter, cfg: AuditConfig, name: str, rng: np.random.Generator
) -> CheckOutcome | None:
    """Three settings x 512 synthetic rounds against the reference, then batch invariance; a FAIL or None."""
    for trial, s in enumerate(
        [SamplingSettings(), SamplingSettings(top_k=5), SamplingSettings(temperature=0.5, top_p=0.8)]
    ):
        pair = make_positional_pair(cfg.vocab, cfg.gamma, alpha=0.6, seed=cfg.seed + 200 + trial)
        b = 512
        P = np.broadcast_to(pair.target_table(s)[None, : cfg.gamma + 1], (b, cfg.gamma + 1, cfg.vocab))
        Q = np.broadcast_to(pair.draft_table(s)[None, : cfg.gamma], (b, cfg.gamma, cfg.vocab))
        X = np.stack([rng.choice(cfg.vocab, b, p=Q[0, j]) for j in range(cfg.gamma)], 1)
        ua, uf = _probe_uniforms(P, Q, X, rng)
        want = verify_chain_batch(X, Q, P, ua, uf).tokens
        got = np.asarray(
            call_with_timeout(
                adapter.fn, X, Q, P, rng, uniforms=(ua, uf), timeout=adapter.call_timeout, what=adapter.name
            )
        )
        got, _ = _check_round_tokens(got, X, cfg.gamma, cfg.vocab, adapter.name)
        diff = np.nonzero((got != want).any(1))[0]
        if len(diff):
            i = int(diff[0])
            j = int(np.argmax(got[i] != want[i]))
            return CheckOutcome(
                name=name,
                status=FAIL,
                kind="exact",
                summary=f"settings {s.short()}, round {i}: emitted {got[i].tolist()}, reference "
                f"{want[i].tolist()} (first difference at position {j}; u_accept {ua[i].tolist()}, u_final {uf[i]!r}, "
                f"drafts {X[i].tolist()}); {len(diff)} of {b} rounds differ",
            )
        # Batch invariance: each round alone gives what it gave in the batch.
        for i in rng.choice(b, 8, replace=False):
            one = np.asarray(
                call_with_timeout(
                    adapter.fn,
                    X[i : i + 1],
                    Q[:1],
                    P[:1],
                    rng,
                    uniforms=(ua[i : i + 1], uf[i : i + 1]),
                    timeout=adapter.call_timeout,
                    what=adapter.name,
                )
            )
            if not np.array_equal(one[0], got[i]):
                return CheckOutcome(
                    name=name,
                    status=FAIL,
                    kind="exact",
                    summary=f"batch invariance: round {int(i)} emitted {got[i].tolist()} in a batch of {b} "
                    f"but {one[0].tolist()} alone, with the same uniforms",
                )
    return None


def _differential_conformance(
    adapter: KernelAdapter, name: str, rng: np.random.Generator
) -> tuple[CheckOutcome | None, int]:
    """The conformance vectors' full-rule cases probed like the synthetic rounds: (a FAIL or None, cases run)."""
    # The conformance vectors' full-rule cases (p == q, disjoint supports, zeros, one-hot rows,
    # near-ties, drafts with p(x) = 0), probed the same way.
    from fractions import Fraction

    from ...algorithms.conformance import generate_cases

    n_cases = 0
    for case in generate_cases():
        if case["rule"] != "full":
            continue
        g = case["gamma"]
        Pc = np.array([[float(Fraction(x)) for x in r] for r in case["p"]])[None]
        Qc = np.array([[float(Fraction(x)) for x in r] for r in case["q"]])[None]
        b = 64
        P, Q = np.broadcast_to(Pc, (b,) + Pc.shape[1:]), np.broadcast_to(Qc, (b,) + Qc.shape[1:])
        X = np.tile(np.array(case["draft_tokens"]), (b, 1))
        ua, uf = _probe_uniforms(P, Q, X, rng)
        want = verify_chain_batch(X, Q, P, ua, uf).tokens
        got = np.asarray(
            call_with_timeout(
                adapter.fn, X, Q, P, rng, uniforms=(ua, uf), timeout=adapter.call_timeout, what=adapter.name
            )
        )
        got, _ = _check_round_tokens(got, X, g, P.shape[-1], adapter.name)
        bad = np.nonzero((got != want).any(1))[0]
        if len(bad):
            i = int(bad[0])
            return CheckOutcome(
                name=name,
                status=FAIL,
                kind="exact",
                summary=f"conformance case {case['id']}: emitted {got[i].tolist()}, reference {want[i].tolist()} "
                f"(u_accept {ua[i].tolist()}, u_final {uf[i]!r})",
            ), n_cases
        n_cases += 1
    return None, n_cases


def reproducibility_check(
    adapter: Adapter, cfg: AuditConfig, *, plan: AuditPlan, pairs: dict[int, Any]
) -> CheckOutcome | None:
    if not plan.units:
        return None
    u = plan.units[0]

    def run(seed: int) -> Generation:
        return adapter.generate(pairs[u.index], 64, cfg.gamma, np.random.default_rng(seed), u.settings)

    # another seed in between: a cache keyed on less than the whole prefix (its length, say) is then
    # filled by that run and serves its stale rows to the repeat, which two runs back to back would hide
    a, _, b = run(cfg.seed + 5), run(cfg.seed + 6), run(cfg.seed + 5)
    same = len(a.tokens) == len(b.tokens) and np.array_equal(a.tokens, b.tokens)
    return CheckOutcome(
        name="seeded reproducibility",
        status=PASS if same else FAIL,
        kind="exact",
        summary="same seed, same output (another seed's run in between)"
        if same
        else "the same seed produced different outputs: the implementation "
        "draws randomness from somewhere other than the generator it is given",
    )


#: requests of the seed-independence check, and the longest sequence it asks for
SEED_REQUESTS, SEED_MAX_LENGTH = 6, 512


def seed_independence_check(
    adapter: Adapter, cfg: AuditConfig, *, plan: AuditPlan, pairs: dict[int, Any]
) -> CheckOutcome | None:
    """Different seeds, different samples: ``SEED_REQUESTS`` requests of one prompt, each with its own
    seed, must not repeat one another (NVIDIA/TensorRT-LLM#19487: requests sharing one RNG stream gave
    identical samples). Under the target law two independent samples of L tokens coincide with
    probability at most m^L (m: the largest probability of any row), so L is chosen to make the
    chance of any coincidence among the pairs of requests at most a thousandth of alpha (the
    audit's false-fail budget is spent on its statistics): a repeat is a FAIL at that rate."""
    units = [u for u in plan.units if not u.settings.uses_history and hasattr(pairs[u.index], "target_table")]
    if not isinstance(adapter, GeneratorAdapter) or not units:
        return None
    u, n_pairs = units[0], SEED_REQUESTS * (SEED_REQUESTS - 1) // 2
    pair = pairs[u.index]
    m = float(pair.target_table(u.settings).max())
    if m >= 1.0:
        return None  # a deterministic row: identical samples are what the law gives
    length = max(8, math.ceil(math.log(cfg.alpha * 1e-3 / n_pairs) / math.log(m)))
    if length > SEED_MAX_LENGTH:
        return None
    rng = np.random.default_rng([cfg.seed, 9])
    prompt = rng.integers(0, pair.vocab_size, 4).tolist()
    seeds = rng.choice(2**31, SEED_REQUESTS, replace=False).tolist()
    view = SequenceView(pair, u.settings, adapter.mode(u.settings))
    outs = [
        as_token_ids(call_with_timeout(adapter.fn, list(prompt), length, sd, view, timeout=adapter.call_timeout,
                                       what=adapter.name), adapter.name).tolist()[:length]
        for sd in seeds
    ]  # fmt: skip
    same = [(seeds[i], seeds[j]) for i in range(len(outs)) for j in range(i) if outs[i] == outs[j]]
    bound = n_pairs * m**length
    if same:
        a, b = same[0]
        summary = (
            f"seeds {a} and {b} gave the same {length} tokens ({len(same)} of {n_pairs} pairs of requests repeat): "
            f"the randomness does not follow the request's seed; under the target law a repeat has probability "
            f"at most {bound:.2g}"
        )
        return CheckOutcome(name="seed independence", status=FAIL, kind="exact", summary=summary)
    summary = f"{SEED_REQUESTS} seeds, {SEED_REQUESTS} different samples of {length} tokens from one prompt"
    return CheckOutcome(name="seed independence", status=PASS, kind="exact", summary=summary)


@dataclasses.dataclass(frozen=True)
class ExactCheck:
    """One exact check: ``fn(adapter, cfg, plan=plan, pairs=pairs)`` returns a CheckOutcome, or None when it
    does not apply; ``check_id`` is what the diagnosis and the report recognise it by; ``name`` is its row's
    name when the implementation raised inside it (the outcome then has no name of its own)."""

    fn: Callable[..., CheckOutcome | None]
    check_id: str
    name: str


EXACT_CHECKS: tuple[ExactCheck, ...] = (
    ExactCheck(boundary_check, "exact/boundary", "boundary: u = 0 against p(x) = 0"),
    ExactCheck(greedy_check, "exact/greedy", "greedy equivalence (temperature 0)"),
    ExactCheck(long_greedy_check, "exact/greedy-long", "greedy equivalence over long sequences"),
    ExactCheck(differential_check, "exact/differential", "differential: injected uniforms against the reference"),
    ExactCheck(reproducibility_check, "exact/reproducibility", "seeded reproducibility"),
    ExactCheck(seed_independence_check, "exact/seeds", "seed independence"),
)
