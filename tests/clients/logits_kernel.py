"""A kernel in another process that takes raw logits plus the settings (JSON lines, --cmd ...
--logits). ``--bug draft-temperature`` applies the temperature to the draft only (the target keeps
temperature 1), so its output follows the wrong law."""

import json
import sys

import numpy as np

from specverify import SamplingSettings
from specverify.algorithms import verify_chain_batch
from specverify.dists import probs_from_logits

BUG = "--bug" in sys.argv

for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "hello":
        print(json.dumps({"name": "logits-kernel" + ("-buggy" if BUG else "")}), flush=True)
        continue
    s = SamplingSettings(**req["settings"])
    t = SamplingSettings(**{**req["settings"], "temperature": 1.0}) if BUG and not s.is_greedy else s
    Q = probs_from_logits(np.array(req["draft_logits"]), s)
    P = probs_from_logits(np.array(req["target_logits"]), t)
    X = np.array(req["draft_tokens"], dtype=np.int64)
    rng = np.random.default_rng(req["seed"])
    b, g = X.shape
    out = verify_chain_batch(X, Q, P, rng.random((b, g)), rng.random(b)).tokens
    print(json.dumps({"tokens": np.asarray(out).tolist()}), flush=True)
