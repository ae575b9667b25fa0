"""The request-level suite (issue 21) through the installed CLI, in subprocesses, module form.

    python scripts/request_suite.py [--eps 0.2] [--table-eps 0.05] [--only SUBSTR ...] [--out FILE] [--table]

Every case is written the way users write them and modelled on a public report (cited in its
docstring): LM generators (``--lm-generator``, on specverify's tiny transformers pairs with the stop
unit, the 512-token long unit and the seed check), round steps (``--round``, with ``--logits`` for
the parity grid with its penalty and logit-bias knobs) and kernels (``--kernel``, with the
odd-vocabulary unit). Default options except eps: ``--eps`` (0.2) for LM generators, whose
transformers forward passes make the default 0.05 take a quarter of an hour or more each (their
buggy cases FAIL exact request checks, which do not depend on eps); round steps and
kernels at the CLI's default 0.05 (``--table-eps``). The plan and the rates are the defaults. A buggy case must
FAIL and a correct one PASS; the table gives the verdict, the seconds, the headline and the
diagnosis lead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: presence and frequency penalties (generated tokens only) on raw logits the step processes itself
PENALTY_FLAGS = ["--logits", "--presence-penalty", "1.5", "--frequency-penalty", "1.0"]

#: (shape, spec, flags, buggy, source)
CASES = [
    ("lm", "user_impls.request_generators:eos_mid_round_correct", [], False, "a stop accepted mid-round, cut there"),
    ("lm", "user_impls.request_generators:logprobs_correct", [], False, "processed logprobs + top-2"),
    ("lm", "user_impls.request_generators:cache_window_correct", [], False, "a 256-token window, trimmed"),
    ("lm", "user_impls.request_generators:per_request_rng_correct", [], False, "one seeded generator per request"),
    ("lm", "lm_generator:make", [], False, "docs/examples/lm_generator.py"),
    ("lm", "user_impls.request_generators:eos_checked_on_last_token", [], True, "huggingface/transformers#47912"),
    ("lm", "user_impls.request_generators:length_before_stop", [], True, "sgl-project/sglang#31599"),
    ("lm", "user_impls.request_generators:stops_on_a_drafted_stop", [], True, "transformers#31301 (crop as end)"),
    ("lm", "user_impls.request_generators:rotating_cache_keeps_rejected", [], True, "ml-explore/mlx-lm#846"),
    ("lm", "user_impls.request_generators:draft_buffer_of_one_block", [], True, "written for the suite"),
    ("lm", "user_impls.request_generators:logprobs_all_zero", [], True, "ggml-org/llama.cpp#27972"),
    ("lm", "user_impls.request_generators:logprobs_of_the_draft", [], True, "vllm-project/vllm#34497"),
    ("lm", "user_impls.request_generators:padded_vocab_recovery", [], True, "vllm-project/vllm#44744"),
    ("lm", "user_impls.request_generators:one_stream_for_every_request", [], True, "NVIDIA/TensorRT-LLM#19487"),
    ("round", "user_impls.logits_steppers:step_logits_correct", ["--logits"], False, "the whole grid, bias first"),
    ("round", "user_impls.logits_steppers:step_logits_bias_ignored", ["--logits"], True, "sgl-project/sglang#10617"),
    ("round", "user_impls.round_numpy:step_rotating_cache_256", [], True, "rotating KV cache (mlx-lm family)"),
    ("kernel", "user_impls.kernels:kernel_padded_tile", ["--full-rule"], True, "vllm-project/vllm#44744"),
    # round steps under the stop unit (a request ends at the first stop a round emits)
    ("round", "user_impls.stop_steppers:step_cuts_at_stop_correct", [], False, "the round cut at its stop"),
    ("round", "user_impls.stop_steppers:step_draft_stops_at_stop_correct", [], False, "openvino.genai#3293's fix"),
    ("round", "user_impls.stop_steppers:step_drafted_stop_unverified", [], True, "openvinotoolkit/openvino.genai#3293"),
    ("round", "user_impls.stop_steppers:step_replacement_never_stop", [], True, "written for the suite (EOS special)"),
    # penalties over the generated tokens (presence, frequency) with the prompt boundary
    ("round", "user_impls.penalty_steppers:step_penalties_correct", PENALTY_FLAGS, False, "drafts in the history"),
    ("round", "user_impls.penalty_steppers:step_penalties_target_only", PENALTY_FLAGS, False, "draft unpenalised"),
    ("round", "user_impls.penalty_steppers:step_incremental_correct", PENALTY_FLAGS, False, "counts across rounds"),
    ("round", "user_impls.penalty_steppers:step_frequency_ignored", PENALTY_FLAGS, True, "vllm-project/vllm#18902"),
    ("round", "user_impls.penalty_steppers:step_penalties_ignored", PENALTY_FLAGS, True, "TensorRT-LLM#17701"),
    ("round", "user_impls.penalty_steppers:step_penalties_count_the_prompt", PENALTY_FLAGS, True, "OpenAI semantics"),
    ("round", "user_impls.penalty_steppers:step_penalty_fed_last_token_only", PENALTY_FLAGS, True, "sglang#33643"),
    ("round", "user_impls.penalty_steppers:step_history_keeps_rejected_drafts", PENALTY_FLAGS, True, "vmlx-swift#357"),
    ("round", "user_impls.logits_steppers:step_logits_bias_after_temperature", ["--logits"], True, "bias order (vLLM)"),
]
FLAG = {"lm": "--lm-generator", "round": "--round", "kernel": "--kernel"}
EXIT = {0: "PASS", 1: "FAIL", 2: "USAGE", 3: "INCONCLUSIVE", 5: "UNSUPPORTED"}


def run_case(shape: str, spec: str, flags: list[str], eps: float, timeout: float = 1500) -> dict:
    paths = [str(ROOT / "tests"), str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), COLUMNS="200", OMP_NUM_THREADS="1")
    cmd = [str(Path(sys.executable).with_name("specverify")), "audit", FLAG[shape], spec, *flags, "--eps", str(eps)]
    t = time.perf_counter()
    r = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    lines = r.stdout.splitlines()
    head = next((ln for ln in reversed(lines) if ln.startswith(("PASS", "FAIL", "INCONCLUSIVE"))), r.stderr[-300:])
    lead = next((ln for ln in lines if ln.startswith("Diagnosis:")), "")
    return {
        "verdict": EXIT.get(r.returncode, f"exit {r.returncode}"),
        "seconds": round(time.perf_counter() - t, 1),
        "headline": head[:400],
        "diagnosis": lead[:300],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eps", type=float, default=0.2, help="eps of the LM cases (tiny transformers, slower)")
    ap.add_argument("--table-eps", type=float, default=0.05, help="eps of round steps and kernels (default: the CLI's)")
    ap.add_argument("--only", action="append", default=[], help="run the cases whose spec contains it (repeatable)")
    ap.add_argument("--out", default=str(ROOT / "scripts/results/request_suite.json"))
    ap.add_argument("--table", action="store_true", help="print the results file as a markdown table")
    a = ap.parse_args(argv)
    rows = []
    for shape, spec, flags, buggy, source in CASES:
        if a.only and not any(o in spec for o in a.only):
            continue
        eps = a.eps if shape == "lm" else a.table_eps
        r = {
            "shape": shape,
            "spec": spec,
            "buggy": buggy,
            "source": source,
            "eps": eps,
            **run_case(shape, spec, flags, eps),
        }
        r["ok"] = r["verdict"] == ("FAIL" if buggy else "PASS")
        rows.append(r)
        print(f"{'ok ' if r['ok'] else 'BAD'} {r['verdict']:12s} {r['seconds']:7.1f}s  {spec}  {r['headline'][:120]}")
        print(f"      {r['diagnosis'][:160]}", flush=True)
    out = Path(a.out)
    if a.only and out.exists():  # a partial run replaces its cases' rows and keeps the others, in CASES order
        ran = {r["spec"] for r in rows}
        kept = {r["spec"]: r for r in json.loads(out.read_text()) if r["spec"] not in ran}
        by_spec = {**kept, **{r["spec"]: r for r in rows}}
        rows = [by_spec[c[1]] for c in CASES if c[1] in by_spec]
    bad = [r for r in rows if not r["ok"]]
    n_bug = sum(r["buggy"] for r in rows)
    print(f"{len(rows) - len(bad)}/{len(rows)} as expected; {n_bug} buggy, {len(rows) - n_bug} correct; eps {a.eps}")
    out.write_text(json.dumps(rows, indent=1))
    if a.table:
        print(table(rows))
    return 1 if bad else 0


def table(rows: list[dict]) -> str:
    """The suite as a markdown table: case, modelled on, expected, verdict, seconds, diagnosis lead."""
    lines = [
        "| case | modelled on | eps | expected | verdict | s | diagnosis lead |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lead = r["diagnosis"].removeprefix("Diagnosis: ").split(" (")[0] or "-"
        expected = "FAIL" if r["buggy"] else "PASS"
        case = r["spec"].split(".")[-1]
        eps = r.get("eps", 0.1)
        lines.append(f"| {case} | {r['source']} | {eps} | {expected} | {r['verdict']} | {r['seconds']:.0f} | {lead} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
