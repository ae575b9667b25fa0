"""Language-neutral conformance vectors for verification kernels (``conformance/``).

Each case fixes a vocabulary size V, gamma, a rule, target rows p_1..p_{gamma+1}, draft rows
q_1..q_gamma and draft tokens x_1..x_gamma, all rational; the expected output is the exact law of
what one verification call emits: the number k of accepted drafts and the final token y (the
replacement after a rejection at position k + 1, or the bonus from p_{gamma+1} when k = gamma).
Format: ``conformance/README.md``. Regenerate with ``specverify conformance --out conformance``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .exact_law import RULES, Tokens, kernel_output_law

__all__ = ["FORMAT_VERSION", "generate_cases", "write_vectors", "load_vectors"]

FORMAT_VERSION = 1
FILE_NAME = "chain-v1.json"


def _row(weights: Iterable[int | np.integer]) -> list[Fraction]:
    total = sum(int(w) for w in weights)
    return [Fraction(int(w), total) for w in weights]


def _weights(rng: np.random.Generator, v: int, kind: str) -> np.ndarray:
    if kind == "general":
        w = rng.integers(0, 20, v)
    elif kind == "dense":
        w = rng.integers(1, 50, v)
    elif kind == "one_hot":
        w = np.zeros(v, dtype=np.int64)
        w[rng.integers(v)] = 1
    elif kind == "near_tie":
        w = rng.integers(1000, 1002, v)
    elif kind == "sparse":
        w = np.zeros(v, dtype=np.int64)
        idx = rng.choice(v, size=max(1, v // 4), replace=False)
        w[idx] = rng.integers(1, 9, len(idx))
    else:
        raise ValueError(kind)
    if w.sum() == 0:
        w[rng.integers(v)] = 1
    return w


def _case_weights(
    rng: np.random.Generator, *, v: int, gamma: int, rule: str, relation: str, p_kind: str, q_kind: str
) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    """The integer weights of the target and draft rows, and the draft tokens, of one case."""
    p_w = [_weights(rng, v, p_kind) for _ in range(gamma + 1)]
    q_w = []
    draft = []
    for i in range(gamma):
        if relation == "equal":
            qw = p_w[i].copy()
        elif relation == "disjoint":
            qw = np.where(p_w[i] == 0, rng.integers(1, 9, v), 0)
            if qw.sum() == 0:  # p has full support; make room
                z = rng.integers(v)
                p_w[i][z] = 0
                if p_w[i].sum() == 0:
                    p_w[i][(z + 1) % v] = 1
                qw = np.where(p_w[i] == 0, rng.integers(1, 9, v), 0)
        elif relation == "q_positive_p_zero":
            qw = _weights(rng, v, q_kind)
            support = np.nonzero(qw)[0]
            x0 = int(rng.choice(support))
            p_w[i][x0] = 0
            if p_w[i].sum() == 0:
                p_w[i][(x0 + 1) % v] = 1
        else:
            qw = _weights(rng, v, q_kind)
        q_w.append(qw)
        support = np.nonzero(qw)[0]
        if relation == "q_positive_p_zero":
            x = int(support[np.argmin(p_w[i][support])])
        elif rule == "greedy":
            x = int(np.argmax(qw))
        else:
            x = int(rng.choice(support))
        draft.append(x)
    return p_w, q_w, draft


def _case(
    rng: np.random.Generator,
    idx: int,
    *,
    v: int,
    gamma: int,
    rule: str,
    relation: str,
    p_kind: str = "general",
    q_kind: str = "general",
) -> dict[str, Any]:
    p_w, q_w, draft = _case_weights(rng, v=v, gamma=gamma, rule=rule, relation=relation, p_kind=p_kind, q_kind=q_kind)
    p_rows = [_row(w) for w in p_w]
    q_rows = [_row(w) for w in q_w]
    law = kernel_output_law(p_rows, q_rows, draft, RULES[rule])
    entries = sorted(law.items())
    count_law = [Fraction(0)] * (gamma + 1)
    for (k, _), pr in entries:
        count_law[k] += pr
    expected = sum((k + 1) * pr for k, pr in enumerate(count_law))
    return {
        "id": f"{idx:03d}-{rule}-{relation}-V{v}-g{gamma}",
        "rule": rule,
        "vocab_size": v,
        "gamma": gamma,
        "tags": sorted({relation, f"p:{p_kind}", f"q:{q_kind}"}),
        "p": [[str(f) for f in r] for r in p_rows],
        "q": None if rule in ("one_hot", "sample_and_match", "greedy") else [[str(f) for f in r] for r in q_rows],
        "q_reported_for_reference": [[str(f) for f in r] for r in q_rows],
        "draft_tokens": draft,
        "law": [{"accepted": k, "token": y, "prob": str(pr), "prob_float": float(pr)} for (k, y), pr in entries],
        "accepted_count_law": [str(c) for c in count_law],
        "accepted_count_law_float": [float(c) for c in count_law],
        "expected_emitted": str(expected),
        "expected_emitted_float": float(expected),
    }


def generate_cases(seed: int = 20261129) -> list[dict[str, Any]]:
    """The fixed list of cases (deterministic in ``seed``)."""
    rng = np.random.default_rng(seed)
    plan: list[dict[str, Any]] = []
    vocabs = [2, 3, 4, 5, 8, 16, 32, 64]
    for rule in ("full", "one_hot", "sample_and_match", "greedy"):
        for relation in ("independent", "equal", "disjoint", "q_positive_p_zero"):
            for _j, (pk, qk) in enumerate(
                [("general", "general"), ("one_hot", "dense"), ("near_tie", "near_tie"), ("sparse", "one_hot")]
            ):
                if rule == "greedy" and relation == "q_positive_p_zero":
                    continue
                i = len(plan)
                v = vocabs[i % len(vocabs)]
                gamma = 1 + (3 * i + i // len(vocabs)) % 8
                plan.append(dict(v=v, gamma=gamma, rule=rule, relation=relation, p_kind=pk, q_kind=qk))
    return [_case(rng, i, **kw) for i, kw in enumerate(plan)]


TREE_FILE_NAME = "tree-v1.json"


def generate_tree_cases(seed: int = 20261129) -> list[dict[str, Any]]:
    """Tree / multi-draft cases: rows depend on depth only; the law is over the emitted block."""
    from .multi_draft import PAIRINGS, tree_round_law

    rng = np.random.default_rng(seed + 1)
    cases: list[dict[str, Any]] = []
    shapes = [(3, [2]), (4, [2, 2]), (5, [3, 1])]
    for pairing in PAIRINGS:
        for v, branching in shapes:
            depth = len(branching)
            p_rows = [_row(_weights(rng, v, "dense" if d % 2 == 0 else "general")) for d in range(depth + 1)]
            q_rows = [_row(_weights(rng, v, "dense")) for _ in range(depth)]

            def target(ctx: Tokens, P: list[list[Fraction]] = p_rows) -> list[Fraction]:
                return P[len(ctx)]

            def draft(ctx: Tokens, Q: list[list[Fraction]] = q_rows) -> list[Fraction]:
                return Q[len(ctx)]

            law = tree_round_law(target, draft, (), branching, pairing.mechanism, pairing.rule)
            exp = sum(Fraction(len(b)) * w for b, w in law.items())
            # the target's own law of the first token, to compare against (exact pairings match it)
            first: dict[int, Fraction] = {}
            for b, w in law.items():
                first[b[0]] = first.get(b[0], Fraction(0)) + w
            cases.append(
                {
                    "id": f"{len(cases):03d}-{pairing.name}-V{v}-b{'x'.join(map(str, branching))}",
                    "pairing": pairing.name,
                    "mechanism": pairing.mechanism,
                    "rule": pairing.rule.name,
                    "rule_params": {
                        "threshold_single": pairing.rule.threshold_single,
                        "threshold_acc": pairing.rule.threshold_acc,
                        "epsilon": pairing.rule.epsilon,
                        "delta": pairing.rule.delta,
                    },
                    "exact": pairing.exact,
                    "lossy_by_design": pairing.lossy_by_design,
                    "vocab_size": v,
                    "branching": branching,
                    "p_by_depth": [[str(f) for f in r] for r in p_rows],
                    "q_by_depth": [[str(f) for f in r] for r in q_rows],
                    "law": [{"block": list(b), "prob": str(w), "prob_float": float(w)} for b, w in sorted(law.items())],
                    "first_token_law": [str(first.get(i, Fraction(0))) for i in range(v)],
                    "first_token_tv_from_p": str(
                        sum(abs(first.get(i, Fraction(0)) - p_rows[0][i]) for i in range(v)) / 2
                    ),
                    "expected_emitted": str(exp),
                    "expected_emitted_float": float(exp),
                }
            )
    return cases


__all__ += ["generate_block_cases", "generate_traversal_cases", "write_block_vectors"]

BLOCK_FILE_NAME = "block-v1.json"
TRAVERSAL_FILE_NAME = "traversal-v1.json"


def _strs(rows: Iterable[Iterable[Fraction]]) -> list[list[str]]:
    return [[str(f) for f in r] for r in rows]


def _block_case(
    rng: np.random.Generator, idx: int, *, v: int, gamma: int, relation: str, kinds: tuple[str, str]
) -> dict[str, Any]:
    from .block_verification import block_kernel_law, block_weights

    if relation == "near":  # q = p up to a little noise: long blocks, where the two rules differ most
        p_w = [_weights(rng, v, kinds[0]) for _ in range(gamma + 1)]
        q_w = [4 * w + rng.integers(0, 3, v) for w in p_w[:gamma]]
        draft = [int(rng.choice(v, p=w / w.sum())) for w in q_w]
    else:
        p_w, q_w, draft = _case_weights(
            rng, v=v, gamma=gamma, rule="full", relation=relation, p_kind=kinds[0], q_kind=kinds[1]
        )
    p_rows, q_rows = [_row(w) for w in p_w], [_row(w) for w in q_w]
    entries = sorted(block_kernel_law(p_rows, q_rows, draft).items())
    count_law = [Fraction(0)] * (gamma + 1)
    for (k, _), pr in entries:
        count_law[k] += pr
    expected = sum((k + 1) * pr for k, pr in enumerate(count_law))
    chain = kernel_output_law(p_rows, q_rows, draft, RULES["full"])
    chain_expected = sum((k + 1) * pr for (k, _), pr in chain.items())
    return {
        "id": f"{idx:03d}-block-{relation}-V{v}-g{gamma}",
        "rule": "block",
        "vocab_size": v,
        "gamma": gamma,
        "tags": sorted({relation, f"p:{kinds[0]}", f"q:{kinds[1]}"}),
        "p": _strs(p_rows),
        "q": _strs(q_rows),
        "draft_tokens": draft,
        "weights": [str(w) for w in block_weights(p_rows, q_rows, draft)],
        "law": [{"accepted": k, "token": y, "prob": str(pr), "prob_float": float(pr)} for (k, y), pr in entries],
        "accepted_count_law": [str(c) for c in count_law],
        "accepted_count_law_float": [float(c) for c in count_law],
        "expected_emitted": str(expected),
        "expected_emitted_float": float(expected),
        "token_wise_expected_emitted": str(chain_expected),
    }


def generate_block_cases(seed: int = 20261129) -> list[dict[str, Any]]:
    """Block verification (Sun et al. 2025) on fixed drafts: the exact law of (kept drafts, last token).

    ``weights`` are w_0..w_gamma; ``token_wise_expected_emitted`` is the chain rule's on the same call,
    for reference (block verification's advantage holds on average over drafts, not call by call).
    """
    rng = np.random.default_rng(seed + 2)
    vocabs = [2, 3, 4, 5, 8, 16, 32]
    kinds = [("general", "general"), ("one_hot", "dense"), ("near_tie", "near_tie"), ("sparse", "one_hot")]
    cases: list[dict[str, Any]] = []
    for relation in ("independent", "near", "equal", "disjoint", "q_positive_p_zero"):
        for pk, qk in kinds:
            for rep in range(3 if relation in ("independent", "near") else 1):
                i = len(cases)
                v, gamma = vocabs[i % len(vocabs)], 2 + (i + rep) % 5
                cases.append(_block_case(rng, i, v=v, gamma=gamma, relation=relation, kinds=(pk, qk)))
    return cases


def _traversal_case(rng: np.random.Generator, idx: int, v: int, parents: list[int], kind: str) -> dict[str, Any]:
    from .traversal import _path, traversal_kernel_law

    p_rows = [_row(_weights(rng, v, kind if s % 2 else "dense")) for s in range(len(parents) + 1)]
    q_w = [_weights(rng, v, "dense") for _ in range(len(parents) + 1)]
    q_rows = [_row(w) for w in q_w]
    draft: list[int] = []
    for n, par in enumerate(parents):  # children of a slot drawn from its q row, without replacement
        w = q_w[par + 1].astype(np.float64)
        for m in range(n):
            if parents[m] == par:
                w[draft[m]] = 0.0
        draft.append(int(rng.choice(v, p=w / w.sum())))
    law = traversal_kernel_law(p_rows, q_rows, draft, parents)
    entries = sorted(law.items())
    expected = sum((len(_path(parents, n)) + 1) * pr for (n, _), pr in entries)
    return {
        "id": f"{idx:03d}-traversal-V{v}-N{len(parents)}",
        "rule": "traversal",
        "without_replacement": True,
        "vocab_size": v,
        "parents": parents,
        "draft_tokens": draft,
        "p_by_slot": _strs(p_rows),
        "q_by_slot": _strs(q_rows),
        "law": [
            {
                "node": n,
                "path_tokens": [draft[m] for m in _path(parents, n)],
                "token": y,
                "prob": str(pr),
                "prob_float": float(pr),
            }
            for (n, y), pr in entries
        ],
        "expected_emitted": str(expected),
        "expected_emitted_float": float(expected),
    }


def generate_traversal_cases(seed: int = 20261129) -> list[dict[str, Any]]:
    """Traversal verification on fixed trees (parent arrays; slot 0 the root, slot n + 1 after node n)."""
    from .traversal import branching_parents, chain_parents

    rng = np.random.default_rng(seed + 3)
    shapes = [
        chain_parents(3),
        [-1, -1],
        [-1, 0, 0],
        branching_parents([2, 1]),
        [-1, 0, -1, 2, 2],
        branching_parents([2, 2]),
    ]
    cases: list[dict[str, Any]] = []
    for parents in shapes:
        for kind in ("general", "sparse", "near_tie"):
            v = 4 + 2 * (len(cases) % 3)
            cases.append(_traversal_case(rng, len(cases), v, parents, kind))
    return cases


def write_block_vectors(out_dir: str | Path, seed: int = 20261129) -> tuple[Path, Path]:
    """Write ``block-v1.json`` and ``traversal-v1.json`` (the fields are described in each generator)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, cases in (
        (BLOCK_FILE_NAME, generate_block_cases(seed)),
        (TRAVERSAL_FILE_NAME, generate_traversal_cases(seed)),
    ):
        doc = {
            "format_version": FORMAT_VERSION,
            "generator": "specverify.algorithms.conformance",
            "seed": seed,
            "cases": cases,
        }
        (out / name).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        paths.append(out / name)
    return paths[0], paths[1]


def write_vectors(out_dir: str | Path, seed: int = 20261129) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "format_version": FORMAT_VERSION,
        "generator": "specverify.algorithms.conformance",
        "seed": seed,
        "cases": generate_cases(seed),
    }
    path = out / FILE_NAME
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tdoc = {
        "format_version": FORMAT_VERSION,
        "generator": "specverify.algorithms.conformance",
        "seed": seed,
        "cases": generate_tree_cases(seed),
    }
    (out / TREE_FILE_NAME).write_text(json.dumps(tdoc, indent=1, sort_keys=True) + "\n")
    write_block_vectors(out, seed)
    write_spectr_vectors(out, seed)
    return path


def load_vectors(path: str | Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(Path(path).read_text())
    return doc


__all__ += ["generate_spectr_cases", "write_spectr_vectors"]

SPECTR_FILE_NAME = "spectr-v1.json"


def _spectr_rows(rng: np.random.Generator, v: int, relation: str) -> tuple[list[Fraction], list[Fraction]]:
    p_w = _weights(rng, v, "general")
    if relation == "equal":
        q_w = p_w.copy()
    elif relation == "near":  # q = p up to a little noise: rho* near 1, long acceptance runs
        q_w = 4 * p_w + rng.integers(0, 3, v)
    elif relation == "disjoint_part":  # q puts mass where p has none
        q_w = _weights(rng, v, "dense")
        p_w[int(rng.integers(v))] = 0
        if p_w.sum() == 0:
            p_w[0] = 1
    else:
        q_w = _weights(rng, v, "dense")
    return _row(p_w), _row(q_w)


def _spectr_case(rng: np.random.Generator, idx: int, *, v: int, k: int, relation: str, variant: str) -> dict[str, Any]:
    from .spectr import (
        SPECTR_VARIANTS,
        spectr_acceptance,
        spectr_beta,
        spectr_match_probability,
        spectr_residual,
        spectr_token_law,
    )

    rule = SPECTR_VARIANTS[variant]
    p, q = _spectr_rows(rng, v, relation)
    drafts = [int(x) for x in rng.choice(v, size=k, p=np.array([float(f) for f in q]))]
    rho = rule.rho_for(p, q, k)
    res = spectr_residual(p, q, k, rho, single_draft=rule.single_draft_residual)
    res_total = sum(res, Fraction(0))
    token_law = spectr_token_law(p, q, k, rule)
    outcome = sorted(rule.outcome_law(p, q, drafts).items())
    return {
        "id": f"{idx:03d}-{variant}-{relation}-V{v}-k{k}",
        "rule": variant,
        "exact": bool(rule.exact_for),
        "rho_mode": str(rule.rho),
        "vocab_size": v,
        "k": k,
        "tags": [relation],
        "p": [str(f) for f in p],
        "q": [str(f) for f in q],
        "rho": str(rho),
        "rho_float": float(rho),
        "beta": str(spectr_beta(p, q, rho)),
        "residual": [str(f / res_total) for f in res],
        "accept_prob_float": float(spectr_acceptance(p, q, k, rho)),
        "match_prob_float": float(spectr_match_probability(p, q, k, rule)),
        "chain_accept_prob": str(sum((min(a, b) for a, b in zip(p, q)), Fraction(0))),
        "token_law": [str(token_law.get(i, Fraction(0))) for i in range(v)],
        "token_tv_from_p": str(sum((abs(token_law.get(i, Fraction(0)) - p[i]) for i in range(v)), Fraction(0)) / 2),
        "draft_tokens": drafts,
        "outcome_law": [
            {"kind": kind, "value": val, "prob": str(w), "prob_float": float(w)} for (kind, val), w in outcome
        ],
    }


def generate_spectr_cases(seed: int = 20261129) -> list[dict[str, Any]]:
    """SpecTr's k-sequential selection (module :mod:`.spectr`) on one node with k i.i.d. drafts from q.

    ``rho`` is the rho the rule used (rho* to bisection precision, exact as a Fraction); ``residual``
    the normalised residual; ``token_law`` the law of the emitted token over the drafts (p for an
    exact rule: ``token_tv_from_p`` 0); ``draft_tokens`` one draw of the k drafts and
    ``outcome_law`` the law of the node's outcome given them (``accept`` value = the draft's 0-based
    index, ``emit`` value = the residual's token), what a kernel's tests can compare against.
    """
    rng = np.random.default_rng(seed + 4)
    shapes = [(3, 2), (4, 3), (2, 4), (5, 2), (6, 1), (4, 2), (3, 3), (5, 3)]
    cases: list[dict[str, Any]] = []
    for variant in ("spectr", "spectr_rho_k", "spectr_single_draft_residual", "spectr_rho_one"):
        for relation in ("independent", "near", "equal", "disjoint_part"):
            for _ in range(2):
                v, k = shapes[len(cases) % len(shapes)]
                cases.append(_spectr_case(rng, len(cases), v=v, k=k, relation=relation, variant=variant))
    return cases


def write_spectr_vectors(out_dir: str | Path, seed: int = 20261129) -> Path:
    """Write ``spectr-v1.json`` (fields in :func:`generate_spectr_cases`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "format_version": FORMAT_VERSION,
        "generator": "specverify.algorithms.conformance",
        "seed": seed,
        "cases": generate_spectr_cases(seed),
    }
    path = out / SPECTR_FILE_NAME
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path
