"""What the ``litemq`` command and its sub-command modules share: the
user-phrased error, opening a queue read-only, and the progress bar.

Its own module so that ``cli.py`` and the modules it registers
(``cli_index.py``, ``cli_litemq.py``, ``cli_ledgerq.py``, ...) both import
it, and none imports the other back.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from litemq.queue import Queue

__all__ = ["KEY_FILE_ENV", "_Failure", "_Progress", "_ProgressCallback", "_key_file", "_open"]


class _Failure(Exception):
    """An error already phrased for the user."""


KEY_FILE_ENV = "LITEMQ_ENCRYPTION_KEY_FILE"


def _key_file() -> str | None:
    """The encryption key file the commands open queues with: the file named by
    ``LITEMQ_ENCRYPTION_KEY_FILE`` (32 bytes or 64 hex digits), if set. An environment
    variable rather than an option, so that no key path lands in shell history or ``ps``."""
    return os.environ.get(KEY_FILE_ENV) or None


def _open(path: str) -> Queue:
    if not Path(path).exists():
        raise _Failure(f"{path}: no such queue (the directory does not exist)")
    return Queue(path, read_only=True, encryption_key_file=_key_file())


class _Progress:
    """A one-line progress bar on stderr, drawn only when it is a terminal."""

    def __init__(self, total: int, label: str = "verifying") -> None:
        self.label = label
        self.total = max(total, 1)
        self.enabled = sys.stderr.isatty()
        self.last = -1

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        pct = min(100, done * 100 // self.total)
        if pct != self.last:
            self.last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar:<25}] {pct:3d}% ({done:,}/{self.total:,})")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


class _ProgressCallback:
    """A ``progress(done, total)`` callback for the engine's long calls: draws a
    `_Progress` bar, made at the first call (when the total is known)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: _Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = _Progress(total, self.label)
        self.bar.update(done)

    def done(self) -> None:
        if self.bar is not None:
            self.bar.done()
