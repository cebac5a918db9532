"""Gymnasium wrappers and adapters for third-party RL libraries."""
