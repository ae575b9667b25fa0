#!/usr/bin/env bash
# Install each real engine in its own venv (.engines/<name>/venv) and run its audit matrix;
# results (one JSON per configuration and a README table) go to results/engines/, raw engine
# outputs for the tests to tests/data/engines/. Finished configurations are not run again
# (delete their JSON to redo one).
#   scripts/engines/run.sh              # vLLM then llama.cpp (about 1-2 hours on 2 cores)
#   scripts/engines/run.sh vllm         # one engine
set -euo pipefail
cd "$(dirname "$0")/../.."
for e in ${*:-vllm llama}; do
    scripts/engines/install.sh "$e"
    py=.engines/$e/venv/bin/python
    case "$e" in
        vllm)
            "$py" scripts/engines/matrix.py --engine vllm --out results/engines
            # The rejection kernels alone, in specverify's kernel shape (localises an engine FAIL).
            mkdir -p results/engines/kernels
            for k in cpu_rejection_kernel:--full-rule cpu_rejection_kernel_one_hot:--one-hot; do
                fn=${k%%:*}; flag=${k##*:}
                [ -f "results/engines/kernels/$fn.json" ] && continue
                .engines/vllm/venv/bin/specverify audit --kernel "specverify.engines.vllm_kernels:$fn" "$flag" \
                    --json "results/engines/kernels/$fn.json" || true
            done
            "$py" scripts/engines/matrix.py --engine vllm --out results/engines --only ;;
        llama)
            "$py" scripts/engines/matrix.py --engine llama.cpp --out results/engines ;;
        *) echo "unknown engine '$e'; use vllm or llama" >&2; exit 2 ;;
    esac
done
