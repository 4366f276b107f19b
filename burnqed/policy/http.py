"""HTTP policy backends: SGLang's native API and the OpenAI-compatible API (vLLM or SGLang).

Both send one request per batch of prompts with explicit sampling parameters (a server's defaults
would otherwise come from the model's ``generation_config.json``), sum per-token logprobs into the
candidate's score (no server returns a cumulative one over HTTP), and retry with exponential
back-off on 503 and connection errors until ``retry_total_s`` has passed, then raise
:class:`ServerError` naming the URL and the last failure.  Wire formats: ``reference/inference-
servers.md`` §3–§6.

- :class:`SGLangGenerator`: ``POST /generate`` with ``text`` (a string for one prompt with ``n == 1``,
  which SGLang answers with one object; otherwise a list, answered prompt-major: ``out[i*n + j]`` is
  sample ``j`` of prompt ``i``), ``return_logprob`` and ``logprob_start_len = -1``; the logprob is the
  sum of ``meta_info.output_token_logprobs[k][0]``.  ``POST /encode`` on the embedding server.
- :class:`OpenAIGenerator`: ``POST /v1/completions`` with a ``prompt`` list, ``n``, ``logprobs`` and
  ``seed``; choices are grouped by ``index // n``; the logprob is the sum of
  ``logprobs.token_logprobs``.  Greedy requests (temperature 0) ask for one sample and repeat it
  ``n`` times, since vLLM rejects ``n > 1`` without sampling.  ``POST /v1/embeddings`` on the
  embedding (pooling) server.

Aborted samples (``finish_reason`` abort) are dropped with a warning, so ``Generation.raw_count``
falls below ``n``.  Example::

    from burnqed.policy import SamplingParams
    from burnqed.policy.http import SGLangGenerator, wait_for_health

    wait_for_health("http://127.0.0.1:30000", timeout_s=900)
    gen = SGLangGenerator("http://127.0.0.1:30000", model_id="models/iter_1/merged")
    groups = gen.generate(prompts, SamplingParams(n=8, temperature=0.8, stop=("```",)))
    gen.close()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np

from burnqed.policy import (
    Candidate,
    Generation,
    SamplingParams,
    dedup_candidates,
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


class ServerError(RuntimeError):
    """An inference server failed, gave a malformed answer, or stayed unavailable too long."""


class _Client:
    """One ``httpx.Client`` plus the bounded retry loop both backends share."""

    def __init__(self, url: str, *, request_timeout_s: float, retry_total_s: float) -> None:
        self.url = url.rstrip("/")
        self.retry_total_s = retry_total_s
        self.http = httpx.Client(timeout=httpx.Timeout(request_timeout_s, connect=10.0))

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
        kept = [c for c in samples if c is not None]
        if len(kept) < len(samples):
            log.warning(
                "%s: %d of %d samples of prompt %d aborted",
                url,
                len(samples) - len(kept),
                len(samples),
                i,
            )
        out.append(dedup_candidates(kept))
    return out


class SGLangGenerator:
    """:class:`~burnqed.policy.TacticGenerator` over SGLang's native ``/generate`` and ``/encode``.

    SGLang's native sampling parameters have no per-request seed, so ``SamplingParams.seed`` is not
    sent (use the OpenAI-compatible path where reproducible sampling matters).
    """

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

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        prompts = list(prompts)
        if not prompts:
            return []
        n = params.n
        payload = {
            # One prompt with n == 1 as a plain string: SGLang answers it with one object.
            "text": prompts[0] if len(prompts) == 1 and n == 1 else prompts,
            "sampling_params": {
                "n": n,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "max_new_tokens": params.max_new_tokens,
                "stop": list(params.stop),
            },
            "return_logprob": True,
            "logprob_start_len": -1,  # logprobs of the output tokens only
        }
        answer = self._client.request("POST", "/generate", payload)
        items = [answer] if isinstance(answer, dict) else answer
        where = f"{self.url}/generate"
        if not isinstance(items, list) or len(items) != len(prompts) * n:
            got = len(items) if isinstance(items, list) else type(items).__name__
            raise ServerError(f"{where}: expected {len(prompts)} × {n} results, got {got}")
        raw: list[list[Candidate | None]] = []
        for i in range(len(prompts)):
            raw.append([self._candidate(items[i * n + j], params, where) for j in range(n)])
        return _group(raw, where)

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
    """:class:`~burnqed.policy.TacticGenerator` over ``/v1/completions`` and ``/v1/embeddings``.

    The request's ``model`` is the served model name: ``served_model`` if given, else ``model_id``
    when ``/v1/models`` lists it, else the only model listed.
    """

    def __init__(
        self,
        url: str,
        *,
        model_id: str,
        served_model: str | None = None,
        request_timeout_s: float = 300.0,
        retry_total_s: float = 120.0,
        embedding_url: str | None = None,
    ) -> None:
        self.model_id = model_id
        self.url = url.rstrip("/")
        self._served = served_model
        self._embed_served = served_model
        self._client = _Client(
            url, request_timeout_s=request_timeout_s, retry_total_s=retry_total_s
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

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        prompts = list(prompts)
        if not prompts:
            return []
        if self._served is None:
            self._served = self._served_model(self._client)
        # vLLM refuses n > 1 with greedy decoding; the n samples would be identical anyway, so
        # ask for one and repeat it (raw_count and token accounting stay those of n samples).
        repeat = params.n if params.temperature == 0 else 1
        n = params.n // repeat
        payload: dict[str, Any] = {
            "model": self._served,
            "prompt": prompts,
            "n": n,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop": list(params.stop),
            "logprobs": 1,  # the sampled token's logprob (plus one alternative)
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        where = f"{self.url}/v1/completions"
        answer = self._client.request("POST", "/v1/completions", payload)
        try:
            choices = sorted(answer["choices"], key=lambda c: c["index"])
        except (KeyError, TypeError) as e:
            raise ServerError(f"{where}: malformed answer ({e!r}): {str(answer)[:300]}") from e
        if [c["index"] for c in choices] != list(range(len(prompts) * n)):
            raise ServerError(
                f"{where}: expected choice indices 0..{len(prompts) * n - 1} for {len(prompts)} × {n}, "
                f"got {[c['index'] for c in choices][:20]}"
            )
        raw: list[list[Candidate | None]] = [[] for _ in prompts]
        for c in choices:
            raw[c["index"] // n].extend([self._candidate(c, params, where)] * repeat)
        return _group(raw, where)

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
        self._client.close()
        if self._embed_client is not None:
            self._embed_client.close()
