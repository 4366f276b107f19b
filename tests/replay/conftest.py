"""Replay test set-up: the eval tests' pinned toy benchmark and fake backends (recordings are made
by the eval stage itself)."""

from tests.eval.conftest import benchmark, fake_backends  # noqa: F401
