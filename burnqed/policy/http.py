"""HTTP policy backends: SGLang's native API and the OpenAI-compatible API (vLLM or SGLang).

Both send explicit sampling parameters (a server's defaults would otherwise come from the model's
``generation_config.json``), sum per-token logprobs into the candidate's score (no server returns a
cumulative one over HTTP), and retry with exponential back-off on 503 and connection errors until
``retry_total_s`` has passed, then raise :class:`ServerError` naming the URL and the last failure.
Wire formats: ``reference/inference-servers.md`` §3–§6.  Every candidate is its own sample with its
own seed (``burnqed.policy``: reproducible sampling; §3.3: neither server makes the ``n`` samples of
one request independent draws keyed by candidate):

- :class:`SGLangGenerator`: ``POST /generate`` with one ``text`` item per candidate and a list of
  ``sampling_params``, each with ``n = 1`` and the candidate's own ``sampling_seed`` (SGLang gives all
  ``n`` copies of one item the same seed, hence identical samples in deterministic mode); answered
  in order, ``out[i*n + j]`` is candidate ``j`` of prompt ``i``.  ``return_logprob`` and
  ``logprob_start_len = -1``; the logprob is the sum of ``meta_info.output_token_logprobs[k][0]``.
  The seed acts only when the server runs with ``--enable-deterministic-inference`` (the GPU
  profile's command; ``docs/cloud.md``).  ``POST /encode`` on the embedding server.
- :class:`OpenAIGenerator` (vLLM): one ``POST /v1/completions`` per candidate (``n = 1``, its own
  ``seed``), all of a call's requests in flight at once so the server batches them itself; the
  logprob is the sum of ``logprobs.token_logprobs``.  With ``VLLM_BATCH_INVARIANT=1`` on the server a
  candidate does not depend on what else it was batched with.  Greedy requests (temperature 0) ask
  for one sample per prompt and repeat it ``n`` times.  ``POST /v1/embeddings`` on the embedding
  (pooling) server.

Aborted samples (``finish_reason`` abort) are dropped with a warning, so ``Generation.raw_count``
falls below ``n``.  ``server_identity()`` is what a server states about itself — version, model,
the settings that decide its tokens, whether it is deterministic (:func:`sglang_identity`,
:func:`vllm_identity`) — for the expansion cache's key (:func:`burnqed.search.cache.policy_settings`).
Example::

    from burnqed.policy import SamplingParams
    from burnqed.policy.http import SGLangGenerator, wait_for_health

    wait_for_health("http://127.0.0.1:30000", timeout_s=900)
    gen = SGLangGenerator("http://127.0.0.1:30000", model_id="models/iter_1/merged")
    seeds = [candidate_seeds(0, "thm", 0, f"node{i}", 8) for i in range(len(prompts))]
    groups = gen.generate(prompts, SamplingParams(n=8, temperature=0.8, stop=("```",)), seeds)
    gen.close()
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from burnqed.policy import (
    SEED_BITS,
    Candidate,
    Generation,
    SamplingParams,
    check_seeds,
    generation_of,
    trim_completion,
)

log = logging.getLogger(__name__)

# Failures worth waiting out: the server is starting, overloaded or restarting.
RETRY_STATUS = frozenset({502, 503, 504})
RETRY_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
)
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0
MAX_CONCURRENT_REQUESTS = 64  # OpenAI path: requests of one call in flight at once


def _seeds(seeds: Sequence[Sequence[int]] | None, prompts: int, n: int) -> list[list[int]]:
    """The caller's per-candidate seeds, or fresh random ones (an unseeded call)."""
    check_seeds(seeds, prompts, n)
    if seeds is None:
        return [[secrets.randbits(SEED_BITS) for _ in range(n)] for _ in range(prompts)]
    return [[int(x) for x in s] for s in seeds]


class ServerError(RuntimeError):
    """An inference server failed, gave a malformed answer, or stayed unavailable too long."""


class _Client:
    """One ``httpx.Client`` plus the bounded retry loop both backends share."""

    def __init__(
        self,
        url: str,
        *,
        request_timeout_s: float,
        retry_total_s: float,
        max_connections: int = MAX_CONCURRENT_REQUESTS,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry_total_s = retry_total_s
        # Thread-safe: the OpenAI path sends a call's requests from several threads at once.
        self.http = httpx.Client(
            timeout=httpx.Timeout(request_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=max_connections),
        )

    def request(self, method: str, path: str, payload: dict | None = None) -> Any:
        """The decoded JSON answer; retries 5xx-unavailable and connection errors, then raises."""
        url = self.url + path
        deadline = time.monotonic() + self.retry_total_s
        delay, attempt = FIRST_BACKOFF_S, 0
        while True:
            attempt += 1
            try:
                resp = self.http.request(method, url, json=payload)
            except RETRY_ERRORS as e:
                failure = f"{type(e).__name__}: {e}"
            except httpx.TimeoutException as e:
                # A request that outlived request_timeout_s is not retried: the server is stuck or
                # the batch too large, and resending it would only double the load.
                raise ServerError(
                    f"{method} {url}: no answer within the request timeout ({e})"
                ) from e
            else:
                if resp.status_code in RETRY_STATUS:
                    failure = f"HTTP {resp.status_code}: {resp.text[:200]}"
                elif resp.status_code >= 400:
                    raise ServerError(f"{method} {url}: HTTP {resp.status_code}: {resp.text[:500]}")
                else:
                    try:
                        return resp.json()
                    except ValueError as e:
                        raise ServerError(
                            f"{method} {url}: answer is not JSON: {resp.text[:200]!r}"
                        ) from e
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerError(
                    f"{method} {url}: server unavailable after {attempt} attempts over "
                    f"{self.retry_total_s:g} s; last failure: {failure}"
                )
            log.warning(
                "%s %s: %s; retrying in %.1f s", method, url, failure, min(delay, remaining)
            )
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, MAX_BACKOFF_S)

    def close(self) -> None:
        self.http.close()


def wait_for_health(
    url: str,
    *,
    timeout_s: float,
    path: str = "/health",
    alive: Callable[[], None] | None = None,
    poll_s: float = 0.25,
) -> None:
    """Poll ``url + path`` until it answers 200; 503 and refused connections mean "starting".

    ``alive`` is called between polls and may raise (the launcher checks its process there), so a
    server that died is reported at once instead of after the whole timeout.
    """
    target = url.rstrip("/") + path
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    with httpx.Client(timeout=httpx.Timeout(10.0)) as http:
        while True:
            if alive is not None:
                alive()
            try:
                resp = http.get(target)
                if resp.status_code == 200:
                    return
                last = f"HTTP {resp.status_code}"
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() >= deadline:
                raise ServerError(f"GET {target}: not healthy within {timeout_s:g} s; last: {last}")
            time.sleep(poll_s)


# What the expansion cache keys an SGLang server's answers on, of the server arguments its
# /server_info (/get_server_info before SGLang renamed it) states (asdict(ServerArgs) plus
# "version"; reference/inference-servers.md §6): each decides the tokens a seeded item samples.
SGLANG_KEYED_ARGS = (
    # the weights and tokenizer: path, revision, the format and quantisation they load with
    "model_path", "revision", "tokenizer_path", "load_format", "quantization",
    # the arithmetic: dtypes, kernels and how the model is split over GPUs
    "dtype", "kv_cache_dtype", "attention_backend", "sampling_backend", "device",
    "tp_size", "pp_size", "dp_size", "ep_size",
    # decoding: speculative decoding changes what is sampled; the seed of unseeded items
    "speculative_algorithm", "random_seed",
    # determinism: batch-invariant kernels, and the radix cache (issue #22819 with them)
    "enable_deterministic_inference", "disable_radix_cache",
)  # fmt: skip


def sglang_identity(client: _Client) -> dict[str, Any]:
    """What an SGLang server states about itself: ``version``, the :data:`SGLANG_KEYED_ARGS`
    (``args``), ``weight_version`` (``/get_model_info``: a hot-swapped checkpoint's label),
    ``deterministic`` (its ``enable_deterministic_inference``) and ``hardware``: None, since
    SGLang states no device name (``device`` is ``"cuda"``).  ``error`` when it answers neither
    endpoint."""
    info, last = None, ""
    for path in ("/server_info", "/get_server_info"):
        try:
            info = client.request("GET", path)
            break
        except ServerError as e:
            last = str(e)
    if not isinstance(info, dict):
        return {"server": "sglang", "error": last if info is None else "server info is not a dict"}
    model: dict[str, Any] = {}
    with contextlib.suppress(ServerError):
        answer = client.request("GET", "/get_model_info")
        model = answer if isinstance(answer, dict) else {}
    flag = info.get("enable_deterministic_inference")
    return {
        "server": "sglang",
        "version": info.get("version"),
        "args": {k: info.get(k) for k in SGLANG_KEYED_ARGS},
        "weight_version": model.get("weight_version", info.get("weight_version")),
        "deterministic": flag if isinstance(flag, bool) else None,
        "hardware": None,
    }


def vllm_identity(client: _Client, served: str | None) -> dict[str, Any]:
    """What a vLLM server states about itself: ``version`` (``/version``) and the served model's
    ``id`` and ``root`` (its path; ``/v1/models``).  It states neither its hardware nor whether it
    runs batch-invariant (``VLLM_BATCH_INVARIANT`` is the server's environment): ``deterministic``
    and ``hardware`` are None.  An SGLang server behind the OpenAI API is asked as SGLang."""
    try:
        info = client.request("GET", "/server_info")
        if isinstance(info, dict) and "enable_deterministic_inference" in info:
            return sglang_identity(client)
    except ServerError:
        pass
    out: dict[str, Any] = {"server": "vllm", "deterministic": None, "hardware": None}
    try:
        version = client.request("GET", "/version")
        models = client.request("GET", "/v1/models")
    except ServerError as e:
        return {**out, "error": str(e)}
    out["version"] = version.get("version") if isinstance(version, dict) else None
    listed = models.get("data") if isinstance(models, dict) else None
    listed = [m for m in listed or [] if isinstance(m, dict)]
    chosen = [m for m in listed if m.get("id") == served] or listed[:1]
    out["model"] = {k: chosen[0].get(k) for k in ("id", "root")} if chosen else None
    return out


def _finish(reason: Any) -> str:
    """SGLang's ``{"type": ...}`` dict or OpenAI's string → "stop" | "length" | "abort"."""
    kind = reason.get("type") if isinstance(reason, dict) else reason
    return kind if kind in ("stop", "length", "abort") else "stop"


def _sum_logprobs(values: Sequence[Any], where: str) -> float:
    if any(v is None for v in values):
        raise ServerError(f"{where}: a generated token has no logprob: {list(values)[:8]}")
    return float(sum(values))


def _group(raw: list[list[Candidate | None]], url: str) -> list[Generation]:
    out = []
    for i, samples in enumerate(raw):
        aborted = sum(c is None for c in samples)
        if aborted:
            log.warning("%s: %d of %d samples of prompt %d aborted", url, aborted, len(samples), i)
        out.append(generation_of(samples))
    return out


class SGLangGenerator:
    """:class:`~burnqed.policy.TacticGenerator` over SGLang's native ``/generate`` and ``/encode``:
    one request item per candidate, each with its own ``sampling_seed`` (module docstring)."""

    candidates_independent_of_n = True  # one request item per candidate

    def __init__(
        self,
        url: str,
        *,
        model_id: str,
        request_timeout_s: float = 300.0,
        retry_total_s: float = 120.0,
        embedding_url: str | None = None,
    ) -> None:
        self.model_id = model_id
        self.url = url.rstrip("/")
        self._client = _Client(
            url, request_timeout_s=request_timeout_s, retry_total_s=retry_total_s
        )
        self._embed_client = (
            _Client(embedding_url, request_timeout_s=request_timeout_s, retry_total_s=retry_total_s)
            if embedding_url
            else None
        )

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        return _group(self.raw_candidates(prompts, params, seeds), f"{self.url}/generate")

    def raw_candidates(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[list[Candidate | None]]:
        """Per prompt, its ``n`` candidates in seed order before de-duplication (None: aborted)."""
        prompts = list(prompts)
        if not prompts:
            return []
        payload = self.payload(prompts, params, seeds)
        answer = self._client.request("POST", "/generate", payload)
        items = [answer] if isinstance(answer, dict) else answer
        where = f"{self.url}/generate"
        per = 1 if params.temperature == 0 else params.n  # items per prompt
        if not isinstance(items, list) or len(items) != len(prompts) * per:
            got = len(items) if isinstance(items, list) else type(items).__name__
            raise ServerError(f"{where}: expected {len(prompts)} × {per} results, got {got}")
        raw: list[list[Candidate | None]] = []
        for i in range(len(prompts)):
            cands = [self._candidate(items[i * per + j], params, where) for j in range(per)]
            raw.append(cands * (params.n // per))
        return raw

    @staticmethod
    def payload(
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> dict:
        """The ``/generate`` request: one item per candidate (``n = 1``, its own ``sampling_seed``);
        greedy decoding (temperature 0) needs no seed and one item per prompt, repeated ``n`` times
        by :meth:`generate` (raw counts and tokens stay those of ``n`` samples)."""
        n, greedy = params.n, params.temperature == 0
        all_seeds = _seeds(seeds, len(prompts), n)
        texts, sampling = [], []
        for prompt, own in zip(prompts, all_seeds, strict=True):
            for j in range(1 if greedy else n):
                sp: dict[str, Any] = {
                    "n": 1,
                    "temperature": params.temperature,
                    "top_p": params.top_p,
                    "max_new_tokens": params.max_new_tokens,
                    "stop": list(params.stop),
                }
                if not greedy:
                    sp["sampling_seed"] = own[j]
                texts.append(prompt)
                sampling.append(sp)
        return {
            "text": texts,  # a list: SGLang answers a list, one result per item, in order
            "sampling_params": sampling,
            "return_logprob": True,
            "logprob_start_len": -1,  # logprobs of the output tokens only
        }

    @staticmethod
    def _candidate(item: dict, params: SamplingParams, where: str) -> Candidate | None:
        try:
            meta = item["meta_info"]
            finish = _finish(meta.get("finish_reason"))
            if finish == "abort":
                log.warning("%s: sample aborted: %s", where, meta.get("finish_reason"))
                return None
            token_lps = [t[0] for t in meta["output_token_logprobs"]]
            return Candidate(
                text=trim_completion(item["text"], params.stop),
                logprob=_sum_logprobs(token_lps, where),
                num_tokens=len(token_lps),
                finish_reason=finish,
            )
        except (KeyError, TypeError, IndexError) as e:
            raise ServerError(f"{where}: malformed result ({e!r}): {str(item)[:300]}") from e

    def server_identity(self) -> dict[str, Any]:
        """What the server states about itself (:func:`sglang_identity`)."""
        return sglang_identity(self._client)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if self._embed_client is None:
            raise ServerError(
                f"{self.url}: no embedding server (/encode needs a separate --is-embedding server): "
                "set policy.embedding_server_url or open the generator with embeddings=True"
            )
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        where = f"{self._embed_client.url}/encode"
        answer = self._embed_client.request(
            "POST", "/encode", {"text": texts[0] if len(texts) == 1 else texts}
        )
        items = [answer] if isinstance(answer, dict) else answer
        if not isinstance(items, list) or len(items) != len(texts):
            raise ServerError(f"{where}: expected {len(texts)} embeddings, got {str(answer)[:200]}")
        try:
            return np.asarray([it["embedding"] for it in items], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise ServerError(f"{where}: malformed embedding answer ({e!r})") from e

    def close(self) -> None:
        self._client.close()
        if self._embed_client is not None:
            self._embed_client.close()


class OpenAIGenerator:
    """:class:`~burnqed.policy.TacticGenerator` over ``/v1/completions`` and ``/v1/embeddings``: one
    completion request per candidate with its own ``seed``, up to ``max_concurrent_requests`` in
    flight at once (module docstring).

    The request's ``model`` is the served model name: ``served_model`` if given, else ``model_id``
    when ``/v1/models`` lists it, else the only model listed.
    """

    candidates_independent_of_n = True  # one request per candidate

    def __init__(
        self,
        url: str,
        *,
        model_id: str,
        served_model: str | None = None,
        request_timeout_s: float = 300.0,
        retry_total_s: float = 120.0,
        embedding_url: str | None = None,
        max_concurrent_requests: int = MAX_CONCURRENT_REQUESTS,
    ) -> None:
        if max_concurrent_requests < 1:
            raise ValueError(f"max_concurrent_requests must be >= 1, got {max_concurrent_requests}")
        self.model_id = model_id
        self.url = url.rstrip("/")
        self._served = served_model
        self._embed_served = served_model
        self._client = _Client(
            url,
            request_timeout_s=request_timeout_s,
            retry_total_s=retry_total_s,
            max_connections=max_concurrent_requests,
        )
        self._pool = ThreadPoolExecutor(
            max_workers=max_concurrent_requests, thread_name_prefix="burnqed-openai"
        )
        self._embed_client = (
            _Client(embedding_url, request_timeout_s=request_timeout_s, retry_total_s=retry_total_s)
            if embedding_url
            else None
        )

    def _served_model(self, client: _Client) -> str:
        answer = client.request("GET", "/v1/models")
        try:
            ids = [m["id"] for m in answer["data"]]
        except (KeyError, TypeError) as e:
            raise ServerError(
                f"{client.url}/v1/models: malformed model list: {str(answer)[:200]}"
            ) from e
        if self.model_id in ids:
            return self.model_id
        if len(ids) == 1:
            log.info("%s serves %r; using it for model %r", client.url, ids[0], self.model_id)
            return ids[0]
        raise ServerError(
            f"{client.url}/v1/models: {self.model_id!r} is not served (serving {ids})"
        )

    def server_identity(self) -> dict[str, Any]:
        """What the server states about itself (:func:`vllm_identity`)."""
        return vllm_identity(self._client, self._served or self.model_id)

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        return _group(self.raw_candidates(prompts, params, seeds), f"{self.url}/v1/completions")

    def raw_candidates(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[list[Candidate | None]]:
        """Per prompt, its ``n`` candidates in seed order before de-duplication (None: aborted)."""
        prompts = list(prompts)
        if not prompts:
            return []
        if self._served is None:
            self._served = self._served_model(self._client)
        where = f"{self.url}/v1/completions"
        requests = self.payloads(self._served, prompts, params, seeds)
        answers = list(
            self._pool.map(lambda p: self._client.request("POST", "/v1/completions", p), requests)
        )
        per = len(requests) // len(prompts)  # requests per prompt: n, or 1 when greedy
        raw: list[list[Candidate | None]] = []
        for i in range(len(prompts)):
            cands = []
            for answer in answers[i * per : (i + 1) * per]:
                try:
                    (choice,) = answer["choices"]
                except (KeyError, TypeError, ValueError) as e:
                    raise ServerError(
                        f"{where}: expected one choice per request ({e!r}): {str(answer)[:300]}"
                    ) from e
                cands.append(self._candidate(choice, params, where))
            raw.append(cands * (params.n // per))
        return raw

    @staticmethod
    def payloads(
        model: str,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[dict]:
        """One ``/v1/completions`` request per candidate (``n = 1``, its own ``seed``), prompt-major;
        greedy decoding: one unseeded request per prompt (vLLM refuses ``n > 1`` without sampling,
        and the ``n`` samples would be identical anyway)."""
        greedy = params.temperature == 0
        all_seeds = _seeds(seeds, len(prompts), params.n)
        out = []
        for prompt, own in zip(prompts, all_seeds, strict=True):
            for j in range(1 if greedy else params.n):
                payload: dict[str, Any] = {
                    "model": model,
                    "prompt": prompt,
                    "n": 1,
                    "max_tokens": params.max_new_tokens,
                    "temperature": params.temperature,
                    "top_p": params.top_p,
                    "stop": list(params.stop),
                    "logprobs": 1,  # the sampled token's logprob (plus one alternative)
                }
                if not greedy:
                    payload["seed"] = own[j]
                out.append(payload)
        return out

    @staticmethod
    def _candidate(choice: dict, params: SamplingParams, where: str) -> Candidate | None:
        try:
            finish = _finish(choice.get("finish_reason"))
            if finish == "abort":
                log.warning("%s: choice %s aborted", where, choice.get("index"))
                return None
            token_lps = choice["logprobs"]["token_logprobs"]
            return Candidate(
                text=trim_completion(choice["text"], params.stop),
                logprob=_sum_logprobs(token_lps, where),
                num_tokens=len(token_lps),
                finish_reason=finish,
            )
        except (KeyError, TypeError) as e:
            raise ServerError(f"{where}: malformed choice ({e!r}): {str(choice)[:300]}") from e

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if self._embed_client is None:
            raise ServerError(
                f"{self.url}: no embedding server (a pooling server is separate): "
                "set policy.embedding_server_url or open the generator with embeddings=True"
            )
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if self._embed_served is None:
            self._embed_served = self._served_model(self._embed_client)
        where = f"{self._embed_client.url}/v1/embeddings"
        answer = self._embed_client.request(
            "POST", "/v1/embeddings", {"model": self._embed_served, "input": texts}
        )
        try:
            data = sorted(answer["data"], key=lambda d: d["index"])
            vectors = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise ServerError(f"{where}: malformed answer ({e!r}): {str(answer)[:300]}") from e
        if len(vectors) != len(texts):
            raise ServerError(f"{where}: expected {len(texts)} embeddings, got {len(vectors)}")
        return vectors

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
        if self._embed_client is not None:
            self._embed_client.close()
