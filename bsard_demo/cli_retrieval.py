"""The ``run`` and ``index`` commands: search every question of a split, or prebuild an index.

``run`` writes one ranking of ``--depth`` articles for every question of the split (TREC by
default, tagged with the retriever and its settings; or JSON ``{qid: {docid: score}}``), in the
order convention of :mod:`bsard_demo.run`, so the file reads back with no problem through
:func:`bsard_demo.run_files.read_run_path`. Progress bars go to stderr; errors the user can fix
(data, options, output path) are one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from .cli import add_data_argument, one_line
from .dataset import DataError
from .retrievers import Retriever, RetrieverSpec, build_retriever
from .retrievers.hybrid import FUSION_METHODS
from .sources import default_spec, load_dataset

#: Append a question's ``extra_description`` (its topic path on the source website) to it? Off:
#: the published BSARD baselines search the question alone, so scores stay comparable. On the
#: bundled sample it helps a lot (BM25 test recall@10 61 -> 92 %, MAP@100 38 -> 71 %;
#: ``bench/bm25_quality.py sample``), but there the fictional articles' ``description`` headers
#: copy the questions' topic paths, so that gain is inflated.
DEFAULT_WITH_DESCRIPTION = False
_SEARCH_BATCH = 64


class TqdmProgress:
    """A :data:`~bsard_demo.retrievers.base.Progress` callback drawing one tqdm bar per message on stderr."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._bar = None
        self._message = None

    def __call__(self, done: int, total: int, message: str) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        done = max(0, min(done, total))
        if message != self._message or self._bar is None or total != self._bar.total:
            self.close()
            # disable=None: no bar when stderr is not a terminal (logs, CI)
            self._bar = tqdm(total=total, initial=done, desc=message, file=sys.stderr, leave=False,
                             dynamic_ncols=True, disable=None)
            self._message = message
        elif done > self._bar.n:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._message = None


def _common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", choices=("bm25", "dense", "hybrid"), default="bm25",
                   help="bm25 (default), dense (an encoder), or hybrid (BM25 + dense, fused)")
    p.add_argument("--encoder", default=None, metavar="NAME",
                   help="dense encoder: use (default), minilm, a sentence-transformers model id or folder")
    add_data_argument(p)
    bm25 = p.add_argument_group("BM25")
    bm25.add_argument("--k1", type=float, default=None, help="BM25 k1 (default 1.0)")
    bm25.add_argument("--b", type=float, default=None, help="BM25 b (default 0.6)")
    bm25.add_argument("--bm25-method", choices=("lucene", "robertson"), default=None,
                      help="BM25 idf variant (default lucene)")
    bm25.add_argument("--no-headers", action="store_true",
                      help="index the article text only, not its reference and headers")
    bm25.add_argument("--no-stem", action="store_true", help="no Snowball stemming")
    hybrid = p.add_argument_group("hybrid")
    hybrid.add_argument("--fusion", choices=FUSION_METHODS, default="rrf",
                        help="rrf: reciprocal rank fusion (default); weighted: weighted sum of min-max scores")
    hybrid.add_argument("--rrf-k", type=float, default=60.0, help="RRF constant k (default 60)")
    hybrid.add_argument("--alpha", type=float, default=0.5,
                        help="weighted fusion: weight of BM25, 1 - alpha that of the dense retriever (default 0.5)")
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
    p.add_argument("--format", choices=("trec", "json"), default=None,
                   help="trec (default) or json; a FILE ending in .json defaults to json")
    p.add_argument("--with-description", action=argparse.BooleanOptionalAction, default=DEFAULT_WITH_DESCRIPTION,
                   help="append each question's extra_description to it "
                        f"(default: {'on' if DEFAULT_WITH_DESCRIPTION else 'off'})")
    p.add_argument("--tag", default=None, help="run tag (default: the retriever and its settings)")
    p.set_defaults(func=cmd_run)
    return p


def add_index_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``index``: build a retriever's index into the cache, so later searches start fast."""
    p = subparsers.add_parser("index", help="prebuild a retriever's index into the cache",
                              description="Build (or check) a retriever's cached index over a dataset's articles.")
    _common_arguments(p)
    p.set_defaults(func=cmd_index)
    return p


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
    dense = {"encoder": args.encoder} if args.encoder else {}
    if args.retriever == "bm25":
        return RetrieverSpec("bm25", bm25)
    if args.retriever == "dense":
        return RetrieverSpec("dense", dense)
    return RetrieverSpec("hybrid", {
        "retrievers": [RetrieverSpec("bm25", bm25), RetrieverSpec("dense", dense)],
        "method": args.fusion, "rrf_k": args.rrf_k, "alpha": args.alpha,
    })


def run_tag(name: str) -> str:
    """A TREC run tag from a retriever name: no whitespace, only ``[A-Za-z0-9._=+,:/-]``."""
    tag = re.sub(r"\s+", "_", name.strip())
    tag = re.sub(r"[^A-Za-z0-9._=+,:/-]", "", tag)
    return tag or "run"


def question_texts(questions, with_description: bool) -> list[str]:
    """The text searched for each question: ``question``, plus ``extra_description`` if asked."""
    texts = []
    for q, extra in zip(questions["question"], questions["extra_description"]):
        q, extra = str(q or "").strip(), str(extra or "").strip()
        texts.append(f"{q}\n{extra}" if with_description and extra else q)
    return texts


def _say(command: str, message: str) -> None:
    """One line on stderr, even for a message naming a path that holds a line break."""
    print(one_line(f"bsard_demo {command}: {message}"), file=sys.stderr)


def _fail(command: str, message: str) -> int:
    _say(command, message)
    return 2


def _build(args: argparse.Namespace, command: str, progress: TqdmProgress):
    """(dataset, retriever) or an exit code."""
    try:
        spec = spec_from_args(args)
        dataset = load_dataset(args.data if args.data is not None else default_spec())
    except (DataError, ValueError) as exc:
        return _fail(command, str(exc))
    def notice(message: str) -> None:
        _say(command, f"note: {message}")

    cache_root = Path(args.cache_dir).expanduser() if args.cache_dir else None
    try:
        retriever = build_retriever(spec, dataset, cache_root=cache_root, progress=progress, notice=notice)
    except (DataError, ValueError) as exc:  # includes EncoderUnavailable
        return _fail(command, str(exc))
    finally:
        progress.close()
    return dataset, retriever


def search_all(retriever: Retriever, texts: Sequence[str], depth: int,
               progress: Callable[[int, int, str], None] | None = None) -> list:
    """``retriever.search_many`` over ``texts`` in batches, reporting progress."""
    out: list = []
    for start in range(0, len(texts), _SEARCH_BATCH):
        if progress:
            progress(start, len(texts), "searching questions")
        out.extend(retriever.search_many(texts[start:start + _SEARCH_BATCH], depth))
    if progress:
        progress(len(texts), len(texts), "searching questions")
    return out


def format_run(qids: Sequence[str], hits: Sequence[Sequence], fmt: str, tag: str) -> str:
    """TREC lines (``qid Q0 docid rank score tag``) or JSON ``{qid: {docid: score}}``."""
    if fmt == "json":
        return json.dumps({q: {h.article_id: h.score for h in hs} for q, hs in zip(qids, hits)}, ensure_ascii=False) + "\n"
    lines = [f"{q} Q0 {h.article_id} {rank} {h.score!r} {tag}"
             for q, hs in zip(qids, hits) for rank, h in enumerate(hs, 1)]
    return "\n".join(lines) + ("\n" if lines else "")


def _write(out: str, text: str) -> None:
    if out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(out).expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_run(args: argparse.Namespace) -> int:
    """Handler of ``run``; returns the exit code."""
    if args.depth < 1:
        return _fail("run", "--depth must be at least 1")
    fmt = args.format or ("json" if str(args.out).lower().endswith(".json") else "trec")
    if args.tag is not None and (not args.tag.strip() or re.search(r"\s", args.tag)):
        return _fail("run", "--tag must be one word (no spaces)")
    progress = TqdmProgress(enabled=not args.no_progress)
    built = _build(args, "run", progress)
    if isinstance(built, int):
        return built
    dataset, retriever = built
    try:
        questions = dataset.questions(args.split)
    except DataError as exc:
        return _fail("run", str(exc))
    qids = [str(q) for q in questions["id"]]
    texts = question_texts(questions, args.with_description)
    try:
        hits = search_all(retriever, texts, args.depth, progress)
    except ValueError as exc:
        return _fail("run", str(exc))
    finally:
        progress.close()
    tag = run_tag(args.tag or retriever.name)
    try:
        _write(args.out, format_run(qids, hits, fmt, tag))
    except OSError as exc:
        return _fail("run", f"cannot write {args.out}: {exc.strerror or exc}")
    where = "stdout" if args.out == "-" else args.out
    print(f"bsard_demo run: {len(qids)} questions × up to {min(args.depth, len(dataset.articles))} articles "
          f"({retriever.name}) written to {where} as {fmt}", file=sys.stderr)
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """Handler of ``index``; returns the exit code."""
    progress = TqdmProgress(enabled=not args.no_progress)
    built = _build(args, "index", progress)
    if isinstance(built, int):
        return built
    dataset, retriever = built
    print(f"bsard_demo index: {retriever.name} ready over {len(dataset.articles)} articles of {dataset.name}",
          file=sys.stderr)
    return 0
