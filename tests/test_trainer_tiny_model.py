"""The tiny Qwen2 model and the offline byte-level BPE tokenizer with the tool chat template."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402

pytestmark = pytest.mark.train

CORPUS = [
    "List the files in /tmp and count them.",
    '{"name": "bash_action", "arguments": {"script": "ls /tmp | wc -l"}}',
    "SELECT name FROM employees WHERE age > 30;",
] * 10
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash_action",
            "description": "Run a bash script.",
            "parameters": {
                "type": "object",
                "properties": {"script": {"type": "string"}},
                "required": ["script"],
            },
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Count the files."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "bash_action", "arguments": {"script": "ls"}}}
        ],
    },
    {"role": "tool", "content": "3"},
    {"role": "assistant", "content": "Done."},
]
EXPECTED_RENDERING = (
    "<|im_start|>system\nYou are an agent.\n\n# Tools\n\n"
    "You may call one of these functions. Function signatures are within <tools></tools>:\n"
    '<tools>\n{"type": "function", "function": {"name": "bash_action", "description": '
    '"Run a bash script.", "parameters": {"type": "object", "properties": {"script": '
    '{"type": "string"}}, "required": ["script"]}}}\n</tools>\n\n'
    "Reply with one call as a JSON object inside <tool_call></tool_call>:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    "<|im_end|>\n"
    "<|im_start|>user\nCount the files.<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "bash_action", "arguments": {"script": "ls"}}'
    "\n</tool_call><|im_end|>\n"
    "<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\nDone.<|im_end|>\n"
)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(CORPUS, vocab_size=400)


def test_chat_template_renders_chatml_with_tools_and_hermes_calls(tokenizer):
    text = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert text == EXPECTED_RENDERING


def test_generation_prompt_opens_an_assistant_turn(tokenizer):
    text = tokenizer.apply_chat_template(
        CONVERSATION[:2], tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\nCount the files.<|im_end|>\n<|im_start|>assistant\n")


def test_assistant_mask_covers_exactly_what_the_model_writes(tokenizer):
    out = tokenizer.apply_chat_template(
        CONVERSATION,
        tools=TOOLS,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    written = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert written == (
        '<tool_call>\n{"name": "bash_action", "arguments": {"script": "ls"}}\n</tool_call>'
        "<|im_end|>Done.<|im_end|>"
    )


def test_tool_call_markers_and_chat_markers_are_single_tokens(tokenizer):
    for marker in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>"):
        assert len(tokenizer.encode(marker, add_special_tokens=False)) == 1
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"


def test_any_unicode_text_round_trips_through_the_byte_level_vocabulary(tokenizer):
    text = "Größe: 3 € — naïve café ✓ 数据库\n\ttabs"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


def test_too_small_vocabulary_is_refused():
    with pytest.raises(ValueError, match=r"vocab_size must hold the 256 bytes"):
        build_tokenizer(CORPUS, vocab_size=100)


def test_tokenizer_is_deterministic(tokenizer):
    again = build_tokenizer(CORPUS, vocab_size=400)
    assert again.get_vocab() == tokenizer.get_vocab()


def test_saved_model_and_tokenizer_reload_as_qwen2_with_the_same_ids(tokenizer, tmp_path):
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1)
    text = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    tokenizer.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    reloaded_tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    reloaded_model = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert reloaded_tokenizer.encode(text) == tokenizer.encode(text)
    assert reloaded_tokenizer.chat_template == tokenizer.chat_template
    assert reloaded_model.config.model_type == "qwen2"
    ids = torch.tensor([tokenizer.encode(text)])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded_model(ids).logits)


def test_tiny_model_matches_the_vocabulary_and_is_seeded(tokenizer):
    torch.set_num_threads(1)
    first = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=3)
    second = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=3)
    assert first.config.vocab_size == len(tokenizer)
    assert first.config.eos_token_id == tokenizer.eos_token_id
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)
    prompt = torch.tensor([tokenizer.encode("Count the files.")])
    generated = first.generate(prompt, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert generated.shape == (1, prompt.shape[1] + 4)


def test_inconsistent_head_counts_are_refused(tokenizer):
    with pytest.raises(ValueError, match=r"hidden_size \(30\) must be a multiple of heads \(4\)"):
        build_tiny_model(tokenizer, hidden_size=30, heads=4)
    with pytest.raises(ValueError, match=r"heads \(4\) must be a multiple of kv_heads \(3\)"):
        build_tiny_model(tokenizer, hidden_size=32, heads=4, kv_heads=3)
