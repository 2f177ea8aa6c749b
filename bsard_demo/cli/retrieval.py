"""The ``run`` and ``index`` commands: search every question of a split, or prebuild an index.

``run`` writes one ranking of ``--depth`` articles for every question of the split (TREC by
default, tagged with the retriever and its settings; or JSON ``{qid: {docid: score}}``), in the
order convention of :mod:`bsard_demo.runs.run`, so the file reads back with no problem through
:func:`bsard_demo.runs.read_run_path`. Progress bars go to stderr; errors the user can fix
(data, options, output path) are one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..dataset import DataError
from ..retrievers import RetrieverSpec, build_retriever
from ..retrievers.batch import DEFAULT_QUERY_TEXT, QUERY_TEXTS, question_texts, ranked_pairs, run_tag, search_all
from ..retrievers.bm25 import METHODS as BM25_METHODS
from ..retrievers.encoders import BACKENDS, DEFAULT_ENCODER, ENCODER_CHOICES
from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_RRF_K, FUSION_METHODS
from ..retrievers.registry import hybrid_spec, parse_encoders, retriever_kinds
from ..runs import format_run, write_text_atomic
from ..runs.write import RUN_FORMATS
from ..sources import load_dataset
from .common import TqdmProgress, activate_index, add_data_argument, add_index_argument, data_spec, fail, say
from .export import add_export_arguments, check_export_arguments, export_and_push, wants_export

#: The kinds whose options ``run`` and ``index`` map from their own flags (any other registered
#: kind is built with its defaults and refuses those flags).
_MAPPED = ("bm25", "dense", "hybrid", "ranker")


def _either(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _common_arguments(p: argparse.ArgumentParser) -> None:
    kinds = retriever_kinds()
    p.add_argument("--retriever", choices=(DEFAULT, *kinds), default="bm25",
                   help="; ".join([f"{DEFAULT}: what the Search page shows a first visitor here (the index "
                                   "bundle of --index, the models of $BSARD_MODELS, the stored embeddings), its best "
                                   "column"] + [f"{k.name}: {k.summary.replace('`', '')}" for k in kinds.values()]))
    builtin = ", ".join(f"{name} (default)" if name == DEFAULT_ENCODER else name for name in ENCODER_CHOICES)
    p.add_argument("--encoder", default=None, metavar="NAME[,NAME...]",
                   help=f"dense encoder: {builtin}, a sentence-transformers model id or folder "
                        "(e.g. one written by train); a hybrid takes several, comma-separated (use,e5), "
                        "and fuses BM25 with each of them; 'neighbours' in a hybrid's list adds the "
                        "neighbours part (use,neighbours)")
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="how a model folder is run: auto (default: its ONNX export when it has one, made by "
                        "export-onnx; else torch), torch, or onnx (onnxruntime, no torch needed)")
    add_data_argument(p)
    add_index_argument(p)
    bm25 = p.add_argument_group("BM25")
    bm25.add_argument("--k1", type=float, default=None, help="BM25 k1 (default 1.0)")
    bm25.add_argument("--b", type=float, default=None, help="BM25 b (default 0.6)")
    bm25.add_argument("--bm25-method", choices=BM25_METHODS, default=None,
                      help="BM25 idf variant (default lucene)")
    bm25.add_argument("--no-headers", action="store_true",
                      help="index the article text only, not its reference and headers")
    bm25.add_argument("--no-stem", action="store_true", help="no Snowball stemming")
    hybrid = p.add_argument_group("hybrid")
    hybrid.add_argument("--fusion", choices=FUSION_METHODS, default=DEFAULT_FUSION,
                        help="rrf: reciprocal rank fusion (default); weighted: weighted sum of min-max scores")
    hybrid.add_argument("--rrf-k", type=float, default=None, help=f"RRF constant k (default {DEFAULT_RRF_K:g})")
    hybrid.add_argument("--weights", default=None, metavar="W,W,...",
                        help="one weight per fused system, BM25 first, then the encoders in --encoder order "
                             "(e.g. 1,0.5,0.5); default for rrf: 1 for BM25 and for a model folder or hub id, "
                             "0.5 for a built-in zero-shot encoder (use, e5, minilm) and for neighbours; for weighted: "
                             "all 1")
    hybrid.add_argument("--alpha", type=float, default=None,
                        help="weighted fusion of two systems: weight of BM25, 1 - alpha that of the dense "
                             f"retriever (default {DEFAULT_ALPHA:g}); with more systems give --weights")
    hybrid.add_argument("--structure", action="store_true", default=None,
                        help="re-score the fused ranking along the corpus' structure: an article's neighbours in its "
                             "section, its section and the articles citing it lift it (settings decided on a train "
                             "split: docs/effectiveness.md, \"Structure re-scoring\")")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="index cache folder (default $BSARD_CACHE or ~/.cache/bsard_demo)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")


def add_run_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``run``: search every question of a split and write a run file."""
    p = subparsers.add_parser(
        "run", help="search every question of a split and write a run file",
        description="Search every question of a split with a retriever and write the rankings as a run file "
                    "(TREC 'qid Q0 docid rank score tag' by default, or JSON {qid: {docid: score}}).")
    _common_arguments(p)
    p.add_argument("--split", default="test", help="question split (default: test)")
    p.add_argument("--depth", type=int, default=500, help="articles per question (default: 500)")
    p.add_argument("--out", required=True, metavar="FILE", help="run file to write ('-' for stdout)")
    p.add_argument("--format", choices=RUN_FORMATS, default=None,
                   help="trec (default) or json; a FILE ending in .json defaults to json")
    p.add_argument("--query-text", choices=QUERY_TEXTS, default=DEFAULT_QUERY_TEXT,
                   help="text searched: the question alone (default: the BSARD paper's protocol) or the question "
                        "followed by its extra_description (what MTEB's BSARDRetrieval searches)")
    p.add_argument("--with-description", dest="query_text", action="store_const", const="question+description",
                   help="alias of --query-text question+description")
    p.add_argument("--no-with-description", dest="query_text", action="store_const", const="question",
                   help="alias of --query-text question")
    p.add_argument("--tag", default=None, help="run tag (default: the retriever and its settings)")
    p.set_defaults(func=cmd_run)
    return p


def add_index_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``index``: build a retriever's index into the cache, so later searches start fast."""
    p = subparsers.add_parser("index", help="prebuild a retriever's index into the cache, or export it as a bundle",
                              description="Build (or check) a retriever's cached index over a dataset's articles; "
                                          "--export DIR writes it as an index bundle, --push-to-hub publishes that.")
    _common_arguments(p)
    add_export_arguments(p)
    p.set_defaults(func=cmd_index)
    return p


def _not_for(options: list[str], where: str, retriever: str) -> str:
    return f"{' and '.join(options)} appl{'y' if len(options) > 1 else 'ies'} to {where}, not {retriever}"


def _settings_given(args: argparse.Namespace, dense: dict, fusion_given: list[str]) -> list[str]:
    """The BM25, dense and fusion flags given (a kind that takes none of them refuses them)."""
    return (["--backend"] * bool(dense) + fusion_given
            + [f"--{n.replace('_', '-')}" for n in ("k1", "b", "bm25_method") if getattr(args, n) is not None]
            + ["--no-headers"] * bool(args.no_headers) + ["--no-stem"] * bool(args.no_stem))


def spec_from_args(args: argparse.Namespace) -> RetrieverSpec:
    """The retriever asked for on the command line."""
    bm25: dict[str, object] = {}
    if args.k1 is not None:
        bm25["k1"] = args.k1
    if args.b is not None:
        bm25["b"] = args.b
    if args.bm25_method is not None:
        bm25["method"] = args.bm25_method
    if args.no_headers:
        bm25["fields"] = ("article",)
    if args.no_stem:
        bm25["stem"] = False
    fusion_given = [f"--{n.replace('_', '-')}" for n in ("rrf_k", "weights", "alpha", "structure")
                    if getattr(args, n, None) is not None]
    backend = getattr(args, "backend", "auto") or "auto"
    dense = {"backend": backend} if backend != "auto" else {}  # auto: the spec of every earlier version
    if args.retriever == "bm25":
        given = ["--encoder"] * bool(args.encoder) + ["--backend"] * bool(dense) + fusion_given
        if given:
            raise ValueError(_not_for(given, "--retriever dense or hybrid", "bm25"))
        return RetrieverSpec("bm25", bm25)
    if args.retriever not in (*_MAPPED, DEFAULT):  # neighbours, or any kind registered since: its defaults
        given = ["--encoder"] * bool(args.encoder) + _settings_given(args, dense, fusion_given)
        if given:
            raise ValueError(_not_for(given, f"--retriever {_either(_MAPPED)}", args.retriever))
        return RetrieverSpec(args.retriever)
    if args.retriever == DEFAULT:
        given = ["--encoder"] * bool(args.encoder) + _settings_given(args, dense, fusion_given)
        if given:
            raise ValueError(f"{' and '.join(given)}: --retriever default takes no settings (it is the page's "
                             "first system); give --retriever bm25, dense, hybrid or ranker to set them")
        return RetrieverSpec("bm25")  # a stand-in until the data and the bundle are known: default_spec
    if args.retriever == "ranker":
        given = _settings_given(args, dense, fusion_given)
        if given:
            raise ValueError(_not_for(given, f"--retriever {_either(_MAPPED[:3])}", "ranker"))
        if not args.encoder:
            raise ValueError("--retriever ranker needs its folder: --encoder DIR (written by train --ranker)")
        return RetrieverSpec("ranker", {"model": str(args.encoder).strip()})
    if args.retriever == "dense":
        encoders = parse_encoders(args.encoder)
        if len(encoders) > 1:
            raise ValueError(f"--retriever dense takes one encoder, not {len(encoders)} ({', '.join(encoders)}); "
                             "to fuse several, use --retriever hybrid --encoder " + ",".join(encoders))
        if fusion_given:
            raise ValueError(_not_for(fusion_given, "--retriever hybrid", "dense"))
        return RetrieverSpec("dense", ({"encoder": encoders[0]} if args.encoder else {}) | dense)
    return hybrid_spec(args.encoder, method=args.fusion, rrf_k=args.rrf_k, weights=args.weights,
                       alpha=args.alpha, bm25_options=bm25, dense_options=dense,
                       structure=True if getattr(args, "structure", None) else None)


def _build(args: argparse.Namespace, command: str, progress: TqdmProgress):
    """(dataset, retriever, its spec) or an exit code."""
    try:
        spec = spec_from_args(args)
        dataset = load_dataset(data_spec(args))
    except (DataError, ValueError) as exc:
        return fail(command, exc)
    activate_index(args, command, dataset)
    spec = spec_from_args(args)  # again, once the bundle is active: a bundled adapter's default weight reads it
    cache_root = Path(args.cache_dir).expanduser() if args.cache_dir else None
    if args.retriever == DEFAULT:
        spec = default_spec(dataset, cache_root)
        say(command, f"--retriever default: {spec.key()}")

    def notice(message: str) -> None:
        say(command, f"note: {message}")

    try:
        retriever = build_retriever(spec, dataset, cache_root=cache_root, progress=progress, notice=notice)
    except (DataError, ValueError) as exc:  # includes EncoderUnavailable
        return fail(command, exc)
    finally:
        progress.close()
    return dataset, retriever, spec


DEFAULT = "default"


def default_spec(dataset, cache_root: Path | None = None) -> RetrieverSpec:
    """The spec of the best column a first visitor of the Search page sees over ``dataset`` here:
    :func:`~bsard_demo.retrievers.defaults.first_visitor` of the active index bundle's models and
    ``$BSARD_MODELS``' folders fitted on this corpus (adapters, rankers), the stored ``use``
    embeddings and the labelled training questions, as the page reads them."""
    from ..retrievers.defaults import first_visitor
    from ..retrievers.dense import DenseRetriever
    from ..retrievers.neighbours import labelled_questions
    from ..training import articles_fingerprint, trained_for_corpus

    if dataset.articles is None or not len(dataset.articles):
        return RetrieverSpec("bm25")  # building it says what is missing
    found = trained_for_corpus(articles_fingerprint(dataset.articles))

    def stored(encoder: str) -> bool:
        return DenseRetriever.is_stored(dataset.articles, encoder, cache_root=cache_root)

    visitor = first_visitor(rankers=found["ranker"], dense=[e for e in [*found["adapter"], "use"] if stored(e)],
                            use_stored=stored("use"),
                            neighbours=bool(labelled_questions(dataset, "train")[0]))
    return visitor.spec()


def _write(out: str, text: str) -> None:
    if out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_text_atomic(out, text)


def cmd_run(args: argparse.Namespace) -> int:
    """Handler of ``run``; returns the exit code."""
    if args.depth < 1:
        return fail("run", "--depth must be at least 1")
    fmt = args.format or ("json" if str(args.out).lower().endswith(".json") else "trec")
    if args.tag is not None and (not args.tag.strip() or re.search(r"\s", args.tag)):
        return fail("run", "--tag must be one word (no spaces)")
    progress = TqdmProgress(enabled=not args.no_progress)
    built = _build(args, "run", progress)
    if isinstance(built, int):
        return built
    dataset, retriever, _ = built
    try:
        questions = dataset.questions(args.split)
    except DataError as exc:
        return fail("run", exc)
    qids = [str(q) for q in questions["id"]]
    texts = question_texts(questions, query_text=args.query_text)
    try:
        hits = search_all(retriever, texts, args.depth, progress)
    except ValueError as exc:
        return fail("run", exc)
    finally:
        progress.close()
    tag = run_tag(args.tag) if args.tag else run_tag(retriever.name, args.query_text)
    try:
        _write(args.out, format_run(qids, ranked_pairs(hits), fmt, tag))
    except OSError as exc:
        return fail("run", f"cannot write {args.out}: {exc.strerror or exc}")
    where = "stdout" if args.out == "-" else args.out
    print(f"bsard_demo run: {len(qids)} questions × up to {min(args.depth, len(dataset.articles))} articles "
          f"({retriever.name}) written to {where} as {fmt}", file=sys.stderr)
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """Handler of ``index``; returns the exit code."""
    refused = check_export_arguments(args)
    if refused is not None:
        return refused
    progress = TqdmProgress(enabled=not args.no_progress)
    built = _build(args, "index", progress)
    if isinstance(built, int):
        return built
    dataset, retriever, spec = built
    print(f"bsard_demo index: {retriever.name} ready over {len(dataset.articles)} articles of {dataset.name}",
          file=sys.stderr)
    return export_and_push(args, dataset, spec, retriever) if wants_export(args) else 0
