"""Effectiveness of the retrievers on a dataset split.

Two tables:

1. **Every system the product offers** (``--systems``, the default except on ``--data sample``)::

    python bench/effectiveness.py --data ../shared/data/frlaw-dev --split test [--systems all] [--json FILE]
        [--baseline bm25] [--tune-split train] [--sub-size 2000] [--sub-seed 0] [--sub-gold test]
        [--model DIR ...] [--model-corpus sub|full|both] [--timing-questions N] [--format markdown|table|latex]

   One row per system: R@100 (primary), R@200, R@500, MAP@100, MRR@100, nDCG@10 (in %, 2 decimals),
   the paired significance of the row against ``--baseline`` (default ``bm25``, the default of
   ``run``) on R@100 and on MAP@100, its build cost and its query cost; ``--json FILE`` writes the
   same (fractions, raw and Holm p-values, wins/ties/losses, costs) beside the table.

   - Groups for ``--systems`` (comma-separated, with row ids): ``bm25`` (shipped default k1=1
     b=0.6 with headers, stems and stop words; no stemming; no headers; neither; no stop words;
     robertson idf; k1/b tuned on ``--tune-split`` by R@100 and by MAP@100 with
     :func:`bsard_demo.tuning.tune_bm25`, the search of ``tune --retriever bm25``, memoised in
     ``<cache>/effectiveness-tune.json``), ``dense`` (``use`` on the full corpus; ``use``, ``e5``,
     ``minilm`` on the sub-corpus), ``fusion`` (BM25 + use: RRF k in {10, 30, 60, 100} x use weight in
     {0.25, 0.5, 0.75, 1}, min-max alpha in {0.3, 0.5, 0.7}, the default hybrid over tuned BM25; on the
     sub-corpus also BM25 + e5, BM25 + minilm, 3-way BM25 + use + e5 over the same RRF grid and
     min-max), ``neighbours`` (label transfer from the training questions,
     :mod:`bsard_demo.retrievers.neighbours`: alone; RRF k=60 with BM25, weight in
     {0.25, 0.5, 0.75, 1, 1.5}; n in {5, 10, 50}; min-max alpha in {0.3, 0.5, 0.7}; 3-way BM25 + use
     + neighbours with use 0.25 or 0.5 over the same weights, and over tuned BM25; on ``--split
     train`` each question is left out of its own neighbours), ``qtext`` (question+description rows; left
     out, with a note, when every extra_description of the split is empty, as in frlaw-dev), ``models``
     (each ``--model DIR``:
     dense, RRF with BM25, RRF with BM25 + use (+ e5 on the sub-corpus), on ``--model-corpus``),
     ``sub`` (every sub-corpus row), ``full`` (every full-corpus row), ``all``; ``-NAME`` leaves a
     group or row out (``all,-sub:minilm``).
   - Sub-corpus (rows labelled ``sub N`` in the corpus column): every gold article of the
     questions of ``--sub-gold`` plus distractors drawn uniformly without replacement from the
     other articles (sorted by id) by ``numpy.random.default_rng(--sub-seed)``, up to
     ``--sub-size`` articles (:func:`sub_corpus`); for the encoders too slow for the full corpus
     on 2 cores (e5 ~1.6 articles/s), with BM25 and use measured on the same sub-corpus. A split
     whose gold the sub-corpus does not hold gets no sub-corpus rows (a note says so).
   - Each part is built once per corpus (cached in ``--cache-dir``, default ``$BSARD_CACHE``) and
     searched once per question set, 1000 deep (the hybrid's depth); fusion rows fuse those
     rankings with the product's :class:`~bsard_demo.retrievers.hybrid.HybridRetriever`
     (:func:`~bsard_demo.retrievers.registry.make_hybrid` on ``hybrid_spec`` specs), so each row
     is exactly what ``run`` gives for that system. Runs are bit-reproducible (sorted ids, seeds):
     a re-run prints the same metric and p columns; the cost columns are timings.
   - Significance: :func:`bsard_demo.evaluation.stats.compare_measure` (``compare``'s function) on the row and
     the baseline of the same corpus, the permutation p (``compare``'s resamples and seed) then
     Holm-adjusted over the rows of that corpus, per measure; ``*``: adjusted p < alpha.
   - Costs: ``build s`` is the cold build in seconds (this run, else the time recorded in
     ``<cache>/effectiveness-builds.json`` when this script, or the note of a build by hand,
     built it; ``?`` unknown); a fusion's is the sum of its parts'. ``query ms`` is the median
     over the split's questions (or ``--timing-questions``) of one ``search(question, 500)``
     call; a fusion's adds its parts' times and its fusion time, question by question.

2. **The six-retriever table** of the sample and synthetic sections (``--retrievers``, the
   default on ``--data sample``)::

    python bench/effectiveness.py [--data sample|hub|DIR] [--split test] [--retrievers NAME ...]
                                  [--format markdown|table|csv|latex] [--with-description] [--cache-dir DIR]

   ``bm25`` (defaults: headers, stemming, lucene k1=1 b=0.6), ``bm25-text-nostem`` (article text
   only, no stemming), ``dense-use``, ``dense-minilm``, ``hybrid-rrf`` (BM25 + dense use,
   reciprocal rank fusion k=60) and ``hybrid-weighted`` (BM25 + dense use, min-max scores,
   alpha=0.5). Hybrids reuse the built BM25 and dense use indexes. Every question of the split is
   searched to depth 500 (question text only unless ``--with-description``, as the CLI's
   ``run``) and scored by :func:`bsard_demo.evaluation.evaluate`; the table is
   :func:`bsard_demo.evaluation.report.render_table` (percentages). On the real BSARD test labels the
   paper's published rows are appended. An encoder that cannot be loaded is skipped with a note.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

if __package__ in (None, ""):  # python bench/effectiveness.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import REPO as ROOT  # noqa: E402
from bsard_demo import cache  # noqa: E402
from bsard_demo.analyzer import TEXT_ONLY  # noqa: E402
from bsard_demo.dataset import DataError  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.evaluation.report import FORMATS, is_bsard_test, metrics_table, render_rows, render_table  # noqa: E402
from bsard_demo.evaluation.stats import compare_measure, holm  # noqa: E402
from bsard_demo.retrievers import RetrieverSpec, build_retriever  # noqa: E402
from bsard_demo.retrievers.adapter import is_adapter_folder  # noqa: E402
from bsard_demo.retrievers.batch import question_texts, search_all  # noqa: E402
from bsard_demo.retrievers.bm25 import BM25Settings  # noqa: E402
from bsard_demo.retrievers.registry import hybrid_parts, hybrid_spec, make_hybrid  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402

KS = (100, 200, 500)
DEPTH = 500
BM25 = RetrieverSpec("bm25")
DENSE_USE = RetrieverSpec("dense", {"encoder": "use"})
#: name -> (table label, spec); hybrids are built over the already built BM25 and dense use.
RETRIEVERS: dict[str, tuple[str, RetrieverSpec]] = {
    "bm25": ("BM25 (default: headers, stemming)", BM25),
    "bm25-text-nostem": ("BM25 text only, no stemming", RetrieverSpec("bm25", {"fields": TEXT_ONLY, "stem": False})),
    "dense-use": ("dense use", DENSE_USE),
    "dense-minilm": ("dense minilm", RetrieverSpec("dense", {"encoder": "minilm"})),
    "hybrid-rrf": ("hybrid RRF k=60 (BM25 + use)",
                   RetrieverSpec("hybrid", {"retrievers": [BM25, DENSE_USE], "method": "rrf"})),
    "hybrid-weighted": ("hybrid weighted α=0.5 (BM25 + use)",
                        RetrieverSpec("hybrid", {"retrievers": [BM25, DENSE_USE], "method": "weighted", "alpha": 0.5})),
}


def sub_corpus(ds, gold_splits: Sequence[str], size: int, seed: int):
    """A seeded sub-corpus of ``ds``: every gold article of the questions of ``gold_splits``, plus
    distractors drawn uniformly without replacement (``numpy.random.default_rng(seed)``) from the
    other articles, sorted by id as strings, up to ``size`` articles in all (only the gold when
    it already holds ``size`` or more). Articles keep the corpus file's order; the questions and
    labels are the dataset's (gold articles of other splits may be absent)."""
    import numpy as np

    from bsard_demo.dataset import Dataset

    gold = set()
    for split in gold_splits:
        for ids in ds.qrels(split).values():
            gold |= set(ids)
    all_ids = [str(a) for a in ds.articles["id"]]
    gold &= set(all_ids)
    others = sorted(a for a in set(all_ids) - gold)
    n_extra = max(0, min(int(size) - len(gold), len(others)))
    rng = np.random.default_rng(int(seed))
    chosen = set(others[i] for i in rng.choice(len(others), size=n_extra, replace=False).tolist()) if n_extra else set()
    keep = gold | chosen
    articles = ds.articles[[a in keep for a in all_ids]].reset_index(drop=True)
    name = (f"{ds.name} sub-corpus ({len(articles)} articles: gold of {'+'.join(gold_splits)} + {len(chosen)} "
            f"distractors, seed {seed})")
    return Dataset(name=name, kind=ds.kind, articles=articles, splits=ds.splits, fictional=ds.fictional), len(gold)


# ---------------------------------------------------------------------------------------- legacy table

def legacy_main(args: argparse.Namespace) -> int:
    """The six-retriever table of the sample and synthetic sections (unchanged output)."""
    cache_root = _cache_root(args)
    try:
        ds = load_dataset(args.data)
        questions = ds.questions(args.split)
    except DataError as exc:
        print(f"effectiveness: {exc}", file=sys.stderr)
        return 2
    qids = [str(q) for q in questions["id"]]
    texts = question_texts(questions, args.with_description)
    qrels = ds.qrels(args.split)

    built: dict[str, object] = {}  # spec key -> retriever (hybrid parts are shared)
    evaluations, lines = {}, []

    def get(spec: RetrieverSpec):
        if spec.key() not in built:
            built[spec.key()] = build_retriever(spec, ds, cache_root=cache_root)
        return built[spec.key()]

    for name in args.retrievers or list(RETRIEVERS):
        label, spec = RETRIEVERS[name]
        start = time.perf_counter()
        try:
            if spec.kind == "hybrid":
                parts = [get(s) for s in spec.options["retrievers"]]
                retriever = make_hybrid(spec, parts, corpus_size=len(ds.articles))
            else:
                retriever = get(spec)
        except ValueError as exc:  # EncoderUnavailable is a ValueError
            lines.append(f"{label}: skipped ({exc})")
            continue
        built_s = time.perf_counter() - start
        start = time.perf_counter()
        hits = search_all(retriever, texts, DEPTH)
        search_s = time.perf_counter() - start
        evaluations[label] = evaluate(qrels, {q: [h.article_id for h in hs] for q, hs in zip(qids, hits)}, KS)
        lines.append(f"{label}: `{retriever.name}`; build or cache load {built_s:.1f} s, "
                     f"{len(qids)} questions searched in {search_s:.1f} s")

    print(f"dataset: {ds.name} ({len(ds.articles)} articles), split {args.split}: {len(qids)} questions, "
          f"{sum(len(v) for v in qrels.values())} relevant pairs; depth {DEPTH}; "
          f"question text{' + extra_description' if args.with_description else ' only'}")
    print()
    table = metrics_table(evaluations, published=is_bsard_test(qrels))
    print(render_table(table.drop(columns=["missing_questions", "unknown_questions"]), args.format), end="")
    print()
    for line in lines:
        print(f"- {line}")
    return 0


def _cache_root(args: argparse.Namespace) -> Path:
    return Path(args.cache_dir or os.environ.get("BSARD_CACHE", "").strip()
                or ROOT / "bench" / "out" / "cache").expanduser()


# ---------------------------------------------------------------------------------------- every system

#: Significance settings: those of ``python -m bsard_demo compare`` (wherever the CLI keeps them).
def _compare_settings() -> tuple[int, int, float]:
    for module in ("bsard_demo.cli.compare", "bsard_demo.evaluation.stats", "bsard_demo.settings"):
        try:
            mod = __import__(module, fromlist=["_"])
        except ImportError:
            continue
        values = [getattr(mod, n, None) for n in ("N_RESAMPLES", "SEED", "ALPHA")]
        if all(v is not None for v in values):
            return int(values[0]), int(values[1]), float(values[2])
    return 10000, 0, 0.05


RRF_KS_GRID = (10.0, 30.0, 60.0, 100.0)
DENSE_WEIGHTS_GRID = (0.25, 0.5, 0.75, 1.0)
ALPHAS_GRID = (0.3, 0.5, 0.7)
PART_DEPTH = 1000  # the hybrid's default depth: each part searched this deep, then fused
NEIGHBOUR_WEIGHTS_GRID = (0.25, 0.5, 0.75, 1.0, 1.5)
NEIGHBOUR_COUNTS = (5, 10, 50)  # besides the default 20
GROUPS = ("bm25", "dense", "fusion", "neighbours", "qtext", "sub", "models", "full")
BUILDS_RECORD = "effectiveness-builds.json"


@dataclass
class System:
    """One row: a retriever ``spec`` on a corpus (``"full"`` or ``"sub"``), searched with
    ``query_text``; ``groups`` for ``--systems``."""

    id: str
    label: str
    spec: RetrieverSpec
    corpus: str = "full"
    groups: tuple[str, ...] = ()
    query_text: str = "question"


def bm25_options(**options) -> dict:
    """BM25 spec options without those equal to the defaults, so that the same settings always
    give the same spec (and reuse one built index)."""
    default = BM25Settings()
    return {k: v for k, v in options.items() if getattr(default, k) != v}


def _fmt_w(w: float) -> str:
    return f"{w:g}"


def _fusion_label(spec: RetrieverSpec, names: Sequence[str]) -> str:
    o = spec.options
    inner = " + ".join(names)
    if o.get("method") == "rrf":
        w = o.get("weights")
        ws = "" if w is None else " w=" + ",".join(_fmt_w(x) for x in w)
        return f"RRF k={_fmt_w(o['rrf_k'])}{ws} ({inner})"
    if "alpha" in o:
        return f"min-max α={_fmt_w(o['alpha'])} ({inner})"
    w = o.get("weights") or [1.0] * len(names)
    return f"min-max w={','.join(_fmt_w(x) for x in w)} ({inner})"


def plan_systems(tuned: Mapping[str, dict], models: Sequence[str], model_corpus: str, with_sub: bool) -> list[System]:
    """Every row, in table order: the full corpus first, then the sub-corpus."""
    rows: list[System] = []
    bm25 = RetrieverSpec("bm25")
    default_hybrid = hybrid_spec()

    def add(id_, label, spec, corpus="full", groups=(), query_text="question"):
        rows.append(System(id_, label, spec, corpus, tuple(groups) + ((corpus,) if corpus == "full" else ("sub",)),
                           query_text))

    # BM25 variants (full corpus)
    add("bm25", "BM25 default (k1=1 b=0.6, headers, stems, stop words)", bm25, groups=("bm25",))
    add("bm25-nostem", "BM25 no stemming", RetrieverSpec("bm25", {"stem": False}), groups=("bm25",))
    add("bm25-noheaders", "BM25 no headers (article text only)", RetrieverSpec("bm25", {"fields": TEXT_ONLY}),
        groups=("bm25",))
    add("bm25-text-nostem", "BM25 text only, no stemming", RetrieverSpec("bm25", {"fields": TEXT_ONLY, "stem": False}),
        groups=("bm25",))
    add("bm25-nostop", "BM25 no stop words", RetrieverSpec("bm25", {"stopwords": False}), groups=("bm25",))
    add("bm25-robertson", "BM25 robertson idf", RetrieverSpec("bm25", {"method": "robertson"}), groups=("bm25",))
    for measure, t in tuned.items():
        short = "R@100" if measure == "recall@100" else "MAP@100"
        add(f"bm25-tuned-{measure.split('@')[0]}",
            f"BM25 tuned on train by {short} (k1={_fmt_w(t['k1'])} b={_fmt_w(t['b'])})",
            RetrieverSpec("bm25", bm25_options(k1=t["k1"], b=t["b"])), groups=("bm25",))
    # dense (full corpus)
    add("use", "dense use", RetrieverSpec("dense", {"encoder": "use"}), groups=("dense",))
    # fusions BM25 + use (full corpus)
    for k in RRF_KS_GRID:
        for w in DENSE_WEIGHTS_GRID:
            spec = hybrid_spec("use", rrf_k=k, weights=[1.0, w])
            label = _fusion_label(spec, ["BM25", "use"])
            if spec.key() == default_hybrid.key():
                label += " = product default hybrid"
            add(f"rrf-k{k:g}-w{w:g}", label, spec, groups=("fusion",))
    for a in ALPHAS_GRID:
        spec = hybrid_spec("use", method="weighted", alpha=a)
        add(f"minmax-a{a:g}", _fusion_label(spec, ["BM25", "use"]), spec, groups=("fusion",))
    if "recall@100" in tuned:
        t = tuned["recall@100"]
        spec = hybrid_spec("use", bm25_options=bm25_options(k1=t["k1"], b=t["b"]))
        add("rrf-tunedbm25", _fusion_label(spec, ["BM25 tuned R@100", "use"]), spec, groups=("fusion",))
    # label transfer from the training questions (neighbours), alone and fused (full corpus)
    add("neighbours", "neighbours (train questions' labels, n=20)", RetrieverSpec("neighbours"), groups=("neighbours",))
    for w in NEIGHBOUR_WEIGHTS_GRID:
        spec = hybrid_spec("neighbours", weights=[1.0, w])
        add(f"rrf-nb-w{w:g}", _fusion_label(spec, ["BM25", "neighbours"]), spec, groups=("neighbours", "fusion"))
    for n in NEIGHBOUR_COUNTS:
        spec = hybrid_spec("neighbours")
        parts = [RetrieverSpec("bm25"), RetrieverSpec("neighbours", {"n": n})]
        spec = RetrieverSpec("hybrid", {**spec.options, "retrievers": parts})
        add(f"rrf-nb{n}", _fusion_label(spec, ["BM25", f"neighbours n={n}"]), spec, groups=("neighbours", "fusion"))
    for a in ALPHAS_GRID:
        spec = hybrid_spec("neighbours", method="weighted", alpha=a)
        add(f"minmax-nb-a{a:g}", _fusion_label(spec, ["BM25", "neighbours"]), spec, groups=("neighbours", "fusion"))
    for wd in (0.25, 0.5):
        for w in NEIGHBOUR_WEIGHTS_GRID:
            spec = hybrid_spec(["use", "neighbours"], weights=[1.0, wd, w])
            add(f"rrf3-nb-w{wd:g},{w:g}", _fusion_label(spec, ["BM25", "use", "neighbours"]), spec,
                groups=("neighbours", "fusion"))
    if "recall@100" in tuned:
        t = tuned["recall@100"]
        spec = hybrid_spec(["use", "neighbours"], bm25_options=bm25_options(k1=t["k1"], b=t["b"]))
        add("rrf3-nb-tunedbm25", _fusion_label(spec, ["BM25 tuned R@100", "use", "neighbours"]), spec,
            groups=("neighbours", "fusion"))
    # query text (only when it differs: see main)
    for id_, label, spec in (("bm25", "BM25 default", bm25),
                             ("use", "dense use", RetrieverSpec("dense", {"encoder": "use"})),
                             ("hybrid", "default hybrid", default_hybrid)):
        add(f"{id_}+desc", f"{label}, question+description", spec, groups=("qtext",), query_text="question+description")
    # trained models on the full corpus
    for path in models:
        if model_corpus in ("full", "both"):
            name = Path(path).name
            adapter = is_adapter_folder(path)
            dense = RetrieverSpec("dense", {"encoder": str(path)})
            add(f"model:{name}", f"dense {name} ({'query adapter' if adapter else 'trained'})", dense,
                groups=("models",))
            spec = hybrid_spec([str(path)])
            add(f"rrf-model:{name}", _fusion_label(spec, ["BM25", name]), spec, groups=("models", "fusion"))
            if adapter:  # it replaces its base: fused with BM25 and the neighbours instead of use
                spec = hybrid_spec([str(path), "neighbours"])
                add(f"rrf-nb-model:{name}", _fusion_label(spec, ["BM25", name, "neighbours"]), spec,
                    groups=("models", "fusion", "neighbours"))
                spec = hybrid_spec([str(path), "neighbours"], weights=[1.0, 0.5, 0.75])
                add(f"rrf-nb-model-w0.75:{name}", _fusion_label(spec, ["BM25", name, "neighbours"]), spec,
                    groups=("models", "fusion", "neighbours"))
                continue
            spec = hybrid_spec(["use", str(path)])
            add(f"rrf-use-model:{name}", _fusion_label(spec, ["BM25", "use", name]), spec, groups=("models", "fusion"))
    if not with_sub:
        return rows
    # sub-corpus
    sub = "sub"
    add("sub:bm25", "BM25 default", bm25, sub, ("bm25",))
    if "recall@100" in tuned:
        t = tuned["recall@100"]
        add("sub:bm25-tuned-recall", f"BM25 tuned on train by R@100 (k1={_fmt_w(t['k1'])} b={_fmt_w(t['b'])})",
            RetrieverSpec("bm25", bm25_options(k1=t["k1"], b=t["b"])), sub, ("bm25",))
    for enc in ("use", "e5", "minilm"):
        add(f"sub:{enc}", f"dense {enc}", RetrieverSpec("dense", {"encoder": enc}), sub, ("dense",))
    spec = default_hybrid
    add("sub:rrf-default", _fusion_label(spec, ["BM25", "use"]) + " = product default hybrid", spec, sub, ("fusion",))
    for w in DENSE_WEIGHTS_GRID:
        spec = hybrid_spec("e5", weights=[1.0, w])
        add(f"sub:rrf-e5-w{w:g}", _fusion_label(spec, ["BM25", "e5"]), spec, sub, ("fusion",))
    spec = hybrid_spec("minilm")
    add("sub:rrf-minilm", _fusion_label(spec, ["BM25", "minilm"]), spec, sub, ("fusion",))
    for k in RRF_KS_GRID:
        for w in DENSE_WEIGHTS_GRID:
            spec = hybrid_spec(["use", "e5"], rrf_k=k, weights=[1.0, w, w])
            add(f"sub:rrf3-k{k:g}-w{w:g}", _fusion_label(spec, ["BM25", "use", "e5"]), spec, sub, ("fusion",))
    for ws in ((1.0, 1.0, 1.0), (1.0, 0.5, 0.5)):
        spec = hybrid_spec(["use", "e5"], method="weighted", weights=list(ws))
        add(f"sub:minmax3-w{','.join(_fmt_w(x) for x in ws)}", _fusion_label(spec, ["BM25", "use", "e5"]), spec, sub,
            ("fusion",))
    for path in models:
        if model_corpus in ("sub", "both"):
            name = Path(path).name
            add(f"sub:model:{name}", f"dense {name} (trained)", RetrieverSpec("dense", {"encoder": str(path)}), sub,
                ("models",))
            spec = hybrid_spec([str(path)])
            add(f"sub:rrf-model:{name}", _fusion_label(spec, ["BM25", name]), spec, sub, ("models", "fusion"))
            spec = hybrid_spec(["use", "e5", str(path)])
            add(f"sub:rrf-all-model:{name}", _fusion_label(spec, ["BM25", "use", "e5", name]), spec, sub,
                ("models", "fusion"))
    return rows


def select_systems(rows: Sequence[System], selector: str) -> list[System]:
    """``--systems``: comma-separated groups (:data:`GROUPS`, ``all``) and/or row ids; an item
    written ``-NAME`` leaves that group or row out (e.g. ``all,-sub:minilm``)."""
    items = [w.strip() for w in selector.split(",") if w.strip()]
    wanted = [w for w in items if not w.startswith("-")] or ["all"]
    dropped = [w[1:] for w in items if w.startswith("-")]
    ids = {r.id for r in rows}
    unknown = [w for w in wanted + dropped if w != "all" and w not in GROUPS and w not in ids]
    if unknown:
        raise ValueError(f"unknown system(s) or group(s): {', '.join(unknown)}; groups: all, {', '.join(GROUPS)}; "
                         f"ids: {', '.join(r.id for r in rows)}")

    def named(r: System, names: Sequence[str]) -> bool:
        return "all" in names or r.id in names or any(g in names for g in r.groups)

    return [r for r in rows if named(r, wanted) and not (r.id in dropped or any(g in dropped for g in r.groups))]


def _corpus_digest(ds) -> str:
    return hashlib.sha256("\n".join(str(a) for a in ds.articles["id"]).encode()).hexdigest()[:16]


def _record_key(ds, spec: RetrieverSpec) -> str:
    return f"{_corpus_digest(ds)}:{spec.key()}"


def read_builds(cache_root: Path) -> dict:
    try:
        return json.loads((cache_root / BUILDS_RECORD).read_text())
    except (OSError, ValueError):
        return {}


def record_build(cache_root: Path, ds, spec: RetrieverSpec, seconds: float, source: str) -> None:
    """Keep the cold build time of ``spec`` on ``ds`` (the cache then only shows load times)."""
    builds = read_builds(cache_root)
    builds[_record_key(ds, spec)] = {"seconds": round(float(seconds), 1), "corpus": ds.name,
                                     "articles": len(ds.articles),
                                     "source": source, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = cache_root / (BUILDS_RECORD + ".tmp")
    tmp.write_text(json.dumps(builds, indent=1, sort_keys=True))
    tmp.replace(cache_root / BUILDS_RECORD)


class Bench:
    """Builds each single retriever once per corpus, searches each question set once per part
    (to :data:`PART_DEPTH`), times single questions, fuses with the product's fusion."""

    def __init__(self, corpora: Mapping[str, object], cache_root: Path, questions, timing_questions: int | None):
        self.corpora = corpora
        self.cache_root = cache_root
        self.questions = questions
        self.timing = len(questions) if timing_questions is None else min(int(timing_questions), len(questions))
        self.retrievers: dict[tuple[str, str], object] = {}
        self.build_info: dict[tuple[str, str], dict] = {}
        self.rankings: dict[tuple[str, str, str], list] = {}
        self.times: dict[tuple[str, str, str], list[float]] = {}

    def retriever(self, corpus: str, spec: RetrieverSpec):
        key = (corpus, spec.key())
        if key not in self.retrievers:
            ds = self.corpora[corpus]
            cache.forget_used()
            start = time.perf_counter()
            r = build_retriever(spec, ds, cache_root=self.cache_root,
                                notice=lambda m: print(f"note: {m}", file=sys.stderr))
            seconds = time.perf_counter() - start
            sources = {e.source for e in cache.used_entries()}
            built = bool(sources & {"built", "unsaved"})
            if built:
                record_build(self.cache_root, ds, spec, seconds, "bench/effectiveness.py")
            cold = read_builds(self.cache_root).get(_record_key(ds, spec))
            self.build_info[key] = {"load_s": seconds, "built_now": built,
                                    "build_s": seconds if built else (cold or {}).get("seconds"),
                                    "build_source": "this run" if built else (cold or {}).get("source")}
            self.retrievers[key] = r
        return self.retrievers[key]

    def texts(self, query_text: str) -> list[str]:
        return question_texts(self.questions, query_text=query_text)

    def search(self, corpus: str, spec: RetrieverSpec, query_text: str):
        """Each question's ranking (to PART_DEPTH, capped at the corpus size) and per-question ms."""
        key = (corpus, spec.key(), query_text)
        if key not in self.rankings:
            r = self.retriever(corpus, spec)
            n = len(self.corpora[corpus].articles)
            texts = self.texts(query_text)
            self.rankings[key] = search_all(r, texts, min(PART_DEPTH, n))
            ms = []
            for text in texts[:self.timing]:
                t0 = time.perf_counter()
                r.search(text, DEPTH)
                ms.append(1000 * (time.perf_counter() - t0))
            self.times[key] = ms
        return self.rankings[key], self.times[key]

    def run(self, system: System) -> tuple[list[list[str]], dict]:
        """``system``'s 500-deep rankings (article ids) and its cost."""
        spec, corpus = system.spec, system.corpus
        if spec.kind != "hybrid":
            hits, ms = self.search(corpus, spec, system.query_text)
            info = self.build_info[(corpus, spec.key())]
            return [[h.article_id for h in hs[:DEPTH]] for hs in hits], {
                "build_s": info["build_s"], "load_s": info["load_s"], "build_source": info["build_source"],
                "query_ms_median": statistics.median(ms) if ms else None, "timed_questions": len(ms),
                "name": self.retrievers[(corpus, spec.key())].name}
        parts = hybrid_parts(spec)
        searched = [self.search(corpus, p, system.query_text) for p in parts]
        retrievers = [self.retrievers[(corpus, p.key())] for p in parts]
        hybrid = make_hybrid(spec, retrievers, corpus_size=len(self.corpora[corpus].articles))
        runs, fuse_ms = [], []
        for i in range(len(self.questions)):
            t0 = time.perf_counter()
            fused = hybrid.fuse([hits[i] for hits, _ in searched], DEPTH)
            fuse_ms.append(1000 * (time.perf_counter() - t0))
            runs.append([h.article_id for h in fused])
        per_q = [sum(ms[i] for _, ms in searched) + fuse_ms[i] for i in range(self.timing)]
        infos = [self.build_info[(corpus, p.key())] for p in parts]
        build = None if any(i["build_s"] is None for i in infos) else sum(i["build_s"] for i in infos)
        return runs, {"build_s": build, "load_s": sum(i["load_s"] for i in infos), "build_source": "sum of the parts",
                      "query_ms_median": statistics.median(per_q) if per_q else None, "timed_questions": len(per_q),
                      "name": hybrid.name}


def tuned_bm25(ds, split: str, measures: Sequence[str], cache_root: Path, data: str) -> dict[str, dict]:
    """k1/b by ``bsard_demo.tuning.tune_bm25`` (the ``tune --retriever bm25`` search) on ``split``,
    per measure, from one term matrix; memoised in the cache folder (the grid is deterministic)."""
    from bsard_demo.tuning import TermMatrix, tune_bm25

    memo = cache_root / "effectiveness-tune.json"
    try:
        saved = json.loads(memo.read_text())
    except (OSError, ValueError):
        saved = {}
    qids = ",".join(str(q) for q in ds.questions(split)["id"])
    base = f"{_corpus_digest(ds)}:{hashlib.sha256(qids.encode()).hexdigest()[:16]}:{split}"
    out, matrix = {}, None
    for measure in measures:
        key = f"{base}:{measure}"
        if key not in saved:
            matrix = matrix or TermMatrix.build(ds.articles, BM25Settings())
            res = tune_bm25(ds, split, measure=measure, matrix=matrix, data=data)
            saved[key] = {"k1": res.best["k1"], "b": res.best["b"], "value": res.best_value,
                          "start_value": res.start_value,
                          "command": res.command, "seconds": round(res.seconds, 1), "points": len(res.grid)}
            cache_root.mkdir(parents=True, exist_ok=True)
            memo.write_text(json.dumps(saved, indent=1, sort_keys=True))
        out[measure] = saved[key]
    return out


def _p_cell(p: float, holm_p: float, alpha: float) -> str:
    return f"{holm_p:.4f}{'*' if holm_p < alpha else ''}"


def _cost(v: float | None, digits: int) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def full_main(args: argparse.Namespace) -> int:
    cache_root = _cache_root(args)
    n_resamples, seed, alpha = _compare_settings()
    try:
        ds = load_dataset(args.data)
        questions = ds.questions(args.split)
        tune_split = args.tune_split
        ds.questions(tune_split)
    except DataError as exc:
        print(f"effectiveness: {exc}", file=sys.stderr)
        return 2
    qids = [str(q) for q in questions["id"]]
    qrels = ds.qrels(args.split)
    notes: list[str] = []
    tuned = tuned_bm25(ds, tune_split, ("recall@100", "map@100"), cache_root, args.data) if not args.no_tune else {}
    for m, t in tuned.items():
        notes.append(f"BM25 tuned on {tune_split} by {m} (bsard_demo.tuning.tune_bm25, the `tune --retriever bm25` "
                     f"grid, {t['points']} points): k1={_fmt_w(t['k1'])} b={_fmt_w(t['b'])}, {tune_split} {m} "
                     f"{100 * t['value']:.2f} vs {100 * t['start_value']:.2f} at k1=1 b=0.6; run line: {t['command']}")
    gold_splits = [s.strip() for s in args.sub_gold.split(",") if s.strip()]
    with_sub = args.sub_size > 0
    corpora = {"full": ds}
    if with_sub:
        sub, n_gold = sub_corpus(ds, gold_splits, args.sub_size, args.sub_seed)
        corpora["sub"] = sub
        sub_label = f"sub {len(sub.articles)}"
        if args.split not in gold_splits:
            notes.append(f"sub-corpus rows not scored on {args.split}: the sub-corpus holds the gold of "
                         f"{'+'.join(gold_splits)} only (--sub-gold)")
            with_sub = False
    models = [m for m in args.model]
    for m in list(models):
        if not (Path(m) / "config.json").is_file() and not (Path(m) / "modules.json").is_file() \
                and not is_adapter_folder(m):
            notes.append(f"model {m}: neither a sentence-transformers folder (yet) nor a query adapter; its rows are "
                         "left out")
            models.remove(m)
    rows = plan_systems(tuned, models, args.model_corpus, with_sub)
    empty_desc = all(not str(x or "").strip() for x in questions["extra_description"])
    if empty_desc:
        rows = [r for r in rows if r.query_text == "question"]
        notes.append(f"query text: extra_description is empty for every question of {args.split}, so "
                     "question+description = question: those rows would duplicate the question rows and are left out")
    try:
        rows = select_systems(rows, args.systems)
    except ValueError as exc:
        print(f"effectiveness: {exc}", file=sys.stderr)
        return 2
    # the baseline of each corpus is always scored (significance is against it)
    baseline_ids = {"full": args.baseline, "sub": f"sub:{args.baseline}"}
    every = plan_systems(tuned, models, args.model_corpus, with_sub)
    for corpus, bid in baseline_ids.items():
        if any(r.corpus == corpus for r in rows) and not any(r.id == bid for r in rows):
            base = next((r for r in every if r.id == bid), None)
            if base is None:
                print(f"effectiveness: no baseline row {bid!r}", file=sys.stderr)
                return 2
            rows.insert(next(i for i, r in enumerate(rows) if r.corpus == corpus), base)

    bench = Bench(corpora, cache_root, questions, args.timing_questions)
    evaluations, costs, skipped = {}, {}, []
    for r in rows:
        t0 = time.perf_counter()
        try:
            run, cost = bench.run(r)
        except ValueError as exc:  # EncoderUnavailable is a ValueError
            skipped.append(f"{r.id}: skipped ({str(exc).splitlines()[0]})")
            continue
        evaluations[r.id] = evaluate(qrels, dict(zip(qids, run)), KS)
        costs[r.id] = cost
        print(f"[{time.strftime('%H:%M:%S')}] {r.id}: R@100 {100 * evaluations[r.id].means['recall@100']:.2f} "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    rows = [r for r in rows if r.id in evaluations]

    # significance against the baseline of each corpus, Holm over that corpus' rows, per measure
    sig: dict[str, dict] = {}
    for corpus, bid in baseline_ids.items():
        block = [r for r in rows if r.corpus == corpus and r.id != bid]
        if bid not in evaluations or not block:
            continue
        for measure in SIG_MEASURES:
            recs = []
            for r in block:
                comp = compare_measure({r.id: evaluations[r.id].per_question, bid: evaluations[bid].per_question},
                                       measure, n_resamples=n_resamples, seed=seed, alpha=alpha)
                recs.append(comp.pair_records()[0])
            adjusted = holm([rec["p_permutation"] for rec in recs])
            adjusted_t = holm([rec["p_ttest"] for rec in recs])
            for r, rec, h, ht in zip(block, recs, adjusted, adjusted_t):
                sig.setdefault(r.id, {})[measure] = {
                    "vs": bid, "diff": rec["diff"], "wins": rec["wins"], "ties": rec["ties"], "losses": rec["losses"],
                    "p_permutation": rec["p_permutation"], "p_permutation_holm": h, "p_ttest": rec["p_ttest"],
                    "p_ttest_holm": ht, "significant": bool(h < alpha)}

    cols = ["recall@100", "recall@200", "recall@500", "map@100", "mrr@100", "ndcg@10"]
    header = ["run", "corpus", "R@100", "R@200", "R@500", "MAP@100", "MRR@100", "nDCG@10",
              "p R@100", "p MAP@100", "build s", "query ms"]
    table_rows = []
    for r in rows:
        m = evaluations[r.id].means
        s = sig.get(r.id, {})
        cells = [r.label, "full" if r.corpus == "full" else sub_label] + [f"{100 * m[c]:.2f}" for c in cols]
        cells += [_p_cell(s[x]["p_permutation"], s[x]["p_permutation_holm"], alpha) if x in s else "(baseline)"
                  for x in SIG_MEASURES]
        c = costs[r.id]
        cells += [_cost(c["build_s"], 1) or "?", _cost(c["query_ms_median"], 1)]
        table_rows.append(cells)

    full_n = len(ds.articles)
    print(f"dataset: {ds.name} ({full_n} articles), split {args.split}: {len(qids)} questions, "
          f"{sum(len(v) for v in qrels.values())} relevant pairs; depth {DEPTH} (fusion parts {PART_DEPTH}); question "
          "text")
    if "sub" in corpora and with_sub:
        print(f"sub-corpus ({sub_label}): every gold article of the {'+'.join(gold_splits)} questions ({n_gold}) + "
              f"{len(corpora['sub'].articles) - n_gold} distractors drawn uniformly from the other articles "
              f"(numpy default_rng({args.sub_seed}), --sub-size {args.sub_size} --sub-seed {args.sub_seed} --sub-gold "
              f"{args.sub_gold})")
    print(f"p: paired sign-flip permutation test of the row against {args.baseline!r} on the same corpus "
          f"(bsard_demo.evaluation.stats via compare_measure, {n_resamples:,} resamples, seed {seed}), Holm-adjusted "
          f"over the rows of that corpus, per measure; * = adjusted p < {alpha}")
    print()
    print(render_rows(header, table_rows, args.format, left=2), end="")
    print()
    for r in rows:
        c = costs[r.id]
        b = "?" if c["build_s"] is None else f"{c['build_s']:.1f} s ({c['build_source']})"
        print(f"- {r.id}: `{c['name']}`; build {b}, load here {c['load_s']:.1f} s, query median "
              f"{_cost(c['query_ms_median'], 1)} ms over {c['timed_questions']} questions")
    for line in notes + skipped:
        print(f"- {line}")
    if args.json:
        out = {"dataset": ds.name, "split": args.split, "questions": len(qids), "articles": full_n, "depth": DEPTH,
               "part_depth": PART_DEPTH, "baseline": args.baseline,
               "permutation": {"n_resamples": n_resamples, "seed": seed, "alpha": alpha,
                               "holm": "over the rows of each corpus"},
               "sub_corpus": ({"articles": len(corpora["sub"].articles), "gold": n_gold, "gold_splits": gold_splits,
                               "seed": args.sub_seed, "size": args.sub_size} if "sub" in corpora else None),
               "tuned_bm25": {m: {"split": tune_split, **t} for m, t in tuned.items()},
               "rows": [{"id": r.id, "label": r.label, "corpus": r.corpus, "query_text": r.query_text,
                         "spec": json.loads(r.spec.key()), "metrics": {c: evaluations[r.id].means[c] for c in cols},
                         "significance": sig.get(r.id), "cost": costs[r.id]} for r in rows],
               "notes": notes + skipped}
        Path(args.json).write_text(json.dumps(out, ensure_ascii=False, indent=1, default=str) + "\n")
        print(f"- JSON: {args.json}")
    return 0


SIG_MEASURES = ("recall@100", "map@100")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="sample", help="hub, sample (default) or a dataset folder")
    p.add_argument("--split", default="test")
    p.add_argument("--retrievers", nargs="+", choices=list(RETRIEVERS), default=None,
                   help="the six-retriever table (the sample and synthetic sections); default on --data sample")
    p.add_argument("--systems", default=None,
                   help=f"every system of the product: comma-separated groups (all, {', '.join(GROUPS)}) or row ids "
                        "(default: all, except on --data sample without this option)")
    p.add_argument("--format", choices=[f for f in FORMATS if f != "json"], default="markdown",
                   help="markdown (default), table, latex; csv for the six-retriever table only (every system: --json)")
    p.add_argument("--with-description", action="store_true", help="(six-retriever table) append extra_description")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--json", default=None, metavar="FILE", help="(every system) also write the table as JSON")
    p.add_argument("--baseline", default="bm25",
                   help="row id every row is tested against (default: bm25, the default of `run`)")
    p.add_argument("--tune-split", default="train", help="split BM25's k1/b are tuned on (default: train)")
    p.add_argument("--no-tune", action="store_true", help="leave out the tuned BM25 rows")
    p.add_argument("--sub-size", type=int, default=2000, help="articles of the sub-corpus (0: none; default 2000)")
    p.add_argument("--sub-seed", type=int, default=0, help="seed of the sub-corpus' distractors (default 0)")
    p.add_argument("--sub-gold", default="test", help="splits whose gold articles the sub-corpus holds (default: test)")
    p.add_argument("--model", action="append", default=[], metavar="DIR",
                   help="a sentence-transformers folder (e.g. written by `train`): dense and fused rows; repeatable")
    p.add_argument("--model-corpus", choices=("sub", "full", "both"), default="sub",
                   help="corpus of the --model rows (default: sub; full costs ~80 min of encoding per model)")
    p.add_argument("--timing-questions", type=int, default=None,
                   help="questions timed one by one for the query cost (default: all of the split)")
    args = p.parse_args(argv)
    if args.retrievers is not None or (args.systems is None and args.data == "sample"):
        return legacy_main(args)
    if args.format == "csv":
        p.error("--format csv is for the six-retriever table; write every system's figures with --json FILE")
    args.systems = args.systems or "all"
    return full_main(args)


if __name__ == "__main__":
    sys.exit(main())
