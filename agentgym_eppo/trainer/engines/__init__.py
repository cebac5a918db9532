"""Rollout engines beyond the in-process HF one (:mod:`agentgym_eppo.trainer.engine`).

:mod:`.sglang_engine` talks to SGLang (``gpu`` extra) in-process or over HTTP; SGLang
itself is imported only when an in-process engine is built.
"""
