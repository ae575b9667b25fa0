"""llama-cpp-python: a request without a seed is sampled with a seed derived from the last seed
set, so the seed one client sends decides the next unseeded request of any client.

    python repro.py            # llama-cpp-python and gguf only; writes tiny.gguf beside it

Four requests with the same prompt, in turn: seed 1234, no seed, seed 1234, no seed. Expected: the
two unseeded requests are independent draws (equal only by chance, here about 1e-20). Actual on
0.3.36: they are identical, because ``_create_completion`` seeds an unseeded request with
``random.Random(self._seed).randint(0, 2**32)`` and ``self._seed`` is the previous request's seed.
The same happens through ``python -m llama_cpp.server`` (it calls ``create_completion``).
"""

import math
from pathlib import Path

import llama_cpp
from llama_cpp import Llama

from tiny_gguf import write

HERE = Path(__file__).resolve().parent
model = HERE / "tiny.gguf"
if not model.exists():
    write(str(model))
llm = Llama(model_path=str(model), n_ctx=256, logits_all=True, verbose=False)
prompt = [12, 34, 56]


def complete(seed):
    r = llm.create_completion(prompt, max_tokens=24, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                              seed=seed, logprobs=1)  # fmt: skip
    c = r["choices"][0]
    return c["text"], sum(c["logprobs"]["token_logprobs"])


print(f"llama-cpp-python {llama_cpp.__version__}")
outs = [complete(s) for s in (1234, None, 1234, None)]
for s, (text, _) in zip((1234, None, 1234, None), outs):
    print(f"seed={s!s:>5}: {text}")
same = outs[1][0] == outs[3][0]
print(f"the two unseeded requests are {'IDENTICAL' if same else 'different'}; "
      f"one of them has probability {math.exp(outs[1][1]):.2g} under the model")  # fmt: skip
