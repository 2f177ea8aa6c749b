"""The command line of the built-in kinds (:mod:`.kinds` registers them): the flags each brings to ``run``,
``index`` and ``tune``, the spec of their values (``from_args``) and back, the ``run`` flags of a spec
(``to_flags``: the command line ``tune`` prints). A flag is listed once, by the first kind that brings it, in
registration order, so ``run --help`` reads as it always did: ``--encoder``/``--backend`` (dense, also read by
the hybrid and the ranker), the BM25 group (also read by the hybrid), the hybrid group.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ..analyzer import DEFAULT_FIELDS, TEXT_ONLY
from .base import DEFAULT_DEPTH
from .bm25 import METHODS as BM25_METHODS, BM25Settings
from .encoders import BACKENDS, DEFAULT_ENCODER, ENCODER_CHOICES
from .hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_NORMALISATION, DEFAULT_RRF_K, FUSION_METHODS, FusionConfig
from .hybrid_specs import default_weights, hybrid_parts, hybrid_spec, parse_encoders, part_name
from .neighbours import NEIGHBOURS
from .registry import BASE_PART, Flag, RetrieverSpec
from .structure import StructureSettings

_BUILTIN = ", ".join(f"{name} (default)" if name == DEFAULT_ENCODER else name for name in ENCODER_CHOICES)
DENSE_FLAGS = (
    Flag(("--encoder",), {"default": None, "metavar": "NAME[,NAME...]",
                          "help": f"dense encoder: {_BUILTIN}, a sentence-transformers model id or folder "
                                  "(e.g. one written by train); a hybrid takes several, comma-separated (use,e5), "
                                  "and fuses BM25 with each of them; 'neighbours' in a hybrid's list adds the "
                                  "neighbours part (use,neighbours)"}),
    Flag(("--backend",), {"choices": BACKENDS, "default": "auto",
                          "help": "how a model folder is run: auto (default: its ONNX export when it has one, made "
                                  "by export-onnx; else torch), torch, or onnx (onnxruntime, no torch needed)"}),
)
BM25_FLAGS = (
    Flag(("--k1",), {"type": float, "default": None, "help": "BM25 k1 (default 1.0)"}, "BM25"),
    Flag(("--b",), {"type": float, "default": None, "help": "BM25 b (default 0.6)"}, "BM25"),
    Flag(("--bm25-method",), {"choices": BM25_METHODS, "default": None, "help": "BM25 idf variant (default lucene)"},
         "BM25"),
    Flag(("--no-headers",), {"action": "store_true",
                             "help": "index the article text only, not its reference and headers"}, "BM25"),
    Flag(("--no-stem",), {"action": "store_true", "help": "no Snowball stemming"}, "BM25"),
)
HYBRID_FLAGS = (
    Flag(("--fusion",), {"choices": FUSION_METHODS, "default": DEFAULT_FUSION,
                         "help": "rrf: reciprocal rank fusion (default); weighted: weighted sum of min-max scores"},
         "hybrid"),
    Flag(("--rrf-k",), {"type": float, "default": None, "help": f"RRF constant k (default {DEFAULT_RRF_K:g})"},
         "hybrid"),
    Flag(("--weights",), {"default": None, "metavar": "W,W,...",
                          "help": "one weight per fused system, BM25 first, then the encoders in --encoder order "
                                  "(e.g. 1,0.5,0.5); default for rrf: 1 for BM25 and for a model folder or hub id, "
                                  "0.5 for a built-in zero-shot encoder (use, e5, minilm) and for neighbours; for "
                                  "weighted: all 1"}, "hybrid"),
    Flag(("--alpha",), {"type": float, "default": None,
                        "help": "weighted fusion of two systems: weight of BM25, 1 - alpha that of the dense "
                                f"retriever (default {DEFAULT_ALPHA:g}); with more systems give --weights"}, "hybrid"),
    Flag(("--structure",), {"action": "store_true", "default": None,
                            "help": "re-score the fused ranking along the corpus' structure: an article's neighbours "
                                    "in its section, its section and the articles citing it lift it (settings decided "
                                    "on a train split: docs/effectiveness.md, \"Structure re-scoring\")"}, "hybrid"),
)


def dests(flags: Sequence[Flag]) -> frozenset[str]:
    return frozenset(f.dest for f in flags)


def fmt(value: object) -> str:
    """A setting as a command line or a table shows it: ``1.5``, ``60`` (``%g``), empty for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# ------------------------------------------------------------------------------ arguments -> spec

def bm25_options(v: Mapping[str, Any]) -> dict[str, object]:
    """BM25's options from the BM25 flags given (absent ones keep BM25Settings' defaults)."""
    out: dict[str, object] = {}
    if v.get("k1") is not None:
        out["k1"] = v["k1"]
    if v.get("b") is not None:
        out["b"] = v["b"]
    if v.get("bm25_method") is not None:
        out["method"] = v["bm25_method"]
    if v.get("no_headers"):
        out["fields"] = ("article",)
    if v.get("no_stem"):
        out["stem"] = False
    return out


def _backend(v: Mapping[str, Any]) -> dict[str, str]:
    backend = v.get("backend") or "auto"
    return {"backend": backend} if backend != "auto" else {}  # auto: the spec of every earlier version


def bm25_from_args(v: Mapping[str, Any]) -> RetrieverSpec:
    return RetrieverSpec(BASE_PART, bm25_options(v))


def dense_from_args(v: Mapping[str, Any]) -> RetrieverSpec:
    encoders = parse_encoders(v.get("encoder"))
    if len(encoders) > 1:
        raise ValueError(f"--retriever dense takes one encoder, not {len(encoders)} ({', '.join(encoders)}); "
                         "to fuse several, use --retriever hybrid --encoder " + ",".join(encoders))
    return RetrieverSpec("dense", ({"encoder": encoders[0]} if v.get("encoder") else {}) | _backend(v))


def hybrid_from_args(v: Mapping[str, Any]) -> RetrieverSpec:
    return hybrid_spec(v.get("encoder"), method=v.get("fusion") or DEFAULT_FUSION, rrf_k=v.get("rrf_k"),
                       weights=v.get("weights"), alpha=v.get("alpha"), bm25_options=bm25_options(v),
                       dense_options=_backend(v), structure=True if v.get("structure") else None)


def ranker_from_args(v: Mapping[str, Any]) -> RetrieverSpec:
    if not v.get("encoder"):
        raise ValueError("--retriever ranker needs its folder: --encoder DIR (written by train --ranker)")
    return RetrieverSpec("ranker", {"model": str(v["encoder"]).strip()})


# ------------------------------------------------------------------------------ spec -> flags

def bm25_flags(spec: RetrieverSpec, notes: list[str]) -> list[str]:
    s = BM25Settings(**spec.options)
    args = []
    if s.k1 != 1.0:
        args += ["--k1", fmt(s.k1)]
    if s.b != 0.6:
        args += ["--b", fmt(s.b)]
    if s.method != "lucene":
        args += ["--bm25-method", s.method]
    if s.fields == TEXT_ONLY:
        args.append("--no-headers")
    elif s.fields != DEFAULT_FIELDS:
        notes.append(f"BM25 fields {'+'.join(s.fields)} are not a run option")
    if not s.stem:
        args.append("--no-stem")
    if not s.stopwords or not s.keep_numbers or s.engine != "bm25s":
        notes.append("BM25 stop words / numbers / engine settings are not run options")
    return args


def encoder_flags(parts: Sequence[RetrieverSpec], notes: list[str]) -> list[str]:
    """``--encoder`` naming dense parts (and the neighbours part) in order; none for ``use`` alone."""
    encoders = []
    for p in parts:
        extra = sorted(set(p.options) - ({"encoder"} if p.kind == "dense" else set()))
        if extra:
            notes.append(f"{p.kind} option(s) {', '.join(extra)} are not run options")
        encoders.append(part_name(p))
    if encoders == ["use"]:
        return []
    return ["--encoder", ",".join(encoders)]


def dense_flags(spec: RetrieverSpec, notes: list[str]) -> list[str]:
    return encoder_flags([spec], notes)


def neighbours_flags(spec: RetrieverSpec, notes: list[str]) -> list[str]:
    encoder_flags([spec], notes)  # its options are not run options
    return []


def ranker_flags(spec: RetrieverSpec, notes: list[str]) -> list[str]:
    return ["--encoder", str(spec.options.get("model", ""))]


def hybrid_flags(spec: RetrieverSpec, notes: list[str]) -> list[str]:
    args: list[str] = []
    parts = hybrid_parts(spec)
    if parts[0].kind != BASE_PART or any(p.kind not in ("dense", NEIGHBOURS) for p in parts[1:]):
        notes.append("run's hybrid is BM25 followed by dense encoders and neighbours; this one is "
                     + " + ".join(p.kind for p in parts))
    else:
        args += bm25_flags(parts[0], notes) + encoder_flags(parts[1:], notes)
    f = FusionConfig.from_options(spec.options, len(parts))  # absent options at their defaults
    if f.method != DEFAULT_FUSION:
        args += ["--fusion", f.method]
    if f.method == "rrf" and float(f.rrf_k) != DEFAULT_RRF_K:
        args += ["--rrf-k", fmt(float(f.rrf_k))]
    if f.method == "rrf":
        # a spec without weights means equal weights, but run's default is default_weights
        effective = f.weights_for(len(parts))
        encoders = [part_name(p) for p in parts[1:]]
        if effective != default_weights(encoders):
            args += ["--weights", ",".join(fmt(w) for w in effective)]
    elif f.weights is not None:
        args += ["--weights", ",".join(fmt(float(w)) for w in f.weights)]
    elif f.alpha is not None and float(f.alpha) != DEFAULT_ALPHA:  # a weighted fusion of two parts
        args += ["--alpha", fmt(float(f.alpha))]
    if f.normalisation != DEFAULT_NORMALISATION:
        notes.append(f"normalisation {f.normalisation!r} is not a run option")
    if int(f.depth) != DEFAULT_DEPTH:
        notes.append(f"fusion depth {f.depth} is not a run option")
    structure = spec.options.get("structure")
    if structure is not None:
        args.append("--structure")
        if StructureSettings.from_options(structure) != StructureSettings():
            notes.append("structure settings other than the defaults are not run options")
    return args
