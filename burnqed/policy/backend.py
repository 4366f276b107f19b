"""Build the configured policy backend for the span of a stage: ``open_generator``.

``policy.backend`` picks the implementation: ``transformers`` (in-process), ``sglang`` (native
``/generate`` + ``/encode``) or ``openai`` (``/v1/completions`` + ``/v1/embeddings``, vLLM or SGLang).
For the HTTP backends a configured ``server_url`` is used as is; when it is null, ``server_command``
is started by the launcher (SGLang lives in its own environment, so the command names its own
interpreter), checked with one real request, and stopped when the ``with`` block ends — on error too.
Embeddings come from a second server (an SGLang ``--is-embedding`` or vLLM ``--runner pooling``
server cannot generate); it is started only when the caller asks for embeddings.

Example::

    from burnqed.config import PolicyConfig
    from burnqed.policy import SamplingParams
    from burnqed.policy.backend import open_generator

    cfg = PolicyConfig(backend="transformers")
    with open_generator(cfg, "models/base") as gen:
        groups = gen.generate(["```lean4\\n/- tactic state:\\n  ⊢ True\\n-/\\n```\\n"],
                              SamplingParams(n=4, stop=("```",)))
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from burnqed.policy import SamplingParams, TacticGenerator

if TYPE_CHECKING:
    from burnqed.config import PolicyConfig

log = logging.getLogger(__name__)

BACKENDS = ("transformers", "sglang", "openai")


@contextlib.contextmanager
def open_generator(
    cfg: PolicyConfig,
    model: str,
    *,
    embeddings: bool = False,
    log_to: Path | logging.Logger | None = None,
) -> Iterator[TacticGenerator]:
    """The configured backend for ``model`` (an HF directory, or the name a server serves).

    ``embeddings=True`` also provides ``embed`` on the HTTP backends, launching
    ``embedding_server_command`` when no ``embedding_server_url`` is set.  ``log_to`` receives the
    launched servers' output (default: this module's logger).
    """
    from burnqed.policy.model_files import check_model_dir, is_path_like

    # A broken or absent model directory fails here, naming the file, before torch is imported,
    # weights are read or a server is launched (the in-process backend checks again itself).
    if cfg.server_url is None and is_path_like(model):
        check_model_dir(model)
    if cfg.backend == "transformers":
        from burnqed.policy.transformers_backend import TransformersGenerator

        gen = TransformersGenerator(
            model,
            device=cfg.device,
            dtype=cfg.dtype,
            pooling=cfg.pooling,
            shared_prefill=cfg.shared_prefill,
        )
        try:
            yield gen
        finally:
            gen.close()
        return
    if cfg.backend not in BACKENDS:
        raise ValueError(
            f"policy.backend: unknown backend {cfg.backend!r}; expected one of {BACKENDS}"
        )

    from burnqed.policy.http import OpenAIGenerator, SGLangGenerator
    from burnqed.policy.launcher import ServerProcess

    server_log = log_to if log_to is not None else log
    with contextlib.ExitStack() as stack:
        launched: list[ServerProcess] = []

        def launch(command: Sequence[str] | None, key: str) -> str:
            if not command:
                raise ValueError(f"{key}: no server URL is configured and no command to start one")
            server = ServerProcess(command, model=model, log=server_log)
            stack.callback(server.stop)  # registered first: stopped on any error below
            server.start()
            launched.append(server)
            return server.url

        url = cfg.server_url or launch(cfg.server_command, "policy.server_command")
        embedding_url = cfg.embedding_server_url
        if embeddings and embedding_url is None:
            embedding_url = launch(cfg.embedding_server_command, "policy.embedding_server_command")
        # Both servers load their weights at the same time; wait for them only now.
        for server in launched:
            server.wait_healthy(cfg.health_timeout_s)
        cls = SGLangGenerator if cfg.backend == "sglang" else OpenAIGenerator
        gen = cls(
            url,
            model_id=model,
            request_timeout_s=cfg.request_timeout_s,
            retry_total_s=cfg.retry_total_s,
            embedding_url=embedding_url,
        )
        stack.callback(gen.close)
        if cfg.server_url is None:
            # A server can answer /health and still die on its first real request (vLLM with an
            # unsupported head_dim): fail here, with the server's log, rather than mid-search.
            gen.generate(["warm-up"], SamplingParams(n=1, temperature=0.0, max_new_tokens=1))
        yield gen
