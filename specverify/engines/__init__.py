"""Adapters for real inference engines (vLLM, llama.cpp); see docs/engines.md."""
