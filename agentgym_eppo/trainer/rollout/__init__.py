"""Rollouts: the engine interface and its engines (in-process HF, SGLang, stale mix), the
episode as a token sequence (chat template pieces), the multi-turn rollout loop, the
evaluation of a local policy on a held-out split, and playing the tasks through an
OpenAI-compatible endpoint.

Import the modules themselves (``rollout.hf``, ``rollout.episodes``...): this package
imports nothing, so that reading the interface does not load transformers.
"""
