"""A stand-in for an SGLang server, for machines without a GPU: same endpoints, same JSON.

It answers ``/generate``, ``/encode``, ``/health`` (and ``/health_generate``),
``/get_model_info`` and ``/server_info`` (``/get_server_info``: the server arguments it stands in
for, as SGLang's ``asdict(ServerArgs)``, and ``version``: :data:`STANDIN_VERSION` unless given) — plus the OpenAI-compatible ``/v1/completions``, ``/v1/embeddings`` and
``/v1/models`` that SGLang also serves — in SGLang's wire format (``reference/inference-servers.md``
§3-§6): one object for a single prompt with ``n == 1``, otherwise a prompt-major list;
``meta_info`` with ``id``, ``finish_reason`` as a ``{"type": ...}`` dict, token counts and
``output_token_logprobs`` as ``[logprob, token_id, null]`` triples; ``/encode`` gives the
L2-normalised last-token hidden state; errors are ``{"error": {"message": ...}}``; compact JSON like
SGLang's ORJSON responses.  Behind it is a real model (:class:`TransformersGenerator`), so logprobs
are true logprobs.

Like SGLang, one server either generates or embeds (``--is-embedding``); ``/health`` answers 503
until the model is loaded (and ``startup_s`` has passed).  For failure tests it can answer the next
N model requests with 503 (``fail_first``), drop the connection without an answer (``drop_first``)
or delay every answer (``delay_s``) — set by constructor, CLI flag or ``POST /_standin/inject``.
It records every model request with its answer (``server.requests``, or
``GET /_standin/requests``), so tests can assert what a client really sent and what it was told.
Only ``text`` inputs, ``logprob_start_len = -1`` and no top logprobs are supported; other SGLang
sampling keys are accepted and ignored; unknown keys are rejected with 400, as SGLang does.

Seeds: it behaves as SGLang with ``--enable-deterministic-inference`` (``reference/inference-servers.md``
§3.3), which burnqed's GPU profile runs: an item's ``sampling_seed`` (42 when absent) seeds its
sample, the same seed gives the same tokens whatever else is in the batch, and all ``n`` copies of one
item share the seed — so they come out identical.  ``/v1/completions`` honours ``seed`` per request
the way vLLM does (SGLang ignores it there, issue #15481; burnqed's SGLang path is ``/generate``).

Example (in a test thread, or as a process the launcher starts like a real server)::

    with StandinServer("models/tiny", fail_first=2) as server:
        gen = SGLangGenerator(server.url, model_id="tiny")   # survives the two 503s
        ...
        assert server.requests[-1].body["sampling_params"]["n"] == 4

    python -m burnqed.policy.standin --model models/tiny --port 30000 [--is-embedding]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from burnqed.policy import SEED_BITS, SamplingParams

log = logging.getLogger(__name__)

DEFAULT_SAMPLING_SEED = 42  # SGLang's, for items without one (deterministic mode)
STANDIN_VERSION = "0.5.23+standin"  # the SGLang release whose wire format it speaks

# SGLang's SamplingParams constructor arguments; any other key is a 400 there, so here too.
KNOWN_SAMPLING_KEYS = frozenset(
    {
        "max_new_tokens",
        "stop",
        "stop_token_ids",
        "stop_regex",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "min_new_tokens",
        "n",
        "json_schema",
        "regex",
        "ebnf",
        "structural_tag",
        "ignore_eos",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "no_stop_trim",
        "custom_params",
        "stream_interval",
        "logit_bias",
        "sampling_seed",
        "beam_width",
        "watermark",
    }
)
NOT_EMBEDDING = (
    "This model does not appear to be an embedding model by default. Please add `--is-embedding` "
    "when launching the server or try another model."
)
NOT_GENERATION = "This model is an embedding model (--is-embedding) and cannot serve /generate."


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any  # decoded JSON body, or None
    status: int | None  # the answer's HTTP status; None for a dropped connection
    response: Any = None  # the JSON answered (200 answers only)


class BadRequest(ValueError):
    """A request SGLang would reject with 400."""


class StandinServer:
    """The stand-in, serving from a thread of this process (``start``/``stop`` or ``with``)."""

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        generator=None,
        host: str = "127.0.0.1",
        port: int = 0,
        is_embedding: bool = False,
        fail_first: int = 0,
        drop_first: int = 0,
        delay_s: float = 0.0,
        startup_s: float = 0.0,
        version: str = STANDIN_VERSION,
        deterministic: bool = True,
    ) -> None:
        if (model_dir is None) == (generator is None):
            raise ValueError("StandinServer needs exactly one of model_dir or generator")
        if generator is not None and generator.pooling != "last":
            raise ValueError(
                "StandinServer: /encode pools like SGLang (last token); pass pooling='last'"
            )
        self.model_dir = str(model_dir) if model_dir is not None else generator.model_id
        self.generator = generator
        self.is_embedding = is_embedding
        # What /server_info states: the release, and whether it runs deterministic inference
        # (it always samples as SGLang does in that mode; the flag is what it says of itself).
        self.version = version
        self.deterministic = deterministic
        self.fail_first, self.drop_first, self.delay_s = fail_first, drop_first, delay_s
        self.requests: list[RecordedRequest] = []
        self._ready_at = time.monotonic() + startup_s
        self._lock = threading.Lock()  # guards the counters and the request log
        self._model_lock = threading.Lock()  # one forward pass at a time
        self._loaded = threading.Event()
        self._load_error: BaseException | None = None
        self._httpd = ThreadingHTTPServer((host, port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.standin = self  # type: ignore[attr-defined]
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> StandinServer:
        """Listen at once; load the model in the background (``/health`` is 503 meanwhile)."""
        # A short poll interval makes stop() quick (shutdown waits for the loop to look).
        serve = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="standin-http",
            daemon=True,
        )
        serve.start()
        self._threads.append(serve)
        if self.generator is None:
            load = threading.Thread(target=self._load, name="standin-load", daemon=True)
            load.start()
            self._threads.append(load)
        else:
            self._loaded.set()
        log.info("stand-in SGLang server listening on %s (model %s)", self.url, self.model_dir)
        return self

    def _load(self) -> None:
        try:
            from burnqed.policy.transformers_backend import TransformersGenerator

            self.generator = TransformersGenerator(self.model_dir, pooling="last")
        except BaseException as e:
            self._load_error = e
            log.exception("stand-in: loading %s failed", self.model_dir)
        finally:
            self._loaded.set()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self) -> StandinServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def inject(
        self, *, fail: int | None = None, drop: int | None = None, delay_s: float | None = None
    ) -> None:
        """Set the failure switches: 503 the next ``fail`` / drop the next ``drop`` model requests."""
        with self._lock:
            if fail is not None:
                self.fail_first = fail
            if drop is not None:
                self.drop_first = drop
            if delay_s is not None:
                self.delay_s = delay_s

    def ready(self) -> bool:
        return (
            self._loaded.is_set()
            and self._load_error is None
            and time.monotonic() >= self._ready_at
        )

    def _record(self, path: str, body: Any, status: int | None, response: Any = None) -> None:
        with self._lock:
            self.requests.append(RecordedRequest("POST", path, body, status, response))

    def _take_fault(self) -> str | None:
        """The injected fault for this model request, if any ("fail" or "drop")."""
        with self._lock:
            if self.drop_first > 0:
                self.drop_first -= 1
                return "drop"
            if self.fail_first > 0:
                self.fail_first -= 1
                return "fail"
        return None

    # ----------------------------------------------------------------------------------------
    # SGLang semantics

    def generate(self, body: dict) -> Any:
        if self.is_embedding:
            raise BadRequest(NOT_GENERATION)
        inputs = [k for k in ("text", "input_ids", "input_embeds") if body.get(k) is not None]
        if inputs != ["text"]:
            raise BadRequest(
                f"stand-in: exactly one input, and only `text`, is supported (got {inputs})"
            )
        text = body["text"]
        single = isinstance(text, str)
        prompts = [text] if single else list(text)
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise BadRequest("`text` must be a string or a non-empty list of strings")
        raw_params = body.get("sampling_params") or {}
        per_prompt = raw_params if isinstance(raw_params, list) else [raw_params] * len(prompts)
        if len(per_prompt) != len(prompts):
            raise BadRequest(f"{len(per_prompt)} sampling_params for {len(prompts)} prompts")
        return_logprob = bool(body.get("return_logprob", False))
        if return_logprob and body.get("logprob_start_len", -1) != -1:
            raise BadRequest("stand-in: only logprob_start_len = -1 (output logprobs) is supported")
        if body.get("top_logprobs_num", 0):
            raise BadRequest("stand-in: top_logprobs_num is not supported")

        started = time.monotonic()
        parsed = [_sampling_params(sp) for sp in per_prompt]
        out = []
        with self._model_lock:
            # The generator is batch-invariant: items sampled one by one are what a batch gives.
            groups = [
                g
                for p, (params, _, n, seed) in zip(prompts, parsed, strict=True)
                for g in self._sample([p], params, n, seed)
            ]
            tok = self.generator.tokenizer
            for prompt, (params, no_stop_trim, _, _), samples in zip(
                prompts, parsed, groups, strict=True
            ):
                prompt_tokens = len(tok(prompt).input_ids)
                for s in samples:
                    out.append(
                        self._result(
                            s, params, no_stop_trim, prompt_tokens, return_logprob, started
                        )
                    )
        # SGLang: a single prompt with n == 1 is one object; anything else a prompt-major list.
        return out[0] if single and parsed[0][2] == 1 else out

    def _sample(self, prompts: list[str], params: SamplingParams | None, n: int, seed: int):
        if params is None:  # max_new_tokens == 0: SGLang's prefix-caching request
            return [[None] * n for _ in prompts]
        # Deterministic mode: every one of the n copies of an item is seeded with its seed.
        return self.generator.sample(prompts, params, [[seed] * n for _ in prompts])

    def _result(self, s, params, no_stop_trim, prompt_tokens, return_logprob, started) -> dict:
        if s is None:
            ids, lps, text, finish = [], [], "", {"type": "length", "length": 0}
        else:
            ids, lps = list(s.token_ids), list(s.token_logprobs)
            text = s.text
            if no_stop_trim:
                text = self.generator.tokenizer.decode(ids, skip_special_tokens=True)
            if s.finish_reason == "length":
                finish = {"type": "length", "length": params.max_new_tokens}
            else:
                finish = {"type": "stop", "matched": s.matched}
        meta: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "finish_reason": finish,
            "prompt_tokens": prompt_tokens,
            "weight_version": "default",
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "reasoning_tokens": 0,
            "num_retractions": 0,
        }
        if return_logprob:
            meta["input_token_logprobs"] = []  # logprob_start_len = -1
            meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(lps, ids, strict=True)]
        meta["e2e_latency"] = time.monotonic() - started
        return {"text": text, "output_ids": ids, "meta_info": meta}

    def encode(self, body: dict) -> Any:
        if not self.is_embedding:
            raise BadRequest(NOT_EMBEDDING)
        text = body.get("text")
        single = isinstance(text, str)
        texts = [text] if single else text
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise BadRequest("`text` must be a string or a non-empty list of strings")
        started = time.monotonic()
        with self._model_lock:
            vectors = self.generator.embed(texts)
            counts = [len(self.generator.tokenizer(t).input_ids) for t in texts]
        out = [
            {
                "embedding": v.tolist(),
                "meta_info": {
                    "id": uuid.uuid4().hex,
                    "finish_reason": None,
                    "prompt_tokens": c,
                    "cached_tokens": 0,
                    "e2e_latency": time.monotonic() - started,
                },
            }
            for v, c in zip(vectors, counts, strict=True)
        ]
        return out[0] if single else out

    def model_info(self) -> dict:
        return {
            "model_path": self.model_dir,
            "tokenizer_path": self.model_dir,
            "is_generation": not self.is_embedding,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
        }

    def server_info(self) -> dict:
        """SGLang's ``/server_info``: ``asdict(ServerArgs)`` (the arguments a CPU server of this
        model has), ``scheduler_info``'s keys, ``internal_states`` and ``version``."""
        args = {
            "model_path": self.model_dir,
            "tokenizer_path": self.model_dir,
            "revision": None,
            "load_format": "auto",
            "quantization": None,
            "dtype": "float32",
            "kv_cache_dtype": "auto",
            "attention_backend": "torch_native",
            "sampling_backend": "pytorch",
            "device": "cpu",
            "tp_size": 1,
            "pp_size": 1,
            "dp_size": 1,
            "ep_size": 1,
            "speculative_algorithm": None,
            "random_seed": DEFAULT_SAMPLING_SEED,
            "enable_deterministic_inference": self.deterministic,
            "disable_radix_cache": True,
            "is_embedding": self.is_embedding,
            "weight_version": "default",
        }
        return {**args, "max_total_num_tokens": 4096, "internal_states": [{}],
                "version": self.version}  # fmt: skip

    # ----------------------------------------------------------------------------------------
    # OpenAI-compatible endpoints (SGLang serves these too; reference §4)

    def models(self) -> dict:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.model_dir,
                    "object": "model",
                    "created": 0,
                    "owned_by": "sglang",
                    "root": self.model_dir,
                }
            ],
        }

    def completions(self, body: dict) -> dict:
        if self.is_embedding:
            raise BadRequest(NOT_GENERATION)
        if body.get("model") not in (None, "default", self.model_dir):
            raise BadRequest(f"The model `{body.get('model')}` does not exist.")
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if (
            not isinstance(prompts, list)
            or not prompts
            or not all(isinstance(p, str) for p in prompts)
        ):
            raise BadRequest(
                "`prompt` must be a string or a non-empty list of strings (token ids unsupported)"
            )
        if body.get("echo"):
            raise BadRequest("stand-in: echo is not supported")
        stop = body.get("stop") or ()
        seed = body.get("seed")
        try:
            params = SamplingParams(
                n=int(body.get("n", 1)),
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                max_new_tokens=int(body.get("max_tokens", 16)),
                stop=(stop,) if isinstance(stop, str) else tuple(stop),
            )
        except ValueError as e:
            raise BadRequest(str(e)) from None
        # vLLM: a request's seed seeds its own generator; its n samples are successive draws.
        seeds = None
        if seed is not None:
            rng = random.Random(int(seed))
            seeds = [[rng.getrandbits(SEED_BITS) for _ in range(params.n)] for _ in prompts]
        want_logprobs = body.get("logprobs") is not None
        with self._model_lock:
            groups = self.generator.sample(prompts, params, seeds)
            tok = self.generator.tokenizer
            prompt_tokens = sum(len(tok(p).input_ids) for p in prompts)
            choices = []
            for s in (s for group in groups for s in group):  # prompt-major, like vLLM and SGLang
                pieces = [tok.decode([t]) for t in s.token_ids]
                choice: dict[str, Any] = {"index": len(choices), "text": s.text, "logprobs": None}
                if want_logprobs:
                    offsets, at = [], 0
                    for piece in pieces:
                        offsets.append(at)
                        at += len(piece)
                    choice["logprobs"] = {
                        "text_offset": offsets,
                        "token_logprobs": list(s.token_logprobs),
                        "tokens": pieces,
                        # Only the sampled token: the stand-in does not rank alternatives.
                        "top_logprobs": [
                            {p: lp} for p, lp in zip(pieces, s.token_logprobs, strict=True)
                        ],
                    }
                choice["finish_reason"] = s.finish_reason
                choice["matched_stop"] = s.matched
                choices.append(choice)
        completion_tokens = sum(len(s.token_ids) for group in groups for s in group)
        return {
            "id": uuid.uuid4().hex,
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_dir,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def embeddings(self, body: dict) -> dict:
        if not self.is_embedding:
            raise BadRequest(NOT_EMBEDDING)
        inp = body.get("input")
        texts = [inp] if isinstance(inp, str) else inp
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise BadRequest("`input` must be a string or a non-empty list of strings")
        with self._model_lock:
            vectors = self.generator.embed(texts)
            tokens = sum(len(self.generator.tokenizer(t).input_ids) for t in texts)
        return {
            "object": "list",
            "data": [
                {"index": i, "object": "embedding", "embedding": v.tolist()}
                for i, v in enumerate(vectors)
            ],
            "model": self.model_dir,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _sampling_params(sp: Any) -> tuple[SamplingParams | None, bool, int, int]:
    """SGLang ``sampling_params`` → (our params or None for 0 new tokens, no_stop_trim, n, seed)."""
    if not isinstance(sp, dict):
        raise BadRequest(f"sampling_params must be an object, got {type(sp).__name__}")
    unknown = sorted(set(sp) - KNOWN_SAMPLING_KEYS)
    if unknown:
        raise BadRequest(f"SamplingParams.__init__() got unexpected keyword argument(s) {unknown}")
    stop = sp.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    n = int(sp.get("n", 1))
    max_new = int(sp.get("max_new_tokens", 128))
    try:
        params = SamplingParams(
            n=n,
            temperature=float(sp.get("temperature", 1.0)),
            top_p=float(sp.get("top_p", 1.0)),
            max_new_tokens=max(max_new, 1),
            stop=stop,
        )
    except ValueError as e:
        raise BadRequest(str(e)) from None
    seed = sp.get("sampling_seed", DEFAULT_SAMPLING_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int):  # SamplingParams.verify: an integer
        raise BadRequest(f"sampling_seed must be an integer, got {seed!r}")
    no_stop_trim = bool(sp.get("no_stop_trim", False))
    return (None if max_new == 0 else params), no_stop_trim, n, seed


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like uvicorn
    server_version = "uvicorn"
    sys_version = ""

    @property
    def standin(self) -> StandinServer:
        return self.server.standin  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s - %s", self.address_string(), format % args)

    def _send(self, status: int, payload: Any = None) -> None:
        body = (
            b""
            if payload is None
            else json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        )
        self.send_response(status)
        if payload is not None:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message}})

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def do_GET(self) -> None:
        s = self.standin
        if self.path in ("/health", "/health_generate"):
            if s._load_error is not None:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE)
            else:
                self._send(HTTPStatus.OK if s.ready() else HTTPStatus.SERVICE_UNAVAILABLE)
        elif self.path == "/get_model_info":
            self._send(HTTPStatus.OK, s.model_info())
        elif self.path in ("/server_info", "/get_server_info"):
            self._send(HTTPStatus.OK, s.server_info())
        elif self.path == "/v1/models":
            self._send(HTTPStatus.OK, s.models())
        elif self.path == "/_standin/requests":
            with s._lock:
                self._send(HTTPStatus.OK, [asdict(r) for r in s.requests])
        else:
            self._error(HTTPStatus.NOT_FOUND, "Not Found")

    def do_POST(self) -> None:
        s = self.standin
        try:
            body = self._body()
        except ValueError as e:
            self._error(HTTPStatus.BAD_REQUEST, f"invalid JSON body: {e}")
            return
        if self.path == "/_standin/inject":
            body = body or {}
            s.inject(fail=body.get("fail"), drop=body.get("drop"), delay_s=body.get("delay_s"))
            self._send(
                HTTPStatus.OK, {"fail": s.fail_first, "drop": s.drop_first, "delay_s": s.delay_s}
            )
            return
        handlers = {
            "/generate": s.generate,
            "/encode": s.encode,
            "/v1/completions": s.completions,
            "/v1/embeddings": s.embeddings,
        }
        if self.path not in handlers:
            self._error(HTTPStatus.NOT_FOUND, "Not Found")
            return
        fault = s._take_fault()
        if fault == "drop":
            s._record(self.path, body, None)
            # Close without a response: the client sees "server disconnected".
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault == "fail" or not s.ready():
            s._record(self.path, body, HTTPStatus.SERVICE_UNAVAILABLE)
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "The server is not ready (stand-in).")
            return
        if s.delay_s:
            time.sleep(s.delay_s)
        try:
            result = handlers[self.path](body if isinstance(body, dict) else {})
        except BadRequest as e:
            s._record(self.path, body, HTTPStatus.BAD_REQUEST)
            self._error(HTTPStatus.BAD_REQUEST, str(e))
            return
        except Exception as e:  # a bug here must reach the client, not hang it
            log.exception("stand-in: %s failed", self.path)
            s._record(self.path, body, HTTPStatus.INTERNAL_SERVER_ERROR)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
            return
        s._record(self.path, body, HTTPStatus.OK, result)
        self._send(HTTPStatus.OK, result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m burnqed.policy.standin",
        description="Stand-in SGLang server (/generate, /encode, /health, /get_model_info, /server_info) on a local model.",
    )
    p.add_argument(
        "--model", "--model-path", dest="model", required=True, help="HF model directory"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--is-embedding", action="store_true", help="serve /encode instead of /generate")
    p.add_argument(
        "--fail-first",
        type=int,
        default=0,
        metavar="N",
        help="answer the next N model requests 503",
    )
    p.add_argument(
        "--drop-first",
        type=int,
        default=0,
        metavar="N",
        help="drop the next N connections unanswered",
    )
    p.add_argument(
        "--delay",
        type=float,
        default=0.0,
        metavar="S",
        help="delay every model answer by S seconds",
    )
    p.add_argument(
        "--startup-s", type=float, default=0.0, metavar="S", help="answer /health 503 for S seconds"
    )
    p.add_argument("--version-string", default=STANDIN_VERSION, metavar="V",
                   help="the SGLang version /server_info states")  # fmt: skip
    p.add_argument("--enable-deterministic-inference", action="store_true",
                   help="state deterministic inference in /server_info, as SGLang with the flag")  # fmt: skip
    p.add_argument("--disable-radix-cache", action="store_true", help="accepted, as SGLang's")
    args = p.parse_args(argv)
    if not Path(args.model).is_dir():
        p.error(f"--model {args.model}: not a model directory")  # exit 2 before the slow imports
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s"
    )

    server = StandinServer(
        args.model,
        host=args.host,
        port=args.port,
        is_embedding=args.is_embedding,
        fail_first=args.fail_first,
        drop_first=args.drop_first,
        delay_s=args.delay,
        startup_s=args.startup_s,
        version=args.version_string,
        deterministic=args.enable_deterministic_inference,
    )
    stopping = threading.Event()
    # SIGTERM (the launcher's stop) and Ctrl-C both end the process cleanly.
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    server.start()
    server._loaded.wait()
    if server._load_error is not None:
        server.stop()
        return 1
    log.info("The server is fired up and ready to roll!")
    stopping.wait()
    log.info("shutting down")
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
