"""MultiTaskVectorEnv and its worker back-ends."""
