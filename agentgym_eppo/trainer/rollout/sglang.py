"""SGLang rollout engines: token ids in, token ids and their log-probs out.

Two ways to reach SGLang, one parser for its answers:

* :class:`SGLangServerEngine` speaks the native HTTP API of ``python -m
  sglang.launch_server``: ``POST /generate`` with ``input_ids`` (a batch of token
  lists, no re-tokenisation), ``sampling_params`` and ``return_logprob``; weights are
  synced after each update by saving the policy as an HF checkpoint and calling
  ``POST /update_weights_from_disk`` (the path works across machines that share a file
  system), then ``POST /flush_cache`` so no KV prefix computed with the old weights is
  reused.
* :class:`SGLangInProcessEngine` holds an ``sglang.Engine`` (imported here, lazily: the
  ``gpu`` extra replaces torch with a CUDA build, so nothing else may need it) and syncs
  with ``update_weights_from_tensor`` (no disk round trip).

Sampling follows the EPPO paper's appendix A: temperature 0.8, top-p 1, no top-k, at
most 1,024 new tokens a turn, stopping at the end-of-turn token, which is kept in the
output (the transcript needs it as a loss token). The log-probs SGLang returns are
those of the distribution it sampled from (logits divided by the temperature), the
quantity :func:`agentgym_eppo.trainer.training.batching.token_logprobs` recomputes.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel


class EngineError(RuntimeError):
    """The SGLang engine or server refused a request or answered something unusable."""


@dataclass(frozen=True)
class SamplingSettings:
    """SGLang ``sampling_params`` of a rollout turn (EPPO paper, appendix A)."""

    top_p: float = 1.0
    top_k: int = -1

    def to_sglang(self, max_new_tokens: int, temperature: float, eos_token_id: int) -> dict:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        params: dict[str, Any] = {
            "max_new_tokens": int(max_new_tokens),
            "temperature": float(temperature),
            "top_p": self.top_p if temperature > 0 else 1.0,
            "top_k": self.top_k if temperature > 0 else 1,  # top-k 1 = greedy in SGLang
            "stop_token_ids": [int(eos_token_id)],
            "skip_special_tokens": False,
            "no_stop_trim": True,
        }
        return params


@dataclass
class TurnSample:
    """One generated turn: its token ids, their log-probs, and why it stopped."""

    tokens: list[int]
    logprobs: list[float]
    finish_reason: str


@dataclass
class SyncRecord:
    """The last weight sync: what was sent and how long the engine took."""

    bytes: int = 0
    seconds: float = 0.0
    syncs: int = 0


def parse_generation(item: Mapping[str, Any], eos_token_id: int) -> TurnSample:
    """A :class:`TurnSample` from one element of SGLang's ``/generate`` answer.

    The token ids come from ``meta_info.output_token_logprobs`` (``[logprob, id, text]``
    triples, present with ``return_logprob``); ``output_ids`` must agree when the server
    sends it. Anything after the first end-of-turn token is dropped.
    """
    meta = item.get("meta_info")
    if not isinstance(meta, Mapping) or "output_token_logprobs" not in meta:
        raise EngineError(
            "SGLang answer has no meta_info.output_token_logprobs (was return_logprob sent?): "
            f"{str(item)[:200]}"
        )
    triples = meta["output_token_logprobs"]
    try:
        tokens = [int(t[1]) for t in triples]
        logprobs = [float(t[0]) for t in triples]
    except (TypeError, ValueError, IndexError) as error:
        raise EngineError(f"malformed output_token_logprobs: {str(triples)[:200]}") from error
    output_ids = item.get("output_ids")
    if output_ids is not None and list(output_ids)[: len(tokens)] != tokens:
        raise EngineError("SGLang's output_ids disagree with its output_token_logprobs")
    if eos_token_id in tokens:
        cut = tokens.index(eos_token_id) + 1
        tokens, logprobs = tokens[:cut], logprobs[:cut]
    reason = meta.get("finish_reason")
    kind = reason.get("type", "unknown") if isinstance(reason, Mapping) else str(reason)
    return TurnSample(tokens, logprobs, str(kind))


class _SGLangEngineBase:
    """What both engines share: batching requests and the :class:`RolloutEngine` method."""

    def __init__(self, eos_token_id: int, sampling: SamplingSettings | None) -> None:
        self.eos_token_id = int(eos_token_id)
        self.sampling = sampling or SamplingSettings()
        self.last_sync = SyncRecord()
        self.last_samples: list[TurnSample] = []

    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[list[int]]:
        """One assistant turn per context; their log-probs stay in :attr:`last_samples`."""
        self.last_samples = self.generate_samples(contexts, max_new_tokens, temperature)
        return [sample.tokens for sample in self.last_samples]

    def generate_samples(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[TurnSample]:
        if len(max_new_tokens) != len(contexts):
            raise ValueError("give one max_new_tokens per context")
        if not contexts:
            return []
        if any(len(context) == 0 for context in contexts):
            raise ValueError("every context needs at least one token")
        params = [
            self.sampling.to_sglang(budget, temperature, self.eos_token_id)
            for budget in max_new_tokens
        ]
        answer = self._generate([list(map(int, c)) for c in contexts], params)
        if len(answer) != len(contexts):
            raise EngineError(f"asked for {len(contexts)} generations, got {len(answer)}")
        samples = [parse_generation(item, self.eos_token_id) for item in answer]
        for sample, budget in zip(samples, max_new_tokens, strict=True):
            del sample.tokens[budget:], sample.logprobs[budget:]
        return samples

    def _generate(self, input_ids: list[list[int]], params: list[dict]) -> list[Mapping[str, Any]]:
        raise NotImplementedError


class SGLangServerEngine(_SGLangEngineBase):
    """A rollout engine backed by an SGLang server's native HTTP API (see module doc).

    Args:
        url: the server's base URL, e.g. ``http://10.0.0.5:30000``.
        eos_token_id: the end-of-turn token (a stop token, kept in the output).
        sync_dir: where :meth:`update_weights` saves the policy for the server to load;
            the server must see the same path (shared or local file system).
        timeout_s: bound on every request; a server that does not answer in time is
            an :class:`EngineError`, never a hang.
    """

    def __init__(
        self,
        url: str,
        eos_token_id: int,
        sync_dir: str | Path | None = None,
        sampling: SamplingSettings | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        super().__init__(eos_token_id, sampling)
        self.url = url.rstrip("/")
        self.sync_dir = Path(sync_dir) if sync_dir is not None else None
        self.timeout_s = float(timeout_s)

    def _post(
        self, path: str, payload: Mapping[str, Any] | None = None, as_json: bool = True
    ) -> Any:
        """POST ``payload`` to ``path``; the decoded JSON answer (or the raw text)."""
        data = json.dumps(payload or {}).encode("utf-8")
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")[:300]
            raise EngineError(f"SGLang {path} answered HTTP {error.code}: {detail}") from error
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            raise EngineError(f"SGLang server {self.url} unreachable on {path}: {error}") from error
        if not as_json:
            return body.decode("utf-8", "replace")
        try:
            return json.loads(body) if body else None
        except json.JSONDecodeError as error:
            raise EngineError(f"SGLang {path} answered non-JSON: {body[:200]!r}") from error

    def _generate(self, input_ids: list[list[int]], params: list[dict]) -> list[Mapping[str, Any]]:
        answer = self._post(
            "/generate",
            {"input_ids": input_ids, "sampling_params": params, "return_logprob": True},
        )
        if isinstance(answer, Mapping):  # a batch of one may come back unwrapped
            answer = [answer]
        if not isinstance(answer, list):
            raise EngineError(f"SGLang /generate answered {str(answer)[:200]}")
        return answer

    def flush_cache(self) -> None:
        """Drop the server's KV prefix cache (SGLang answers plain text)."""
        self._post("/flush_cache", as_json=False)

    def update_weights(self, model: PreTrainedModel) -> None:
        """Save ``model`` under ``sync_dir`` and make the server load it (then flush its cache)."""
        if self.sync_dir is None:
            raise EngineError("SGLangServerEngine.update_weights needs a sync_dir")
        started = time.perf_counter()
        target = self.sync_dir / f"sync-{self.last_sync.syncs + 1}"
        model.save_pretrained(target, safe_serialization=True)
        answer = self._post("/update_weights_from_disk", {"model_path": str(target)})
        if not isinstance(answer, Mapping) or not answer.get("success", False):
            raise EngineError(f"SGLang could not load the weights from {target}: {answer}")
        self.flush_cache()
        written = sum(p.stat().st_size for p in target.glob("*.safetensors"))
        self._remove_older_syncs(target)
        self.last_sync = SyncRecord(
            written, time.perf_counter() - started, self.last_sync.syncs + 1
        )

    def _remove_older_syncs(self, keep: Path) -> None:
        assert self.sync_dir is not None
        for old in self.sync_dir.glob("sync-*"):
            if old != keep and old.is_dir():
                for path in old.iterdir():
                    path.unlink()
                old.rmdir()


class SGLangInProcessEngine(_SGLangEngineBase):
    """A rollout engine holding an ``sglang.Engine`` in this process (``gpu`` extra).

    ``sync``: ``tensor`` hands the tensors over (CUDA IPC on one machine, no disk);
    ``disk`` saves a checkpoint under ``sync_dir`` and has the engine load it.
    ``engine_kwargs`` go to ``sglang.Engine`` (``mem_fraction_static``, ``tp_size``...);
    the tokenizer is skipped (token ids in and out).
    """

    def __init__(
        self,
        model_path: str | Path,
        eos_token_id: int,
        sampling: SamplingSettings | None = None,
        sync: str = "tensor",
        sync_dir: str | Path | None = None,
        **engine_kwargs: Any,
    ) -> None:
        super().__init__(eos_token_id, sampling)
        if sync not in ("tensor", "disk") or (sync == "disk" and sync_dir is None):
            raise ValueError(f"sync must be tensor, or disk with a sync_dir; got {sync!r}")
        self.sync = sync
        self.sync_dir = Path(sync_dir) if sync_dir is not None else None
        try:
            import sglang
        except ImportError as error:
            raise ImportError(
                "engine.kind=sglang needs the gpu extra: pip install 'agentgym-eppo[gpu]'"
            ) from error
        self._engine: Any = sglang.Engine(
            model_path=str(model_path), skip_tokenizer_init=True, **engine_kwargs
        )

    def _generate(self, input_ids: list[list[int]], params: list[dict]) -> list[Mapping[str, Any]]:
        answer = self._engine.generate(
            input_ids=input_ids, sampling_params=params, return_logprob=True
        )
        return answer if isinstance(answer, list) else [answer]

    def update_weights(self, model: PreTrainedModel) -> None:
        """Hand the policy's weights to the engine (tensors or a checkpoint), flush its cache."""
        started = time.perf_counter()
        if self.sync == "disk":
            assert self.sync_dir is not None
            target = self.sync_dir / f"sync-{self.last_sync.syncs + 1}"
            model.save_pretrained(target, safe_serialization=True)
            ok, message = self._engine.update_weights_from_disk(str(target))[:2]
            if not ok:
                raise EngineError(f"SGLang could not load the weights from {target}: {message}")
            self._engine.flush_cache()
            size = sum(p.stat().st_size for p in target.glob("*.safetensors"))
        else:
            named = [(name, tensor.detach()) for name, tensor in model.state_dict().items()]
            self._engine.update_weights_from_tensor(named_tensors=named, flush_cache=True)
            size = sum(t.numel() * t.element_size() for _, t in named)
        self.last_sync = SyncRecord(size, time.perf_counter() - started, self.last_sync.syncs + 1)

    def shutdown(self) -> None:
        self._engine.shutdown()
