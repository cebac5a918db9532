"""``agentgym-eppo``: train, eval, diagnose, compare.

agentgym-eppo train --config configs/demo-cpu.yaml [key=value ...]
agentgym-eppo pretrain --config configs/tiny-base.yaml [key=value ...]
agentgym-eppo eval --checkpoint RUN_DIR/checkpoints/sft --tasks db kg [--split dev]
agentgym-eppo eval --endpoint http://127.0.0.1:30000/v1 --model NAME --tasks os db
agentgym-eppo diagnose RUN_DIR
agentgym-eppo compare configs/compare.yaml
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _train(args: argparse.Namespace) -> int:
    from .config import load_config
    from .run import run_training

    config = load_config(args.config, args.overrides)
    run_training(config)
    return 0


def _pretrain(args: argparse.Namespace) -> int:
    from .training.pretrain import load_pretrain_config, pretrain

    pretrain(load_pretrain_config(args.config, args.overrides))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .evaluation import evaluate_policy
    from .rollout.openai_endpoint import evaluate_endpoint

    if args.endpoint:
        if not args.model:
            raise SystemExit("eval --endpoint needs --model (the served model's name)")
        result = evaluate_endpoint(
            args.endpoint,
            args.model,
            args.tasks,
            split=args.split,
            max_instances=args.max_instances,
            api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
        )
    else:
        if not args.checkpoint:
            raise SystemExit("eval needs --checkpoint DIR or --endpoint URL")
        import torch

        from .rollout.episodes import RolloutLimits
        from .rollout.hf import HFGenerateEngine
        from .training.models import load_policy

        if args.threads:
            torch.set_num_threads(args.threads)
        model, tokenizer = load_policy(args.checkpoint)
        engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
        result = evaluate_policy(
            engine,
            tokenizer,
            args.tasks,
            stage="eval",
            split=args.split,
            max_instances=args.max_instances,
            limits=RolloutLimits(args.max_tokens, args.max_context, args.temperature),
            backend=args.backend,
            seed=args.seed,
            prompt_style=args.prompt,
            samples_per_instance=args.samples,
        )
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from .analysis.report import diagnose_run

    print(diagnose_run(args.run_dir))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from .compare import run_compare

    print(run_compare(args.config))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentgym-eppo", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="SFT warm start, RL with a clip policy, evals")
    train.add_argument("--config", help="YAML config (see configs/demo-cpu.yaml)")
    train.add_argument("overrides", nargs="*", help="key=value overrides, e.g. rl.steps=10")
    train.set_defaults(handler=_train)

    pre = commands.add_parser(
        "pretrain", help="pretrain a base model on expert trajectories of fresh task instances"
    )
    pre.add_argument("--config", required=True, help="YAML config (see configs/tiny-base.yaml)")
    pre.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.steps=10")
    pre.set_defaults(handler=_pretrain)

    evaluate = commands.add_parser("eval", help="per-task success of a checkpoint or endpoint")
    evaluate.add_argument("--checkpoint", help="a saved model directory (with its tokenizer)")
    evaluate.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://host/v1")
    evaluate.add_argument("--model", help="the endpoint's model name")
    evaluate.add_argument("--api-key-env", help="environment variable holding the API key")
    evaluate.add_argument("--tasks", nargs="+", required=True, help="task ids or env ids")
    evaluate.add_argument("--split", default="dev")
    evaluate.add_argument("--max-instances", type=int, default=None)
    evaluate.add_argument("--temperature", type=float, default=0.0)
    evaluate.add_argument("--max-tokens", type=int, default=1024, help="tokens per turn")
    evaluate.add_argument("--max-context", type=int, default=8192)
    evaluate.add_argument("--backend", default="serial", help="serial | subprocess | ray")
    evaluate.add_argument(
        "--prompt", default="full", help="full | compact (what the checkpoint was trained on)"
    )
    evaluate.add_argument("--samples", type=int, default=1, help="attempts per instance")
    evaluate.add_argument("--seed", type=int, default=0, help="order of the instances drawn")
    evaluate.add_argument("--threads", type=int, default=None)
    evaluate.add_argument("--output", help="also write the JSON here")
    evaluate.set_defaults(handler=_eval)

    diagnose = commands.add_parser("diagnose", help="entropy diagnostics and plots of a run")
    diagnose.add_argument("run_dir")
    diagnose.set_defaults(handler=_diagnose)

    compare = commands.add_parser("compare", help="train several clip policies and compare")
    compare.add_argument("config")
    compare.set_defaults(handler=_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
