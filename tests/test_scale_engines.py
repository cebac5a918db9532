"""Engine selection from the scale config, and off-policy sampling from a stale engine."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.sglang_loopback import LoopbackSGLang  # noqa: E402

from agentgym_eppo.trainer.distributed.config import (  # noqa: E402
    EngineConfig,
    RayConfig,
    ScaleConfig,
)
from agentgym_eppo.trainer.distributed.launch import make_rollout_engine  # noqa: E402
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine  # noqa: E402
from agentgym_eppo.trainer.rollout.sglang import SGLangServerEngine  # noqa: E402
from agentgym_eppo.trainer.rollout.stale import SnapshotHFEngine, StaleMixEngine  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402

pytestmark = pytest.mark.train
CONTEXTS = [[5 + i, 6, 7, 8] for i in range(10)]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=400)


@pytest.fixture
def model(tokenizer):
    torch.set_num_threads(1)
    return build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=0)


def _perturb(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.5)


def _greedy(model, tokenizer, contexts):
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    return engine.generate(contexts, [6] * len(contexts), 0.0)


def test_the_default_engine_is_the_in_process_hf_engine(model, tokenizer, tmp_path):
    engine = make_rollout_engine(ScaleConfig(), model, tokenizer, tmp_path)
    assert type(engine) is HFGenerateEngine and engine.model is model


def test_stale_share_sends_that_share_of_turns_to_an_engine_synced_every_n_updates(
    model, tokenizer, tmp_path
):
    scale = ScaleConfig(engine=EngineConfig(stale_share=0.3, stale_every=2))
    engine = make_rollout_engine(scale, model, tokenizer, tmp_path, seed=1)
    assert isinstance(engine, StaleMixEngine) and isinstance(engine.stale, SnapshotHFEngine)
    initial = copy.deepcopy(model)
    _perturb(model, 1)
    engine.update_weights(model)  # update 1: the fresh engine follows, the stale one does not
    turns = engine.generate(CONTEXTS, [6] * 10, 0.0)
    fresh, stale = _greedy(model, tokenizer, CONTEXTS), _greedy(initial, tokenizer, CONTEXTS)
    from_stale = [i for i, turn in enumerate(turns) if turn == stale[i] and turn != fresh[i]]
    assert len(from_stale) == 3 and engine.stale_turns == 3 and engine.fresh_turns == 7
    assert all(turns[i] == fresh[i] for i in range(10) if i not in from_stale)
    engine.update_weights(model)  # update 2: the stale engine catches up
    assert engine.generate(CONTEXTS, [6] * 10, 0.0) == fresh


def test_sglang_server_engine_from_config_starts_from_the_trainers_weights(
    model, tokenizer, tmp_path
):
    server_model = copy.deepcopy(model)
    _perturb(server_model, 2)  # the server was launched on some other checkpoint
    with LoopbackSGLang(server_model, tokenizer.eos_token_id, tokenizer.pad_token_id) as server:
        scale = ScaleConfig(engine=EngineConfig(kind="sglang-server", url=server.url))
        engine = make_rollout_engine(scale, model, tokenizer, tmp_path)
        assert isinstance(engine, SGLangServerEngine)
        assert engine.sync_dir == tmp_path / "engine_weights" / "fresh"
        assert engine.generate(CONTEXTS, [6] * 10, 0.0) == _greedy(model, tokenizer, CONTEXTS)


@pytest.mark.parametrize(
    ("scale", "message"),
    [
        (ScaleConfig(engine=EngineConfig(kind="vllm")), "engine.kind must be one of"),
        (ScaleConfig(engine=EngineConfig(weight_sync="nccl")), "engine.weight_sync must be one of"),
        (
            ScaleConfig(engine=EngineConfig(kind="sglang-server", weight_sync="tensor")),
            "cannot map the trainer's tensors",
        ),
        (ScaleConfig(engine=EngineConfig(stale_share=1.0)), "stale_share must be in"),
        (ScaleConfig(ray=RayConfig(env_worker_cpus=0)), "ray.env_worker_cpus must be in"),
        (ScaleConfig(ray=RayConfig(trainer_ranks=0)), "must be >= 1"),
        (ScaleConfig(ray=RayConfig(get_timeout_s=0)), "must be positive"),
    ],
)
def test_inconsistent_scale_settings_are_refused_by_name(scale, message):
    with pytest.raises(ValueError, match=message):
        scale.validate()


def test_the_in_process_sglang_engine_says_which_extra_it_needs(model, tokenizer, tmp_path):
    try:
        import sglang  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("sglang is installed here")
    with pytest.raises(ImportError, match=r"pip install 'agentgym-eppo\[gpu\]'"):
        make_rollout_engine(
            ScaleConfig(engine=EngineConfig(kind="sglang")), model, tokenizer, tmp_path
        )
