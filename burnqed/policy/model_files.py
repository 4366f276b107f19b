"""Check a Hugging Face model directory before loading it: fail in milliseconds, naming the file.

A 7B load takes minutes and fails deep inside transformers with a message about a tensor or a hub
repository; :func:`check_model_dir` reads only ``config.json``, the tokenizer files' names and each
safetensors file's header, and raises :class:`ModelFilesError` naming the broken file.  A model
argument that *looks like a path* (``models/base``, ``./m``, ``/abs/m``, ``~/m``: anything but a bare
``org/name`` hub id) is always treated as a path — never looked up on a hub — and
:func:`is_path_like` is the rule both this check and the loaders (``local_files_only=True``) follow.

Example::

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> try:
    ...     check_model_dir(d)
    ... except ModelFilesError as e:
    ...     print(str(e).split(": ", 1)[1])
    no config.json (not a Hugging Face model directory)
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from burnqed.config import InputError

# A tokenizer directory holds one of these (fast tokenizer, SentencePiece, BPE vocabulary).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
_PROJECT_DIRS = ("models", "data", "results")  # the SPEC §3 layout: never hub organisations here


class ModelFilesError(InputError):
    """A model directory is missing or broken; the message names the file."""


def is_path_like(model: str | Path) -> bool:
    """True unless ``model`` reads as a hub id: ``org/name`` (or a legacy bare ``name``) that is not
    on disk.  ``models/base`` counts as a path (the project's own folders, or a first component that
    is a local directory), as does anything starting with ``/``, ``.`` or ``~`` or with more parts."""
    text = str(model)
    if isinstance(model, Path) or Path(text).expanduser().exists():
        return True
    if text.startswith(("/", ".", "~")) or text.endswith("/") or "\\" in text:
        return True
    parts = text.split("/")
    if len(parts) > 2:
        return True
    return len(parts) == 2 and (parts[0] in _PROJECT_DIRS or Path(parts[0]).is_dir())


def _check_safetensors(path: Path) -> None:
    """The 8-byte header length, the JSON header, and every tensor's bytes present."""
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise ModelFilesError(f"{path}: truncated safetensors file ({size} bytes)")
            (n,) = struct.unpack("<Q", raw)
            if n > size - 8:
                raise ModelFilesError(
                    f"{path}: truncated safetensors file (header of {n} bytes, file {size})"
                )
            header = json.loads(f.read(n))
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelFilesError(f"{path}: not a safetensors file ({e})") from None
    end = max(
        (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0
    )
    if 8 + n + end > size:
        raise ModelFilesError(
            f"{path}: truncated safetensors file ({size} bytes, its header needs {8 + n + end})"
        )


def check_model_dir(path: str | Path, *, tokenizer: bool = True) -> None:
    """Raise :class:`ModelFilesError` naming the file unless ``path`` looks loadable."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelFilesError(f"{path}: no such model directory")
    if not path.is_dir():
        raise ModelFilesError(f"{path}: not a directory (expected a Hugging Face model directory)")
    config = path / "config.json"
    if not config.is_file():
        raise ModelFilesError(f"{config}: no config.json (not a Hugging Face model directory)")
    try:
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelFilesError(f"{config}: not valid JSON ({e})") from None
    if not isinstance(cfg, dict) or "model_type" not in cfg:
        raise ModelFilesError(f"{config}: no `model_type` key (not a transformers config)")
    if tokenizer and not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ModelFilesError(
            f"{path}: no tokenizer (none of {', '.join(TOKENIZER_FILES)}); save it beside the weights"
        )
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(
                set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            )
        except (ValueError, KeyError, AttributeError) as e:
            raise ModelFilesError(f"{index}: not a safetensors index ({e!r})") from None
        for name in shards:
            if not (path / name).is_file():
                raise ModelFilesError(f"{path / name}: missing (listed in {index.name})")
    else:
        shards = sorted(p.name for p in path.glob("*.safetensors"))
    if not shards and not any(path.glob("pytorch_model*.bin")):
        raise ModelFilesError(f"{path}: no weights (*.safetensors or pytorch_model*.bin)")
    for name in shards:
        _check_safetensors(path / name)


__all__ = ["TOKENIZER_FILES", "ModelFilesError", "check_model_dir", "is_path_like"]
