"""llama-cpp-python: ``repeat_penalty`` never sees the prompt in ``Llama.generate``.

    python llama_cpp_python_penalty_repro.py MODEL.gguf

Greedy decoding (``temp=0``) with a large repeat penalty must avoid the prompt's tokens when the
penalty counts the prompt, as transformers, vLLM and llama.cpp's server do. The script finds
prompts whose greedy next token occurs in the prompt, and compares the token ``Llama.generate``
picks with the argmax of the logits penalised over the prompt and over nothing.
"""

import sys

import numpy as np
from llama_cpp import Llama

PENALTY = 5.0
llm = Llama(model_path=sys.argv[1], n_ctx=256, logits_all=True, verbose=False)
rng = np.random.default_rng(0)
shown = 0
for _ in range(200):
    motif = [int(t) for t in rng.integers(3, llm.n_vocab(), size=4)]
    prompt = motif * 4
    llm.reset()
    llm.eval(prompt)
    logits = np.array(llm.scores[len(prompt) - 1], dtype=np.float64)
    plain = int(np.argmax(logits))
    if plain not in prompt:
        continue
    seen = np.zeros(len(logits), dtype=bool)
    seen[prompt] = True
    penalised = np.where(seen, np.where(logits < 0, logits * PENALTY, logits / PENALTY), logits)
    got = next(iter(llm.generate(prompt, temp=0.0, top_k=1, repeat_penalty=PENALTY, reset=True)))
    print(
        f"prompt {motif} x 4: generate -> {got}; argmax of logits {plain}; "
        f"argmax with the prompt penalised {int(np.argmax(penalised))}"
    )
    shown += 1
    if shown == 3:
        break
