"""Token layout of episodes: assembled pieces equal the chat template's own rendering."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from agentgym_eppo.trainer.rollout.chat import (
    Transcript,
    action_text,
    compact_system_prompt,
    observation_token_ids,
    prompt_token_ids,
)
from agentgym_eppo.trainer.training.models import build_tokenizer

pytestmark = pytest.mark.train
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "say",
            "description": "Say a word.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["say the word apple", "not apple"] * 10, vocab_size=300)


def test_assembled_episode_equals_the_templates_rendering_and_mask(tokenizer):
    transcript = Transcript(prompt_token_ids(tokenizer, "Sys", "Task text", TOOLS))
    call = {"name": "say", "arguments": {"word": "x"}}
    transcript.add_generated(tokenizer.encode(action_text(call) + "<|im_end|>"))
    transcript.add_template(observation_token_ids(tokenizer, "not x"))
    transcript.add_generated(tokenizer.encode("done<|im_end|>"))
    messages = [
        {"role": "system", "content": "Sys"},
        {"role": "user", "content": "Task text"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": call}]},
        {"role": "tool", "content": "not x"},
        {"role": "assistant", "content": "done"},
    ]
    rendered = tokenizer.apply_chat_template(
        messages, tools=TOOLS, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    # the template ends the last turn with a newline the episode never needs
    assert rendered["input_ids"][:-1] == transcript.tokens
    assert rendered["assistant_masks"][:-1] == transcript.mask


def test_compact_prompt_names_the_task_and_tool_signatures(tokenizer):
    assert compact_system_prompt("echo", TOOLS) == (
        "Task: echo. Tools: say(word). Answer with one <tool_call>."
    )
    compact = tokenizer.decode(
        prompt_token_ids(tokenizer, "Long instructions.", "Say x.", TOOLS, "compact", "echo")
    )
    assert compact == (
        "<|im_start|>system\nTask: echo. Tools: say(word). Answer with one <tool_call>."
        "<|im_end|>\n<|im_start|>user\nSay x.<|im_end|>\n<|im_start|>assistant\n"
    )
    with pytest.raises(ValueError, match=r"prompt style must be one of \('full', 'compact'\)"):
        prompt_token_ids(tokenizer, "s", "t", TOOLS, "tiny")


def test_expert_actions_render_as_hermes_calls():
    assert action_text({"name": "say", "arguments": {"word": "é"}}) == (
        '<tool_call>\n{"name": "say", "arguments": {"word": "é"}}\n</tool_call>'
    )
    assert action_text("Final Answer: #3") == "Final Answer: #3"
    with pytest.raises(TypeError, match=r"cannot render expert action 3"):
        action_text(3)
