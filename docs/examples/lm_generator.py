"""A request-aware speculative generator on transformers models, for ``audit_lm_pairs``.

``make(target, draft)`` returns ``generate(prompt, max_new_tokens, seed, settings)``: chain
speculative sampling (gamma 4) that ends a request at its first stop id (``settings.stop_token_ids``,
wherever in a round it is accepted) or at ``max_new_tokens``, and returns each token's logprob under
the target's processed law. Penalties are declined.

    python -c "from specverify.audit import audit_lm_pairs; import lm_generator as g; \\
               print(audit_lm_pairs(g.make).headline())"     # with docs/examples on PYTHONPATH
"""

import math

import numpy as np
import torch

from specverify.dists import probs_from_logits


def _laws(model, ids, k, settings):
    with torch.no_grad():
        rows = model(torch.tensor([ids])).logits[0, -k:].double().numpy()
    return [probs_from_logits(r, settings) for r in rows]


def make(target, draft, gamma=4):
    def generate(prompt, max_new_tokens, seed, settings):
        if settings.uses_history:
            raise NotImplementedError("no repetition, presence or frequency penalty here")
        rng = np.random.default_rng(seed)
        ids, logprobs = [], []
        while len(ids) < max_new_tokens:
            ctx, drafts, qs = list(prompt) + ids, [], []
            for _ in range(gamma):
                q = _laws(draft, ctx + drafts, 1, settings)[0]
                drafts.append(int(rng.choice(len(q), p=q)))
                qs.append(q)
            ps = _laws(target, ctx + drafts, gamma + 1, settings)
            new = None
            for j, x in enumerate(drafts):
                if rng.random() * qs[j][x] >= ps[j][x]:  # reject: u >= p / q
                    r = np.maximum(ps[j] - qs[j], 0.0)
                    new = drafts[:j] + [int(rng.choice(len(r), p=r / r.sum()))]
                    break
            if new is None:
                new = drafts + [int(rng.choice(len(ps[-1]), p=ps[-1]))]
            for j, t in enumerate(new):
                ids.append(t)
                logprobs.append(math.log(ps[j][t]))  # target row j: drafts[:j] were accepted
                if t in settings.stop_token_ids or len(ids) == max_new_tokens:
                    return {"ids": ids, "logprobs": logprobs}
        return {"ids": ids, "logprobs": logprobs}

    return generate
