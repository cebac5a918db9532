"""Training the policy: micro-batching and token log-probs, the RL update (one step of
the paper's data flow), the SFT warm start, the checkpoints that resume a run exactly,
and building or loading the model."""
