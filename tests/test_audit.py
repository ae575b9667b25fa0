"""End-to-end audits: adapters, findings for bad implementations, checkpoints, CLI, plugin."""

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from specverify.algorithms import verify_chain_batch
from specverify.audit import GeneratorAdapter, KernelAdapter, RoundAdapter, SamplerAdapter, SubprocessAdapter, audit
from specverify.catalogue import ChainSampler, bugs
from specverify.cli import main
from specverify.pytest_plugin import assert_lossless

ROOT = Path(__file__).resolve().parents[1]
FAST = dict(settings=(__import__("specverify").SamplingSettings(),), eps=0.08)


def good_kernel(draft_tokens, draft_probs, target_probs, generator):
    b, g = draft_tokens.shape
    return verify_chain_batch(
        draft_tokens, draft_probs, target_probs, generator.random((b, g)), generator.random(b)
    ).tokens


def always_accept_kernel(draft_tokens, draft_probs, target_probs, generator):
    out = np.concatenate([draft_tokens, draft_tokens[:, -1:]], axis=1)
    return out


def crashing_kernel(*a):
    raise ValueError("boom")


def hanging_kernel(*a):
    time.sleep(30)


def wrong_shape_kernel(draft_tokens, *a):
    return draft_tokens  # [B, g] instead of [B, g + 1]


def test_kernel_adapter_pass_and_fail():
    assert audit(KernelAdapter(good_kernel), **FAST).status == "PASS"
    v = audit(KernelAdapter(always_accept_kernel), **FAST)
    assert v.status == "FAIL" and "settings[0]" in v.evidence[0]


@pytest.mark.parametrize(
    "fn, words",
    [
        (crashing_kernel, "raised ValueError: boom"),
        (hanging_kernel, "did not return within"),
        (wrong_shape_kernel, "returned shape"),
    ],
)
def test_bad_implementations_become_findings(fn, words):
    v = audit(KernelAdapter(fn, call_timeout=0.5), **FAST)
    assert v.status == "FAIL"
    assert any(words in e for e in v.evidence), v.evidence


def test_round_adapter_on_the_article_shape():
    def step(prefix, draft, target, gamma, rng):
        from specverify.algorithms import speculative_step

        return speculative_step(prefix, draft, target, gamma, rng)

    v = audit(RoundAdapter(step), batch=500, **FAST)
    assert v.status == "PASS", v.headline()

    def buggy_step(prefix, draft, target, gamma, rng):  # replacement from p
        qs, xs = [], []
        for _ in range(gamma):
            q = draft(prefix + xs)
            qs.append(q)
            xs.append(int(rng.choice(len(q), p=np.asarray(q) / sum(q))))
        ps = target(prefix, xs)
        out = []
        for i, x in enumerate(xs):
            if rng.random() < ps[i][x] / qs[i][x]:
                out.append(x)
                continue
            out.append(int(rng.choice(len(ps[i]), p=np.asarray(ps[i]) / sum(ps[i]))))
            return out
        return out + [int(rng.choice(len(ps[-1]), p=np.asarray(ps[-1]) / sum(ps[-1])))]

    assert audit(RoundAdapter(buggy_step), batch=500, **FAST).status == "FAIL"


def test_generator_adapter():
    def gen(prompt, n, seed, model):
        rng = np.random.default_rng(seed)
        out = list(prompt)
        for _ in range(n):
            p = model.target_probs(out)
            out.append(int(rng.choice(len(p), p=p)))
        return out[len(prompt) :]

    assert audit(GeneratorAdapter(gen), batch=2000, max_units=20000, eps=0.2, settings=FAST["settings"]).status in (
        "PASS",
        "INCONCLUSIVE",
    )

    def bad(prompt, n, seed, model):
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            p = model.draft_probs(out)  # the draft's law, not the target's
            out.append(int(rng.choice(len(p), p=p)))
        return out

    assert audit(GeneratorAdapter(bad), batch=2000, max_units=20000, settings=FAST["settings"]).status == "FAIL"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js not installed")
def test_subprocess_adapter_with_a_node_client():
    js = ROOT / "tests" / "clients" / "verify_kernel.js"
    a = SubprocessAdapter(f"node {js}")
    try:
        v = audit(a, batch=2000, **{**FAST, "eps": 0.12})  # a process per call: the coarser eps
    finally:
        a.close()
    assert v.status == "PASS" and v.subject == "node-kernel", v.headline()
    b = SubprocessAdapter(f"node {js} --bug always_accept")
    try:
        assert audit(b, batch=2000, **{**FAST, "eps": 0.12}).status == "FAIL"
    finally:
        b.close()


class Interrupting(SamplerAdapter):
    def __init__(self, after):
        super().__init__(ChainSampler())
        self.calls, self.after = 0, after

    def generate(self, *a):
        self.calls += 1
        if self.calls > self.after:
            raise KeyboardInterrupt
        return super().generate(*a)


def test_checkpoint_and_resume_lose_no_sample(tmp_path):
    ck = str(tmp_path / "audit.ckpt.npz")
    full = audit(SamplerAdapter(ChainSampler()), batch=3000, **FAST, exact_checks=False)
    with pytest.raises(KeyboardInterrupt):
        audit(Interrupting(2), batch=3000, checkpoint=ck, **FAST, exact_checks=False)
    assert Path(ck).exists()
    resumed = audit(SamplerAdapter(ChainSampler()), batch=3000, checkpoint=ck, resume=True, **FAST, exact_checks=False)
    assert resumed.samples == full.samples and resumed.status == full.status
    assert resumed.checks[0].pvalue == pytest.approx(full.checks[0].pvalue)


def test_cli_exit_codes_json_and_html(tmp_path, capsys):
    j, h = tmp_path / "v.json", tmp_path / "v.html"
    assert (
        main(
            [
                "audit",
                "reference",
                "--no-progress",
                "--eps",
                "0.08",
                "--temperature",
                "1.0",
                "--json",
                str(j),
                "--html",
                str(h),
            ]
        )
        == 0
    )
    d = json.loads(j.read_text())
    assert d["schema"] == "specverify.verdict/2" and d["status"] == "PASS" and d["eps"] <= 0.08
    assert "<html" in h.read_text().lower() or "<!doctype html>" in h.read_text().lower()
    assert main(["audit", "replacement_from_p", "--no-progress", "--eps", "0.08", "--temperature", "1.0"]) == 1
    assert main(["audit", "no_such_thing", "--no-progress"]) == 2
    assert main(["audit", "--kernel", "nomodule_xyz:fn", "--no-progress"]) == 2
    assert main(["audit", "reference", "--no-progress", "--eps", "0.001", "--budget", "1", "--temperature", "1.0"]) == 3
    assert main(["audit", "--list-checks"]) == 0


def test_cli_kernel_from_a_file(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("from tests.test_audit import good_kernel as kernel\n")
    sys.path.insert(0, str(ROOT))
    assert main(["audit", "--kernel", f"{f}:kernel", "--no-progress", "--eps", "0.08", "--temperature", "1.0"]) == 0


def test_assert_lossless_helper():
    assert_lossless(ChainSampler(), **FAST)
    with pytest.raises(AssertionError, match="reproduce with seed=3"):
        assert_lossless(bugs.ReplacementFromQ(), seed=3, **FAST)


def test_plugin_fixture_in_a_user_suite(pytester):
    pytester.makepyfile(
        """
        from specverify.catalogue import ChainSampler
        from specverify import SamplingSettings
        def test_mine(specverify_audit, specverify_seed):
            assert specverify_seed > 0
            specverify_audit(ChainSampler(), eps=0.1, settings=(SamplingSettings(),))
        """
    )
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)


def kernel_with_uniforms(draft_tokens, draft_probs, target_probs, generator, uniforms=None):
    b, g = draft_tokens.shape
    ua, uf = uniforms if uniforms is not None else (generator.random((b, g)), generator.random(b))
    return verify_chain_batch(draft_tokens, draft_probs, target_probs, ua, uf).tokens


def inclusive_kernel(draft_tokens, draft_probs, target_probs, generator, uniforms=None):
    # sglang#35771: u <= p/q. Statistically invisible with 53-bit uniforms.
    b, g = draft_tokens.shape
    ua, uf = uniforms if uniforms is not None else (generator.random((b, g)), generator.random(b))
    P, Q = np.asarray(target_probs), np.asarray(draft_probs)
    ar = np.arange(g)
    px = P[np.arange(b)[:, None], ar, draft_tokens]
    qx = Q[np.arange(b)[:, None], ar, draft_tokens]
    ok = ua <= px / qx
    forced = np.where(ok, -1.0, 1.0 - 1e-16)  # feed the inclusive decision to the strict reference
    return verify_chain_batch(draft_tokens, Q, P, forced, uf).tokens


def test_exact_checks_with_injected_uniforms():
    v = audit(KernelAdapter(kernel_with_uniforms, accepts_uniforms=True), **FAST)
    names = {c.name: c.status for c in v.checks}
    assert names["differential: injected uniforms against the reference"] == "PASS"
    assert names["boundary: u = 0 against p(x) = 0"] == "PASS"
    assert names["greedy equivalence (temperature 0)"] == "PASS"
    bad = audit(KernelAdapter(inclusive_kernel, accepts_uniforms=True), **FAST)
    names = {c.name: c for c in bad.checks}
    assert bad.status == "FAIL"
    assert names["boundary: u = 0 against p(x) = 0"].status == "FAIL"
    assert names["differential: injected uniforms against the reference"].status == "FAIL"
    sampling = [c for n, c in names.items() if n.startswith("settings[0] default")]
    assert len(sampling) == 3 and all(  # both overlaps and the odd-vocabulary unit
        c.status == "PASS" for c in sampling
    )  # the sampling test cannot see it: only exact checks can


def test_greedy_check_catches_a_non_greedy_kernel():
    def sampled_anyway(draft_tokens, draft_probs, target_probs, generator):
        # ignores temperature 0: samples the bonus from a flattened row
        out = kernel_with_uniforms(draft_tokens, draft_probs, target_probs, generator)
        b = np.arange(len(out))
        last = (out >= 0).sum(1) - 1
        out[b, last] = (out[b, last] + 1) % target_probs.shape[-1]
        return out

    v = audit(KernelAdapter(sampled_anyway), **FAST)
    g = {c.name: c for c in v.checks}["greedy equivalence (temperature 0)"]
    assert g.status == "FAIL" and "logit margin" in g.summary


def test_html_report_has_the_plots(tmp_path):
    from specverify.audit.front.report import write_html

    v = audit(SamplerAdapter(bugs.ReplacementFromP()), **FAST)
    write_html(v, tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert text.count("data:image/png;base64,") == 1 and "FAIL" in text and "Evidence" in text


def test_plugin_seeds_are_stable_and_distinct_per_test():
    from specverify.pytest_plugin import derive_seed

    a = derive_seed(1, "tests/x.py::test_a")
    assert a == derive_seed(1, "tests/x.py::test_a")  # same on every worker and every run
    assert a != derive_seed(1, "tests/x.py::test_b") and a != derive_seed(2, "tests/x.py::test_a")


def test_sequential_test_stops_early_on_a_gross_bug():
    ref = audit(SamplerAdapter(ChainSampler()), **FAST, exact_checks=False)
    bad = audit(SamplerAdapter(bugs.ResidualSoftmax()), **FAST, exact_checks=False)
    assert bad.status == "FAIL" and bad.checks[0].details["stopped_early"]
    assert bad.samples < ref.samples / 3


def test_cli_full_rule_adds_the_white_box_strata(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("from tests.test_audit import good_kernel as kernel, always_accept_kernel as bad\n")
    sys.path.insert(0, str(ROOT))
    out = tmp_path / "v.json"
    args = ["audit", "--no-progress", "--eps", "0.08", "--temperature", "1.0", "--json", str(out)]
    assert main(args + ["--kernel", f"{f}:kernel", "--full-rule"]) == 0
    strata = [
        w["stratum"]
        for c in json.loads(out.read_text())["checks"]
        if c.get("details")
        for w in c["details"].get("whitebox", [])
    ]
    assert (
        "acceptance given draft ~ Bernoulli(min(1, p/q))" in strata
        and "rejected draft and replacement independent" in strata
    )
    assert main(args + ["--kernel", f"{f}:kernel"]) == 0
    assert not [
        w for c in json.loads(out.read_text())["checks"] if c.get("details") for w in c["details"].get("whitebox", [])
    ]
    assert main(args + ["--kernel", f"{f}:bad", "--full-rule"]) == 1
    assert main(args + ["--kernel", f"{f}:kernel", "--full-rule", "--one-hot"]) == 2


def test_subprocess_requests_keep_every_value_of_the_rows():
    """The --cmd protocol writes rows with orjson (fast) where every value is finite, and with json
    where one is not: orjson would write null for -inf, silently another law for the implementation."""
    from specverify.audit.sources.adapters import _json_line

    rng = np.random.default_rng(0)
    P, X = rng.dirichlet(np.ones(64), size=(30, 5)), rng.integers(0, 64, size=(30, 4))
    line = _json_line({"op": "verify", "draft_tokens": X, "target_probs": P[:, ::2], "draft_probs": None, "seed": 1})
    back = json.loads(line)
    assert line.endswith("\n") and back["draft_probs"] is None and back["seed"] == 1
    assert np.array_equal(np.array(back["target_probs"]), P[:, ::2]) and np.array_equal(back["draft_tokens"], X)
    L = np.log(P)
    L[0, 0, 3] = -np.inf
    line = _json_line({"op": "verify", "target_logits": L, "settings": {"logit_bias": {3: 1.0}}})
    assert "-Infinity" in line and "null" not in line
    assert np.array_equal(np.array(json.loads(line)["target_logits"]), L)
