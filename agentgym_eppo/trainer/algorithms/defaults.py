"""Every default of the RL algorithm, in one place, each with where it comes from.

The config (:mod:`agentgym_eppo.trainer.config`), the update's settings
(:class:`~agentgym_eppo.trainer.training.update.UpdateSettings`), the loss, the pacer and
the clip policies all read their defaults here, so a default cannot drift between them.
Sources: "A.2" is the EPPO paper's appendix A.2 (hyperparameters); where the paper says
nothing, the peer named beside the value (verl's ``ppo_trainer.yaml``, AgentRL, or the
baseline's own paper). ``docs/trainer.md`` ("Defaults and their sources") has the table.
"""

from __future__ import annotations

# --- advantages and loss -------------------------------------------------------------
ADVANTAGE = "grpo"  # A.2: the main experiments are GRPO-based (RLOO in appendix B)
TASK_ADV_NORM = True  # AgentRL's task advantage normalization, paper eq. 4
TASK_NORM_OVER = "all"  # eq. 4's statistics over every episode of the task, as the paper
TASK_NORM_OVER_CHOICES = ("all", "mixed_groups")  # advantages.normalize_by_task
HELD_OUT_AVERAGE_CHOICES = ("tokens", "tasks")  # training.sft.HELD_OUT_AVERAGES
GRPO_EPS = 1e-6  # eq. 2's epsilon (verl's GRPO uses the same)
TASK_NORM_EPS = 1e-6  # eq. 4's epsilon (AgentRL)
DUAL_CLIP_C = 3.0  # A.2: dual clip c = 3 (verl's clip_ratio_c)
KL_COEF = 1e-4  # A.2
ENTROPY_COEF = 0.0  # A.2

# --- the PPO loop over one step's rollouts ---------------------------------------------
# A.2 does not say how a step's batch is split. verl's defaults (train_batch_size 1024,
# ppo_mini_batch_size 256, ppo_epochs 1) give four optimizer steps per batch: the first
# is on-policy (every ratio 1), the next three are off-policy, so the clip range acts.
# With one mini-batch and one epoch no ratio ever leaves 1 and every clip policy is GRPO.
MINI_BATCHES = 4  # verl: 1024 / 256
PPO_EPOCHS = 1  # verl: actor.ppo_epochs
MICRO_BATCH_TOKENS = 16384  # A.2: "capped at 16,384 tokens per micro-batch"
MAX_GRAD_NORM = 1.0  # verl: actor.grad_clip
LR = 1e-5  # A.2
WEIGHT_DECAY = 0.0  # A.2
OLD_LOGPROBS = "rescore"  # verl: the old-log-prob pass before the update ("decoupled" mode)
OLD_LOGPROBS_SOURCES = ("rollout", "rescore")  # bypass, decoupled (update.UpdateSettings)
LOGPROB_CHUNK = 1024  # ours: positions per chunk of the vocabulary-wide log-softmax (memory only)

# --- sampling and episodes --------------------------------------------------------------
TEMPERATURE = 0.8  # A.2
MAX_TOKENS_PER_TURN = 1024  # A.2
MAX_CONTEXT = 8192  # A.2

# --- clip ranges ---------------------------------------------------------------------
CLIP_POLICY = "eppo"  # the paper's method
CLIP_EPS = 0.2  # A.2: base clip range (GRPO's fixed range)
EPPO_EPS0 = 0.2  # A.2: epsilon_base
EPPO_ALPHA = 0.4  # A.2: pacing strength
EPPO_BETA = 0.95  # A.2: entropy EMA decay
EPPO_EPS_MIN = 0.15  # A.2
EPPO_EPS_MAX = 0.3  # A.2
Z_SCORE_EPS = 1e-8  # eq. 8's epsilon (ours: the paper gives none)
DAPO_EPS_LOW = 0.2  # DAPO, arXiv 2503.14476
DAPO_EPS_HIGH = 0.28  # DAPO, arXiv 2503.14476
DCPO_EPS_LOW = 0.16  # DCPO, arXiv 2509.02333
DCPO_EPS_HIGH = 0.2  # DCPO, arXiv 2509.02333
DCPO_R_MAX = 10.0  # DCPO, arXiv 2509.02333
BAPO_C_LOW = 0.6  # BAPO, arXiv 2510.18927, algorithm 1
BAPO_C_HIGH = 1.2  # BAPO
BAPO_RHO0 = 0.4  # BAPO
BAPO_STEP_HIGH = 0.05  # BAPO
BAPO_STEP_LOW = 0.02  # BAPO
BAPO_MAX_HIGH = 3.0  # BAPO
BAPO_MAX_LOW = 0.9  # BAPO
