"""One sub-package per task; :mod:`agentgym_eppo.registration` registers each."""
