"""Adapters that let third-party RL libraries train on these environments.

One module per library, each importing its library, so that none of them is needed
to import the package: ``adapters.trl`` (TRL ``GRPOTrainer``'s ``environment_factory``),
``adapters.verl`` (a verl agent loop, and ``BaseTool``), ``adapters.skyrl`` (SkyRL-gym
``BaseTextEnv``), ``adapters.openrlhf`` (OpenRLHF's agent instance; the file is an ``--agent_func_path``),
``adapters.verifiers`` (a ``verifiers`` v1 taskset, env and harness that ``vf-eval`` finds
by name; ``docs/verifiers.md``).
EPPO's per-task clip inside those trainers: ``adapters.trl_eppo`` (``EPPOGRPOTrainer``) and
``adapters.verl_eppo`` (verl's ``eppo`` policy loss, the per-step pacing, and
``EPPORayPPOTrainer``, verl's ``RayPPOTrainer`` that paces and checkpoints the pacer).
They build on :mod:`agentgym_eppo.wrappers` (the episode session, chat and formats);
``docs/vector.md`` shows each one in use.
"""
