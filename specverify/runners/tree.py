"""Tree verification in one target pass, and the drafters that build trees.

One pass: the prefix and the flattened tree go through the target together, with an additive
float attention mask (each tree node sees the prefix, its ancestors and itself) and explicit
position ids (prefix length + depth). ``tree_logits`` returns the row after the prefix (the root's
law) and the row after every node; ``chain_logits_for_tree`` computes the same rows with one
separate chain pass per node, for the check. :class:`TreeKVCache` gives ``tree_logits``' rows from a
KV cache of the context: a pass feeds only the tokens committed since the last one, then the nodes,
which are rolled back. The runner verifies through one, and the drafters that run a model (the draft
model's levels, Jacobi iterations, the heads' hidden state) draft through their own.

Drafters return a tree: nodes with (token, parent, depth), and for every expanded node the draft
row it drew its children from and the ordered candidate list (the verifier needs both):

* :class:`ModelTreeDrafter`: a draft model, k candidates per node by a mechanism (iid, without
  replacement, top-k);
* :class:`PromptLookupDrafter`: copy the continuation of the last earlier occurrence of the
  context's final n-gram (a chain; deterministic candidates);
* :class:`LookaheadDrafter`: Jacobi iterations of the target with an n-gram pool (lookahead);
* :class:`MedusaHeads`: linear heads on the target's last hidden state, head j predicting the
  token j + 2 steps ahead; trained in seconds on the target's own samples; top-k per head;
* :class:`EagleHead`: one light layer predicting the target's next feature from the current
  feature and the sampled next token, then the target's LM head (EAGLE); trained likewise.

``tree_speculative_generate`` walks the tree with a node rule (:mod:`..algorithms.multi_draft`),
and records, per round, the exact expected number of emitted tokens for the tree actually used
(from the node laws), to compare with what was emitted.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt
import torch

from ..algorithms.multi_draft import NodeRule, draw_candidates, node_outcome_law, verify_node_procedural
from ..dists import SamplingSettings
from ..lm.transformers_lm import CausalLM, KVSession

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = [
    "Tree",
    "TreeDrafter",
    "tree_logits",
    "TreeKVCache",
    "chain_logits_for_tree",
    "ModelTreeDrafter",
    "PromptLookupDrafter",
    "LookaheadDrafter",
    "MedusaHeads",
    "EagleHead",
    "tree_speculative_generate",
    "TreeRunResult",
    "train_medusa_heads",
    "train_eagle_head",
]


@dataclasses.dataclass
class Tree:
    tokens: list[int] = dataclasses.field(default_factory=list)
    parents: list[int] = dataclasses.field(default_factory=list)  # -1: child of the root
    # node index (-1 = root) -> (draft row, ordered candidate node indices)
    children: dict[int, tuple[npt.NDArray[np.float64], list[int]]] = dataclasses.field(default_factory=dict)

    def depth(self, i: int) -> int:
        d = 0
        while self.parents[i] >= 0:
            i = self.parents[i]
            d += 1
        return d

    def path(self, i: int) -> list[int]:
        out: list[int] = []
        while i >= 0:
            out.append(self.tokens[i])
            i = self.parents[i]
        return out[::-1]

    def add_children(self, node: int, q_row: npt.NDArray[np.float64], cands: Sequence[int]) -> list[int]:
        idx: list[int] = []
        for c in cands:
            self.tokens.append(int(c))
            self.parents.append(node)
            idx.append(len(self.tokens) - 1)
        self.children[node] = (q_row, idx)
        return idx


def _tree_allowed(cached: int, pending: int, tree: Tree) -> torch.Tensor:
    """Attention of a pass over ``pending`` new context tokens then the tree's nodes, after ``cached``
    positions: [pending + n, cached + pending + n] bool. Context tokens are causal; a node sees the
    whole context, its ancestors and itself."""
    n = len(tree.tokens)
    c = cached + pending
    allowed = torch.zeros(pending + n, c + n, dtype=torch.bool)
    allowed[:pending, :c] = torch.tril(torch.ones(pending, c, dtype=torch.bool), diagonal=cached)
    allowed[pending:, :c] = True
    for i in range(n):
        j = i
        while j >= 0:
            allowed[pending + i, c + j] = True
            j = tree.parents[j]
    return allowed


@torch.no_grad()
def tree_logits(model: PreTrainedModel, prefix: list[int], tree: Tree) -> torch.Tensor:
    """[1 + n_nodes, V]: row 0 after the prefix, row 1 + i after node i; one uncached pass."""
    dev = next(model.parameters()).device
    P = len(prefix)
    dtype = next(model.parameters()).dtype
    allowed = _tree_allowed(0, P, tree).to(dev)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=dev).masked_fill(~allowed, torch.finfo(dtype).min)[None, None]
    pos = list(range(P)) + [P + tree.depth(i) for i in range(len(tree.tokens))]
    ids = torch.tensor([list(prefix) + tree.tokens], device=dev)
    out = model(
        input_ids=ids, attention_mask=mask, position_ids=torch.tensor([pos], device=dev), use_cache=False
    ).logits[0]
    return torch.cat([out[P - 1 : P], out[P:]])


class TreeKVCache:
    """The rows of :func:`tree_logits` from a KV cache of the context: a pass feeds only the context
    tokens not yet cached, then the tree's nodes, and keeps the context (the nodes are rolled back).
    A context that does not extend the cached one starts a fresh cache: a new request does, unless
    its prompt continues the last request's whole context (then the cached states are reused, equal
    to fresh ones up to float rounding)."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self._session = KVSession(model)
        self._ids: list[int] = []

    def rows(self, prefix: list[int], tree: Tree, *, hidden: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits [1 + n_nodes, V], last hidden states [1 + n_nodes, H] or None), as :func:`tree_logits`."""
        prefix = list(prefix)
        if self._ids != prefix[: len(self._ids)] or len(self._ids) >= len(prefix):
            self._session, self._ids = KVSession(self.model), []  # a new request (or nothing new to feed)
        pending = prefix[len(self._ids) :]
        L, P, n = len(self._ids), len(prefix), len(tree.tokens)
        pos = list(range(L, P)) + [P + tree.depth(i) for i in range(n)]
        logits, states = self._session.extend_masked(
            pending + tree.tokens, pos, _tree_allowed(L, len(pending), tree), hidden=hidden
        )
        # drop the nodes, and the last context token too: the next pass needs its row (the root's law)
        self._session.rollback(n + 1)
        self._ids = prefix[:-1]
        m = len(pending)
        return logits[m - 1 :], (states[m - 1 :] if states is not None else None)


@torch.no_grad()
def chain_logits_for_tree(model: PreTrainedModel, prefix: list[int], tree: Tree) -> torch.Tensor:
    lm = CausalLM(model)
    rows = [lm.logits(list(prefix))[-1]]
    for i in range(len(tree.tokens)):
        rows.append(lm.logits(list(prefix) + tree.path(i))[-1])
    return torch.stack(rows)


def _histories(prefix: list[int], tree: Tree, nodes: list[int]) -> Callable[[int], list[int]]:
    """Row i's history for the settings' penalties: the prefix, then the path to ``nodes[i]`` (-1: the root)."""
    return lambda i: list(prefix) + (tree.path(nodes[i]) if nodes[i] >= 0 else [])


class TreeDrafter(Protocol):
    """What :func:`tree_speculative_generate` drafts with: ``propose(prefix, settings, rng) -> Tree``."""

    def propose(self, prefix: list[int], settings: SamplingSettings, rng: np.random.Generator) -> Tree: ...


class ModelTreeDrafter:
    def __init__(
        self, draft_model: PreTrainedModel, branching: Sequence[int] = (2, 2), mechanism: str = "top_k"
    ) -> None:
        self.lm = CausalLM(draft_model)
        self.branching, self.mechanism = tuple(branching), mechanism
        self._kv = TreeKVCache(draft_model)

    def propose(self, prefix: list[int], settings: SamplingSettings, rng: np.random.Generator) -> Tree:
        tree = Tree()
        frontier = [-1]
        for k in self.branching:
            rows, _ = self._kv.rows(prefix, tree)  # one draft pass per level: the tree so far
            at = [node + 1 for node in frontier]
            qs = self.lm.process_rows(rows[at], settings, _histories(prefix, tree, frontier), len(prefix))
            nxt: list[int] = []
            for node, q_t in zip(frontier, qs):
                q = q_t.cpu().numpy()
                cands = draw_candidates(q, k, self.mechanism, rng)
                nxt += tree.add_children(node, q, cands)
            frontier = nxt
        return tree


class PromptLookupDrafter:
    """Deterministic chain from the last earlier match of the final ``ngram`` tokens."""

    def __init__(self, ngram: int = 2, num: int = 4) -> None:
        self.ngram, self.num = ngram, num

    def propose(self, prefix: list[int], settings: SamplingSettings, rng: np.random.Generator) -> Tree:
        tree = Tree()
        ctx = list(prefix)
        key = ctx[-self.ngram :]
        cont: list[int] = []
        for s in range(len(ctx) - self.ngram - 1, -1, -1):
            if ctx[s : s + self.ngram] == key:
                cont = ctx[s + self.ngram : s + self.ngram + self.num]
                break
        node = -1
        for t in cont:
            q = np.zeros(1)  # deterministic proposal: q is one-hot on t (verify with the one-hot rule)
            node = tree.add_children(node, q, [t])[0]
        return tree


class LookaheadDrafter:
    """Lookahead decoding's drafter (Fu et al. 2024), unfused: a window of guesses is refined by
    Jacobi iterations of the target (greedy, one pass per call), every n-gram the trajectory forms
    enters a pool keyed by its first token, and the pool's n-grams that start with the context's
    last token become the candidates (distinct branches under the root, then chains). Candidates
    depend only on past outputs, so the one-hot rule verifies them exactly. (The original fuses the
    Jacobi step into the verification pass; that is a speed matter, not a correctness one.)"""

    def __init__(
        self, target: PreTrainedModel, *, window: int = 4, ngram: int = 3, max_candidates: int = 2, seed: int = 0
    ) -> None:
        self.lm = CausalLM(target)
        self._kv = TreeKVCache(target)
        self.window, self.ngram, self.k = window, ngram, max_candidates
        self.pool: dict[int, list[tuple[int, ...]]] = {}
        self.guess: list[int] | None = None
        self.rng = np.random.default_rng(seed)

    def _jacobi(self, ctx: list[int]) -> None:
        v = self.lm.vocab_size
        if self.guess is None or len(self.guess) != self.window:
            self.guess = self.rng.integers(0, v, self.window).tolist()
        guess = Tree()
        node = -1
        for t in self.guess:  # the window as a chain: rows after ctx and after each guess
            node = guess.add_children(node, np.zeros(1), [t])[0]
        lg, _ = self._kv.rows(list(ctx), guess)
        new: list[int] = torch.argmax(lg[: self.window], -1).tolist()
        traj = [ctx[-1]] + new
        for s in range(len(traj) - self.ngram + 1):
            g = tuple(traj[s : s + self.ngram])
            lst = self.pool.setdefault(g[0], [])
            if g not in lst:
                lst.insert(0, g)
                del lst[8:]
        self.guess = new[1:] + [new[-1]]

    def propose(self, prefix: list[int], settings: SamplingSettings, rng: np.random.Generator) -> Tree:
        self._jacobi(list(prefix))
        tree = Tree()
        grams = [g for g in self.pool.get(prefix[-1], []) if len(g) > 1][: self.k]
        root_cands = list(dict.fromkeys(g[1] for g in grams))  # distinct first tokens, pool order
        if root_cands:
            idx = tree.add_children(-1, np.zeros(1), root_cands)
            for node, tok in zip(idx, root_cands):
                chain = next(list(g[2:]) for g in grams if g[1] == tok)
                for t in chain:
                    node = tree.add_children(node, np.zeros(1), [t])[0]
        return tree


class MedusaHeads(torch.nn.Module):
    """Head j maps the target's last hidden state h_t to logits for token t + 2 + j (head 0 is the
    target's own next-token prediction, as in Medusa, so heads start one step further)."""

    def __init__(self, target: PreTrainedModel, n_heads: int = 2, topk: Sequence[int] = (2, 2)) -> None:
        super().__init__()
        h = target.config.hidden_size
        v = target.get_output_embeddings().weight.shape[0]
        self.target, self.topk = target, tuple(topk)
        self._kv = TreeKVCache(target)
        self.heads = torch.nn.ModuleList(
            [torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.SiLU(), torch.nn.Linear(h, v)) for _ in range(n_heads)]
        )

    @torch.no_grad()
    def propose(self, prefix: list[int], settings: SamplingSettings, rng: np.random.Generator) -> Tree:
        logits, states = self._kv.rows(prefix, Tree(), hidden=True)
        assert states is not None
        h = states[-1]
        rows = [torch.softmax(logits[-1].double(), -1).numpy()] + [
            torch.softmax(hd(h).double(), -1).numpy() for hd in self.heads
        ]
        # Medusa's tree: top-k of the next-token row, then top-k of each head, as a Cartesian tree.
        tree = Tree()
        frontier = [-1]
        for d, k in enumerate(self.topk[: len(rows)]):
            nxt: list[int] = []
            for node in frontier:
                cands = draw_candidates(rows[d], k, "top_k", rng)
                nxt += tree.add_children(node, rows[d], cands)
            frontier = nxt
        return tree


class EagleHead(torch.nn.Module):
    """f(h_t, emb(x_{t+1})) -> h_{t+1}; draft row = softmax(lm_head(f)). Autoregressive at the
    feature level, expanded into a top-k tree."""

    def __init__(self, target: PreTrainedModel, topk: Sequence[int] = (2, 2)) -> None:
        super().__init__()
        h = target.config.hidden_size
        self.target, self.topk = target, tuple(topk)
        self._kv = TreeKVCache(target)
        self.fc = torch.nn.Linear(2 * h, h)
        self.mlp = torch.nn.Sequential(torch.nn.SiLU(), torch.nn.Linear(h, h))

    def step(self, h: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        e = self.target.get_input_embeddings()(tok)
        z = self.fc(torch.cat([h, e], -1))
        out: torch.Tensor = z + self.mlp(z)
        return out

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.target.get_output_embeddings()(
            self.target.base_model.norm(h) if hasattr(self.target.base_model, "norm") else h
        )
        return out

    @torch.no_grad()
    def propose(self, prefix: list[int], settings: SamplingSettings, rng: np.random.Generator) -> Tree:
        logits, states = self._kv.rows(prefix, Tree(), hidden=True)
        assert states is not None
        h0 = states[-1]
        p0 = torch.softmax(logits[-1].double(), -1).numpy()
        tree = Tree()
        feats = {-1: h0}
        frontier = [-1]
        rows = {-1: p0}
        for _d, k in enumerate(self.topk):
            nxt: list[int] = []
            for node in frontier:
                cands = draw_candidates(rows[node], k, "top_k", rng)
                for idx in tree.add_children(node, rows[node], cands):
                    f = self.step(feats[node], torch.tensor(tree.tokens[idx]))
                    feats[idx] = f
                    rows[idx] = torch.softmax(self.logits(f).double(), -1).numpy()
                    nxt.append(idx)
            frontier = nxt
        return tree


def _target_samples(
    target: PreTrainedModel, n_seq: int = 64, length: int = 32, vocab: int | None = None, seed: int = 0
) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    v = vocab or target.get_output_embeddings().weight.shape[0]
    ids = torch.randint(0, v, (n_seq, 4), generator=g)
    with torch.no_grad():
        for _ in range(length):
            logits = target(input_ids=ids, use_cache=False).logits[:, -1]
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
            ids = torch.cat([ids, nxt], 1)
    return ids


def train_medusa_heads(
    target: PreTrainedModel, *, n_heads: int = 2, steps: int = 150, seed: int = 0, topk: Sequence[int] = (2, 2)
) -> MedusaHeads:
    """A few seconds of training on the target's own samples (cross-entropy on future tokens)."""
    torch.manual_seed(seed)
    heads = MedusaHeads(target, n_heads, topk)
    ids = _target_samples(target, seed=seed)
    with torch.no_grad():
        h = target(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states[-1]
    opt = torch.optim.AdamW(heads.heads.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = torch.zeros(())
        for j, hd in enumerate(heads.heads):
            shift = j + 2
            loss = (
                loss
                + torch.nn.functional.cross_entropy(
                    # each head is a Sequential, but a ModuleList iterates as plain Modules
                    hd(h[:, :-shift]).reshape(-1, hd[-1].out_features),  # type: ignore[index]
                    ids[:, shift:].reshape(-1),
                )
            )
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward is unannotated
        opt.step()
    return heads.eval()


def train_eagle_head(
    target: PreTrainedModel, *, steps: int = 150, seed: int = 0, topk: Sequence[int] = (2, 2)
) -> EagleHead:
    """Feature regression plus token cross-entropy on the target's own samples (EAGLE's losses)."""
    torch.manual_seed(seed)
    head = EagleHead(target, topk)
    ids = _target_samples(target, seed=seed)
    with torch.no_grad():
        out = target(input_ids=ids, output_hidden_states=True, use_cache=False)
        h = out.hidden_states[-1]
    params = list(head.fc.parameters()) + list(head.mlp.parameters())
    opt = torch.optim.AdamW(params, lr=3e-3)
    for _ in range(steps):
        pred = head.step(h[:, :-1], ids[:, 1:])
        reg = torch.nn.functional.smooth_l1_loss(pred, h[:, 1:])
        ce = torch.nn.functional.cross_entropy(
            head.logits(pred[:, :-1]).reshape(-1, out.logits.shape[-1]), ids[:, 2:].reshape(-1)
        )
        loss = reg + 0.1 * ce
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward is unannotated
        opt.step()
    return head.eval()


@dataclasses.dataclass
class TreeRunResult:
    tokens: list[int]
    emitted_per_round: list[int]
    target_passes: int
    seconds: float
    rule: NodeRule
    #: per round, the tree drafted and its node laws [1 + n_nodes, V] (row 0: the root's)
    rounds: list[tuple[Tree, npt.NDArray[np.float64]]] = dataclasses.field(repr=False)

    @functools.cached_property
    def _moments(self) -> list[tuple[float, float]]:
        # computed when first read: the walk over each tree's outcome laws took 6-8% of a top-k
        # tree's generation (py-spy), and an audit reads only the tokens
        return [_expected_len(tree, probs, self.rule) for tree, probs in self.rounds]

    @property
    def expected_per_round(self) -> list[float]:
        """Per round, the exact expected number of emitted tokens for the tree actually drafted."""
        return [e for e, _ in self._moments]

    @property
    def var_per_round(self) -> list[float]:
        return [e2 - e * e for e, e2 in self._moments]


def _expected_len(tree: Tree, probs: npt.NDArray[np.float64], rule: NodeRule, node: int = -1) -> tuple[float, float]:
    """(E[emitted], E[emitted^2]) for the walk from ``node`` given the drafted tree (exact)."""
    p = probs[node + 1]
    if node not in tree.children:
        return 1.0, 1.0  # a leaf (or the bonus): one token from p
    q, kids = tree.children[node]
    cands = [tree.tokens[i] for i in kids]
    e, e2 = 0.0, 0.0
    law = node_outcome_law(list(map(float, p)), list(map(float, q)) if len(q) == len(p) else None, cands, rule)
    for (kind, val), w in law.items():
        if kind == "accept":
            a, a2 = _expected_len(tree, probs, rule, kids[val])
            e += w * (1 + a)
            e2 += w * (1 + 2 * a + a2)
        else:
            e += w
            e2 += w
    return e, e2


def tree_speculative_generate(
    target: PreTrainedModel,
    drafter: TreeDrafter,
    prompt: list[int],
    max_new_tokens: int,
    settings: SamplingSettings,
    rng: np.random.Generator,
    rule: NodeRule,
) -> TreeRunResult:
    """Draft a tree, verify it in one target pass, walk it with ``rule``; repeat. The request ends at
    ``max_new_tokens`` or at its first stop id (``settings.stop_token_ids``), wherever in a block it
    is accepted (until 2026-12-07 the runner ignored stop ids: an audit at defaults FAILed its stop
    unit)."""
    lm = CausalLM(target)
    kv = TreeKVCache(target)
    t0 = time.perf_counter()
    out: list[int] = []
    emitted: list[int] = []
    rounds: list[tuple[Tree, npt.NDArray[np.float64]]] = []
    passes = 0
    n = len(prompt)
    while len(out) < max_new_tokens:
        ctx = list(prompt) + out
        tree = drafter.propose(ctx, settings, rng)
        logits, _ = kv.rows(ctx, tree)
        passes += 1
        # [1 + n_nodes, V]: the root's law, then each node's (penalties see the node's own path)
        nodes = list(range(-1, len(tree.tokens)))
        probs = lm.process_rows(logits, settings, _histories(ctx, tree, nodes), n).cpu().numpy()
        rounds.append((tree, probs))
        node = -1
        block: list[int] = []
        while True:
            p = probs[node + 1]
            if node not in tree.children:
                block.append(int(rng.choice(len(p), p=p / p.sum())))
                break
            q, kids = tree.children[node]
            cands = [tree.tokens[i] for i in kids]
            kind, val = verify_node_procedural(p, q if len(q) == len(p) else np.zeros_like(p), cands, rule, rng)
            if kind == "accept":
                node = kids[val]
                block.append(tree.tokens[node])
            else:
                block.append(int(val))
                break
        emitted.append(len(block))
        out.extend(block)
        if (stop := settings.stop_at(block)) is not None:  # a stop accepted mid-block ends the request there
            del out[len(out) - len(block) + stop + 1 :]
            break
    return TreeRunResult(out[:max_new_tokens], emitted, passes, time.perf_counter() - t0, rule, rounds)
