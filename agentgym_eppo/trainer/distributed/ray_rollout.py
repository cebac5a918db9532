"""HF rollout engines in Ray actors, behind the trainer's ``RolloutEngine`` interface.

Each :class:`HFRolloutWorker` actor holds its own copy of the policy (built from the
model's config, weights from the object store) and answers ``generate`` with the
trainer's :class:`~agentgym_eppo.trainer.rollout.hf.HFGenerateEngine`. The driver-side
:class:`RayRolloutEngine` cuts a batch of contexts into one contiguous piece per actor,
waits for all of them with a bounded ``ray.get``, and after each policy update puts the
new weights into the object store once, packed into one buffer, and has every actor
load them (the weight sync;
its bytes and seconds are kept in :attr:`RayRolloutEngine.last_sync`). On GPUs the same
role is played by SGLang (:mod:`agentgym_eppo.trainer.rollout.sglang`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.rollout.sglang import SyncRecord

from .ray_cluster import gather_in_order, get, split_evenly


def cpu_state_dict(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The model's weights as detached CPU tensors."""
    return {name: value.detach().cpu() for name, value in model.state_dict().items()}


_ALIGN = 64


@dataclass(frozen=True)
class PackedWeights:
    """A state dict as one byte buffer plus its layout (what crosses the object store).

    Ray stores a NumPy buffer once and actors on the node map it without copying or
    unpickling; a dict of tensors would be pickled tensor by tensor.
    """

    buffer: np.ndarray
    layout: tuple[
        tuple[str, str, tuple[int, ...], int, int], ...
    ]  # name, dtype, shape, start, size

    @property
    def payload_bytes(self) -> int:
        """Bytes of tensor data (the buffer adds alignment padding)."""
        return sum(entry[4] for entry in self.layout)

    @classmethod
    def pack(cls, state: Mapping[str, torch.Tensor]) -> PackedWeights:
        layout, start = [], 0
        for name, tensor in state.items():
            start = -(-start // _ALIGN) * _ALIGN  # typed views need aligned offsets
            size = tensor.numel() * tensor.element_size()
            layout.append(
                (name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape), start, size)
            )
            start += size
        buffer = np.empty(start, dtype=np.uint8)
        for (_, _, _, offset, size), tensor in zip(layout, state.values(), strict=True):
            flat = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            buffer[offset : offset + size] = flat.numpy()
        return cls(buffer, tuple(layout))

    def unpack(self) -> dict[str, torch.Tensor]:
        """Tensors viewing the buffer (read-only when it comes from the object store)."""
        with warnings.catch_warnings():  # a read-only view: load_state_dict only reads it
            warnings.simplefilter("ignore", UserWarning)
            raw = torch.from_numpy(self.buffer)
        state = {}
        for name, dtype, shape, offset, size in self.layout:
            state[name] = raw[offset : offset + size].view(getattr(torch, dtype)).reshape(shape)
        return state


class HFRolloutWorker:
    """The actor body: a policy copy and an :class:`HFGenerateEngine` over it."""

    def __init__(
        self,
        config: Mapping[str, Any],
        state: Mapping[str, torch.Tensor],
        eos_token_id: int,
        pad_token_id: int,
        batch_size: int = 64,
        bf16: bool = False,
        seed: int = 0,
        threads: int = 1,
    ) -> None:
        torch.set_num_threads(threads)
        torch.manual_seed(seed)
        values = dict(config)
        model_config = AutoConfig.for_model(values.pop("model_type"), **values)
        model = AutoModelForCausalLM.from_config(model_config)
        model.load_state_dict(dict(state))
        if torch.cuda.is_available():
            model.to("cuda")
        self.engine = HFGenerateEngine(model.eval(), eos_token_id, pad_token_id, batch_size, bf16)
        self.version = 0

    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[list[int]]:
        return self.engine.generate(contexts, max_new_tokens, temperature)

    def ready(self) -> int:
        return self.version

    def load_state(self, packed: PackedWeights) -> int:
        self.engine.model.load_state_dict(packed.unpack())
        self.version += 1
        return self.version


class RayRolloutEngine:
    """A ``RolloutEngine`` whose generation runs in ``actors`` Ray actors.

    Args:
        model: the policy (its config and current weights seed every actor).
        actors: how many rollout actors (contexts are split evenly between them).
        actor_options: Ray ``.options`` of each actor (``num_cpus``, ``num_gpus``...).
        timeout_s: bound on every ``ray.get`` (start-up, generation, weight sync).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        eos_token_id: int,
        pad_token_id: int,
        actors: int = 1,
        actor_options: Mapping[str, Any] | None = None,
        timeout_s: float = 600.0,
        batch_size: int = 64,
        bf16: bool = False,
        seed: int = 0,
    ) -> None:
        import ray

        if actors < 1:
            raise ValueError(f"actors must be >= 1, got {actors}")
        self._ray = ray
        self.timeout_s = float(timeout_s)
        self.last_sync = SyncRecord()
        remote: Any = ray.remote(HFRolloutWorker).options(
            **{"num_cpus": 1, "max_restarts": 0, **dict(actor_options or {})}
        )
        state = ray.put(cpu_state_dict(model))
        config = model.config.to_dict()
        self.actors: list[Any] = [
            remote.remote(config, state, eos_token_id, pad_token_id, batch_size, bf16, seed + k)
            for k in range(actors)
        ]
        try:
            get([a.ready.remote() for a in self.actors], self.timeout_s, "rollout actors (start)")
        except Exception:
            self.close()  # pending or broken actors would hold their reservation
            raise

    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[list[int]]:
        if len(max_new_tokens) != len(contexts):
            raise ValueError("give one max_new_tokens per context")
        pieces = [p for p in split_evenly(len(contexts), len(self.actors)) if len(p)]
        refs = [
            actor.generate.remote(
                [list(contexts[i]) for i in piece], [max_new_tokens[i] for i in piece], temperature
            )
            for actor, piece in zip(self.actors, pieces, strict=False)
        ]
        answers = get(refs, self.timeout_s, "rollout actors (generate)")
        return gather_in_order(pieces, answers)

    def update_weights(self, model: PreTrainedModel) -> None:
        """Put the new weights in the object store once; every actor loads them."""
        started = time.perf_counter()
        packed = PackedWeights.pack(model.state_dict())
        ref = self._ray.put(packed)
        get([a.load_state.remote(ref) for a in self.actors], self.timeout_s, "weight sync")
        size = packed.payload_bytes
        self.last_sync = SyncRecord(size, time.perf_counter() - started, self.last_sync.syncs + 1)

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)
        self.actors = []
