"""``agentgym-eppo``: train, eval, diagnose, compare.

agentgym-eppo train --config configs/demo-cpu.yaml [key=value ...]
agentgym-eppo pretrain --config configs/tiny-base.yaml [key=value ...]
agentgym-eppo eval --checkpoint RUN_DIR/checkpoints/sft --tasks db kg [--split dev]
agentgym-eppo eval --endpoint http://127.0.0.1:30000/v1 --model NAME --tasks os db
agentgym-eppo fetch-model smollm2-135m-instruct
agentgym-eppo diagnose RUN_DIR
agentgym-eppo paired RUN_A/eval_after_sft.json RUN_B/eval_after_rl.json [--tasks os,db]
agentgym-eppo success RUN/eval_after_sft.json [--tasks webshop]
agentgym-eppo compare configs/compare.yaml
agentgym-eppo serve --task db [--host 127.0.0.1] [--port 8000] [--max-sessions 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_eppo.registration import ENVIRONMENTS

from .algorithms import defaults as d
from .rollout.chat import PROMPT_STYLES
from .rollout.openai_http import EndpointError, EndpointLimits


def _train(args: argparse.Namespace) -> int:
    from .config import load_config
    from .run import run_training

    config = load_config(None if args.defaults else args.config, args.overrides)
    if args.show_config:
        from .config import describe_config

        print(describe_config(config))
        return 0
    run_training(config)
    return 0


def _pretrain(args: argparse.Namespace) -> int:
    from .training.pretrain import load_pretrain_config, pretrain

    pretrain(load_pretrain_config(args.config, args.overrides))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .rollout.evaluation import evaluate_policy
    from .rollout.openai_endpoint import evaluate_endpoint

    if args.endpoint:
        if not args.model:
            raise CLIError("eval --endpoint needs --model (the served model's name)")
        try:
            limits = EndpointLimits(args.request_deadline, args.max_body_bytes, args.max_failures)
        except ValueError as error:
            raise CLIError(str(error)) from None
        tokenizer = _endpoint_tokenizer(args.tokenizer, args.model)
        result = evaluate_endpoint(
            args.endpoint,
            args.model,
            args.tasks,
            split=args.split,
            max_instances=args.max_instances,
            api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            limits=limits,
            tokenizer=tokenizer,
        )
    else:
        if not args.checkpoint:
            raise CLIError("eval needs --checkpoint DIR or --endpoint URL")
        import torch

        from .rollout.episodes import RolloutLimits
        from .rollout.hf import HFGenerateEngine
        from .training.checkpoint import CALL_FORMAT, choose_prompt_style, read_policy_card
        from .training.models import load_policy, resolve_model_path

        if args.threads:
            torch.set_num_threads(args.threads)
        model, tokenizer = load_policy(args.checkpoint)
        card = read_policy_card(resolve_model_path(args.checkpoint))
        prompt_style, warning = choose_prompt_style(args.prompt, card)
        if warning:
            print(f"agentgym-eppo eval: warning: {warning}", file=sys.stderr)
        if card and card.get("call_format", CALL_FORMAT) != CALL_FORMAT:
            print(
                f"agentgym-eppo eval: warning: the checkpoint writes {card['call_format']} calls; "
                f"the rollout reads {CALL_FORMAT}",
                file=sys.stderr,
            )
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
            instance_seed=args.seed,
            prompt_style=prompt_style,
            samples_per_instance=args.samples,
        )
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    print(text)
    if result.get("failed"):  # raised after the write: the finished episodes are kept
        unplayed = sum(result["not_played"].values())
        raise EndpointError(
            f"{result['failed'][-1]['error']} (partial result: {len(result['failed'])} "
            f"episode(s) failed, {unplayed} not played)"
        )
    if result.get("partial"):  # interrupted
        return 130
    return 0


def _endpoint_tokenizer(name: str | None, model: str) -> object:
    """The served model's tokenizer, whose special tokens are escaped in the env's text:
    ``--tokenizer``, else the ``--model`` name when it is a folder or a model known here;
    else none (a warning: only the common control-token forms are escaped)."""
    from .training.models import NAMED_MODELS, load_tokenizer, shipped_models

    if name is None and (Path(model).is_dir() or model in (*shipped_models(), *NAMED_MODELS)):
        name = model
    if name is None:
        print(
            f"agentgym-eppo eval: warning: no tokenizer for {model!r} (--tokenizer): the "
            "environment's text is escaped for the common control-token forms only, not "
            "for the served model's own special tokens",
            file=sys.stderr,
        )
        return None
    return load_tokenizer(name)


def _fetch_model(args: argparse.Namespace) -> int:
    from .training.models import NAMED_MODELS

    model = NAMED_MODELS.get(args.name)
    if model is None:
        raise CLIError(f"no named model {args.name!r} (named: {', '.join(NAMED_MODELS)})")
    print(model.build() if args.rebuild else model.ensure())
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from .analysis.report import diagnose_run

    print(diagnose_run(args.run_dir))
    return 0


def _evaluation_episodes(path: str, tasks: str | None) -> dict[str, Any]:
    """An evaluation file's episodes, of the comma-separated ``tasks`` only if given."""
    from .analysis.run_dir import read_eval

    try:
        evaluation = read_eval(path)
    except (OSError, ValueError) as error:
        raise CLIError(str(error)) from error
    if "episodes" not in evaluation:
        raise CLIError(
            f"{path}: an evaluation without its episodes (written before they were kept)"
        )
    episodes = evaluation["episodes"]
    if tasks:
        wanted = set(tasks.split(","))
        episodes = [e for e in episodes if e["task_id"] in wanted]
    return {"episodes": episodes}


def _paired(args: argparse.Namespace) -> int:
    from .analysis.paired_eval import compare_evals, comparison_table

    before = _evaluation_episodes(args.before, args.tasks)
    after = _evaluation_episodes(args.after, args.tasks)
    try:
        comparison = compare_evals(before, after)
    except ValueError as error:
        raise CLIError(str(error)) from error
    print(comparison_table(comparison, args.before_name, args.after_name))
    return 0


def _success(args: argparse.Namespace) -> int:
    from .analysis.success_intervals import success_intervals, success_table

    try:
        result = success_intervals(_evaluation_episodes(args.evaluation, args.tasks))
    except ValueError as error:
        raise CLIError(f"{args.evaluation}: {error}") from error
    print(success_table(result))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from .compare import run_compare

    print(run_compare(args.config))
    return 0


class CLIError(Exception):
    """A wrong invocation found after parsing: printed as one line, exit status 1."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default (None defaults are left unsaid)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or action.default is argparse.SUPPRESS or action.required:
            return text
        if isinstance(action.default, bool) or action.nargs in ("*", "+"):
            return text
        return super()._get_help_string(action) or text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentgym-eppo", description=__doc__.split("\n")[0], formatter_class=_Help
    )
    parser.add_argument("--debug", action="store_true", help="show the whole traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name, help=help_text, description=help_text, formatter_class=_Help
        )
        sub.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show the whole traceback of an error",
        )
        return sub

    train = command("train", "SFT warm start, RL with a clip policy, evaluations")
    source = train.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="YAML config (see configs/demo-cpu.yaml)")
    source.add_argument(
        "--defaults",
        action="store_true",
        help="start from the built-in defaults (the paper's full-size run) instead of a file",
    )
    train.add_argument(
        "--show-config",
        action="store_true",
        help="print every field with its value, default and help (where the default comes "
        "from), then exit without training",
    )
    train.add_argument("overrides", nargs="*", help="key=value overrides, e.g. rl.steps=10")
    train.set_defaults(handler=_train)

    pre = command(
        "pretrain", "pretrain a base model on expert trajectories of fresh task instances"
    )
    pre.add_argument("--config", required=True, help="YAML config (see configs/tiny-base.yaml)")
    pre.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.steps=10")
    pre.set_defaults(handler=_pretrain)

    evaluate = command("eval", "per-task success of a checkpoint or an OpenAI-compatible endpoint")
    evaluate.add_argument("--checkpoint", help="a saved model folder (with its tokenizer)")
    evaluate.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://host/v1")
    evaluate.add_argument("--model", help="the endpoint's model name (with --endpoint)")
    evaluate.add_argument(
        "--tokenizer",
        help="the served model's tokenizer (a folder, a model name here, a Hugging Face name) "
        "with --endpoint: its special tokens are escaped in the environment's text (default: "
        "--model, when it is a folder or a model known here)",
    )
    evaluate.add_argument("--api-key-env", help="environment variable holding the API key")
    evaluate.add_argument(
        "--request-deadline",
        type=float,
        default=EndpointLimits.deadline_s,
        help="seconds one endpoint request may take in all (connect, headers, body)",
    )
    evaluate.add_argument(
        "--max-body-bytes",
        type=int,
        default=EndpointLimits.max_body_bytes,
        help="largest endpoint reply read; a longer one fails its episode",
    )
    evaluate.add_argument(
        "--max-failures",
        type=int,
        default=EndpointLimits.max_consecutive_failures,
        help="endpoint failures in a row that end the evaluation (the result is marked partial)",
    )
    evaluate.add_argument(
        "--tasks",
        nargs="+",
        required=True,
        help=f"task ids ({' '.join(ENVIRONMENTS)}) or env ids",
    )
    evaluate.add_argument("--split", default="dev", help="task split: train | dev | test")
    evaluate.add_argument(
        "--max-instances", type=int, default=None, help="instances per task (none: all)"
    )
    evaluate.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    evaluate.add_argument(
        "--max-tokens", type=int, default=d.MAX_TOKENS_PER_TURN, help="tokens per turn"
    )
    evaluate.add_argument(
        "--max-context", type=int, default=d.MAX_CONTEXT, help="tokens per episode"
    )
    evaluate.add_argument(
        "--backend", default="serial", help="vector env back-end: serial | subprocess | ray"
    )
    evaluate.add_argument(
        "--prompt",
        default=None,
        choices=PROMPT_STYLES,
        help="prompt style; default: the one the checkpoint records (else full); a different "
        "one is used as asked, with a warning",
    )
    evaluate.add_argument("--samples", type=int, default=1, help="attempts per instance")
    evaluate.add_argument("--seed", type=int, default=0, help="order of the instances drawn")
    evaluate.add_argument(
        "--threads", type=int, default=None, help="torch threads (none: torch's default)"
    )
    evaluate.add_argument("--output", help="also write the JSON here")
    evaluate.set_defaults(handler=_eval)

    fetch = command(
        "fetch-model", "convert a named model (e.g. smollm2-135m-instruct) into the model cache"
    )
    fetch.add_argument("name", help="the model's name, as model.path or --checkpoint take it")
    fetch.add_argument("--rebuild", action="store_true", help="convert again even if cached")
    fetch.set_defaults(handler=_fetch_model)

    diagnose = command("diagnose", "entropy diagnostics and plots of a run")
    diagnose.add_argument("run_dir", help="a run folder written by agentgym-eppo train")
    diagnose.set_defaults(handler=_diagnose)

    paired = command(
        "paired",
        "two evaluations of the same instances compared instance by instance (one-sided: "
        "is AFTER better?)",
    )
    paired.add_argument(
        "before", help="an evaluation JSON (eval_*.json of a run, or eval --output)"
    )
    paired.add_argument("after", help="an evaluation JSON of the same instances")
    paired.add_argument("--tasks", help="comma-separated task ids to compare (default: all shared)")
    paired.add_argument("--before-name", default="before", help="the BEFORE column's name")
    paired.add_argument("--after-name", default="after", help="the AFTER column's name")
    paired.set_defaults(handler=_paired)

    success = command(
        "success",
        "one evaluation's success per task with 95% intervals over its instances",
    )
    success.add_argument(
        "evaluation", help="an evaluation JSON (eval_*.json of a run, or eval --output)"
    )
    success.add_argument("--tasks", help="comma-separated task ids (default: all)")
    success.set_defaults(handler=_success)

    compare = command("compare", "train several clip policies from one SFT checkpoint and compare")
    compare.add_argument("config", help="comparison YAML (see configs/compare-cpu.yaml)")
    compare.set_defaults(handler=_compare)

    from agentgym_eppo.serving.command import add_serve_arguments, run_serve

    serve = command("serve", "serve one task as an OpenEnv environment server")
    add_serve_arguments(serve)
    serve.set_defaults(handler=run_serve)
    return parser


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand. A runtime error is one line on stderr and exit status 1
    (``--debug`` raises it with its traceback instead)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if args.debug:
            raise
        print(f"agentgym-eppo {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
