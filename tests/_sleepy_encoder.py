"""An encoder for worker processes that says which process it runs in and then takes its time
(tests/retrievers/test_parallel_build.py: the workers of a killed build end)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np


class SleepyEncoder:
    """Writes its process id under ``folder``, then sleeps ``seconds`` before embedding a shard."""

    name, dim, normalized, version, max_tokens = "sleepy", 4, True, "1", None

    def __init__(self, folder: str, seconds: float) -> None:
        self.folder, self.seconds = folder, seconds

    def encode_documents(self, texts, batch_size=64, progress=None):
        (Path(self.folder) / str(os.getpid())).write_text("")
        time.sleep(self.seconds)
        return np.ones((len(list(texts)), self.dim), dtype=np.float32) / 2

    encode_queries = encode_documents


class SleepyFactory:
    """A picklable ``worker_factory``."""

    def __init__(self, folder: str, seconds: float) -> None:
        self.folder, self.seconds = folder, seconds

    def __call__(self) -> SleepyEncoder:
        return SleepyEncoder(self.folder, self.seconds)

    def __repr__(self) -> str:
        return f"SleepyFactory({self.folder!r}, {self.seconds})"
