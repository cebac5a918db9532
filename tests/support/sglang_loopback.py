"""A loopback HTTP server that speaks the part of SGLang's native API the engine uses.

The one permitted stand-in of this project: SGLang itself cannot run on a CPU-only
machine (GPU kernels; its CPU path wants Intel AMX), so the tests of
:class:`~agentgym_eppo.trainer.rollout.sglang.SGLangServerEngine` talk to this
server instead. It serves a *real* tiny HF model: ``/generate`` samples with
``transformers``' generate from the temperature-scaled full distribution and returns
each sampled token's log-prob under it, in SGLang's answer format
(``meta_info.output_token_logprobs`` as ``[logprob, token_id, None]``, ``output_ids``,
``finish_reason``); ``/update_weights_from_disk`` loads a checkpoint directory;
``/flush_cache`` answers plain text as SGLang does. Every request is recorded.

Separate from ``tests/support/chat_servers.py`` (scripted chat completions): this one is a stateful
imitation of SGLang's native API around a real model, which it samples and reloads.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel


class LoopbackSGLang:
    """``with LoopbackSGLang(model) as server: server.url``."""

    def __init__(self, model: PreTrainedModel, eos_token_id: int, pad_token_id: int) -> None:
        self.model = model.eval()
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id
        self.requests: list[tuple[str, Any]] = []
        self.flushes = 0
        self.hidden_paths = False
        """True: answer loads as a server on another machine that cannot see the path."""
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LoopbackSGLang:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @torch.no_grad()
    def generate_one(self, input_ids: list[int], params: dict[str, Any]) -> dict[str, Any]:
        temperature = float(params.get("temperature", 1.0))
        greedy = temperature == 0 or params.get("top_k") == 1
        stops = list(params.get("stop_token_ids") or [])
        sampling = (
            {"do_sample": False}
            if greedy
            else {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        )
        out = self.model.generate(
            input_ids=torch.tensor([input_ids]),
            attention_mask=torch.ones(1, len(input_ids), dtype=torch.long),
            max_new_tokens=int(params["max_new_tokens"]),
            eos_token_id=stops or None,
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
            output_scores=True,
            **sampling,
        )
        ids = out.sequences[0, len(input_ids) :].tolist()
        logprobs = [
            float(torch.log_softmax(scores[0].float(), -1)[token])
            for scores, token in zip(out.scores, ids, strict=False)
        ]
        ids = ids[: len(logprobs)]
        if ids and ids[-1] in stops:
            reason = {"type": "stop", "matched": ids[-1]}
        else:
            reason = {"type": "length", "length": len(ids)}
        return {
            "text": "",
            "output_ids": ids,
            "meta_info": {
                "prompt_tokens": len(input_ids),
                "completion_tokens": len(ids),
                "finish_reason": reason,
                "output_token_logprobs": [
                    [lp, t, None] for lp, t in zip(logprobs, ids, strict=True)
                ],
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, code: int, body: Any, as_json: bool = True) -> None:
                data = (json.dumps(body) if as_json else str(body)).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json" if as_json else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                payload = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append((self.path, payload))
                    if self.path == "/generate":
                        self._generate(payload)
                    elif self.path == "/update_weights_from_disk":
                        self._load(payload)
                    elif self.path == "/flush_cache":
                        server.flushes += 1
                        self._answer(200, "Cache flushed.", as_json=False)
                    else:
                        self._answer(404, {"detail": "Not Found"})

            def _generate(self, payload: dict[str, Any]) -> None:
                batch = payload["input_ids"]
                params = payload.get("sampling_params") or {}
                if batch and isinstance(batch[0], int):
                    self._answer(200, server.generate_one(batch, params))
                    return
                if isinstance(params, dict):
                    params = [params] * len(batch)
                answer = [server.generate_one(ids, p) for ids, p in zip(batch, params, strict=True)]
                self._answer(200, answer)

            def _load(self, payload: dict[str, Any]) -> None:
                path = payload["model_path"]
                if server.hidden_paths:
                    path = path + ".not-on-this-machine"
                try:
                    model = AutoModelForCausalLM.from_pretrained(path)
                except (OSError, ValueError) as error:
                    self._answer(200, {"success": False, "message": f"Failed to load: {error}"})
                    return
                server.model = model.eval()
                self._answer(
                    200, {"success": True, "message": "Succeeded to update model weights."}
                )

        return Handler
