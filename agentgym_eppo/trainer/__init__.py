"""GRPO/RLOO with the EPPO pacer: advantages, losses, clip policies, rollouts, CLI."""
