"""Training the policy: micro-batching and token log-probs, the RL update (one step of
the paper's data flow), the SFT warm start, and building or loading the model."""
