"""The learned ranker: its features (:func:`question_features`, columns :func:`feature_names`), its folder
(:data:`RECORD_FILE` + :data:`TREES_FILE` + the query adapters it was fitted with) and the retriever that serves it
(:class:`RankerRetriever`, kind ``ranker``). A question's candidates are the union of the top :data:`CANDIDATES` of
each input system (:data:`SYSTEMS`) and of the structure-rescored fusion (:mod:`.structure`). Serving is numpy
(:mod:`.trees`); LightGBM only fits (:mod:`bsard_demo.training.ranker`). Chosen on frlaw-dev train by 5-fold CV:
70.75 R@100 against 67.96 for the structure-rescored RRF (docs/effectiveness.md, "Learned ranker").

The candidates and every feature: docs/design.md, 'bsard_demo/retrievers/ranker.py'.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..dataset import DataError
from .base import Hit, clip_k, ranked_hits
from .hybrid import part_rows, run_together

#: Every system a ranker can read: its record names those it was fitted on (``bm25`` always among them).
INPUTS = ("bm25", "use", "adapter", "neighbours", "e5", "e5adapter")
#: The inputs the fit treats apart: BM25 (always among them), the query adapters (their runs out-of-fold, from their
#: folders: the record's entry of each) and the neighbours (their votes leave-one-out).
BASE_INPUT, ADAPTER_INPUT, NEIGHBOURS_INPUT = INPUTS[0], INPUTS[2], INPUTS[3]
#: The query adapters' inputs by their base: an adapter on ``use`` is ``adapter``, one on ``e5`` (through ONNX Runtime)
#: ``e5adapter``; each reads its base's embeddings, with no corpus re-encoding.
ADAPTER_INPUTS = {"use": ADAPTER_INPUT, "e5": "e5adapter"}
#: What ``train --ranker`` fits on by default (an adapter's input when its folder is given). 5-fold CV on frlaw-dev
#: train: e5 +2.12 R@100, +1.10 MAP@100; the use adapter +2.50 R@100; the e5 adapter +1.37 / +0.49, three seeds
#: (72.21 -> 73.58 / 31.71 -> 32.20; docs/effectiveness.md, "Learned ranker, issue 31" and "Issue 41").
SYSTEMS = INPUTS
#: RRF weights of the fused score (the product's defaults: BM25 1, a zero-shot encoder or an
#: adapter 0.5, neighbours 0.5) and its k.
FUSION_WEIGHTS = {"bm25": 1.0, "use": 0.5, "adapter": 0.5, "neighbours": 0.5, "e5": 0.5, "e5adapter": 0.5}
FUSION_K = 60.0
#: The neighbours' ``min_similarity`` among the ranker's inputs: none, as the rankers served were fitted (their votes
#: and run; the threshold of the hybrids, issue 38, would change the features they learned from without a refit).
NEIGHBOURS_MIN_SIMILARITY = 0.0
#: Articles taken from each system (and from the structure-rescored fusion) as candidates.
CANDIDATES = 200
#: Depth each system is searched to (the hybrid's depth): ranks beyond it count as missing.
DEPTH = 1000
_PER_SYSTEM = ("score", "rank", "norm", "gap")
_STRUCTURE = ("sibling", "section_best", "cited_by", "position", "section_size", "relative_position")


def feature_names(systems: Sequence[str] = SYSTEMS) -> list[str]:
    return ([f"{s}_{f}" for s in systems for f in _PER_SYSTEM] + ["votes", "votes_sim", "prior", "fused_score",
                                                                   "fused_rank", *_STRUCTURE, "length"])


FEATURES = feature_names()


def rrf_rows(runs: Mapping[str, tuple[np.ndarray, np.ndarray]], n_articles: int) -> tuple[np.ndarray, np.ndarray]:
    """The RRF (:data:`FUSION_K`, :data:`FUSION_WEIGHTS`) of ``runs`` (system -> (rows, scores),
    best first, rows -1 padded): fused rows best first (ties by row, stable) and their scores."""
    total = np.zeros(n_articles)
    for name, (rows, _) in runs.items():
        rows = np.asarray(rows)
        rows = rows[rows >= 0]
        total[rows] += FUSION_WEIGHTS.get(name, 1.0) / (FUSION_K + np.arange(1, len(rows) + 1))
    ranked = np.flatnonzero(total > 0)
    ranked = ranked[np.argsort(-total[ranked], kind="stable")]
    return ranked, total[ranked]


def question_features(runs: Mapping[str, tuple[np.ndarray, np.ndarray]], *, graph, structure, prior: np.ndarray,
                      lengths: np.ndarray, votes: np.ndarray | None = None, votes_sim: np.ndarray | None = None,
                      systems: Sequence[str] = SYSTEMS, candidates: int = CANDIDATES,
                      depth: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, X)``: one question's candidate corpus rows (ascending) and their feature matrix
    (columns :func:`feature_names` of ``systems``). ``runs``: system -> (rows, scores), best
    first (-1 padded); a system of ``systems`` absent from ``runs`` gives missing values.
    ``graph``: the corpus' :class:`~.structure.ArticleGraph`; ``structure``: the
    :class:`~.structure.StructureSettings` whose re-scoring of the fusion adds candidates;
    ``prior``, ``lengths`` (and ``votes``, ``votes_sim`` when given): arrays over the corpus."""
    from .structure import rescore_rows

    n = len(graph)
    fused_rows, fused_scores = rrf_rows(runs, n)
    pool = [np.asarray(r)[np.asarray(r) >= 0][:candidates] for r, _ in runs.values()]
    pool.append(fused_rows[:candidates])
    top = fused_scores[0] if len(fused_scores) else 1.0
    head, head_scores = fused_rows[:structure.depth], fused_scores[:structure.depth] / top
    if len(head):
        pool.append(rescore_rows(graph, head, head_scores, structure, candidates)[0])
    rows = np.unique(np.concatenate(pool)).astype(np.int64) if pool else np.zeros(0, dtype=np.int64)
    columns = []
    for name in systems:
        score = np.full(n, np.nan)
        rank = np.full(n, float(depth + 1))
        best = np.nan
        if name in runs:
            r, v = (np.asarray(a) for a in runs[name])
            ok = r >= 0
            r, v = r[ok][:depth], v[ok][:depth].astype(np.float64)
            score[r] = v
            rank[r] = np.arange(1, len(r) + 1)
            best = v[0] if len(v) else np.nan
        sc = score[rows]
        columns += [sc, rank[rows], sc / best if best and np.isfinite(best) else np.full(len(rows), np.nan), best - sc]
    zeros = np.zeros(len(rows))
    columns.append(votes[rows] if votes is not None else zeros)
    columns.append(votes_sim[rows] if votes_sim is not None else zeros)
    columns.append(np.log1p(prior[rows]))
    fused = np.zeros(n)
    fused[fused_rows] = fused_scores / top
    fused_rank = np.full(n, float(len(fused_rows) + 1))
    fused_rank[fused_rows] = np.arange(1, len(fused_rows) + 1)
    columns += [fused[rows], fused_rank[rows]]
    sib, _, ref = graph.propagate(head, head_scores, window=1, decay=1.0)
    size = graph.section_size[graph.section[rows]]
    position = graph.position[rows]
    columns += [sib[rows], section_best(graph, head, head_scores, rows), ref[rows], position, size,
                position / np.maximum(size - 1, 1), lengths[rows]]
    return rows, np.column_stack(columns).astype(np.float64)


def section_best(graph, head: np.ndarray, scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the best of ``scores`` of another article of its section among
    ``head`` (0 when none)."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    sections = graph.section[np.asarray(head)[order]]
    values = np.asarray(scores)[order]
    _, first = np.unique(sections, return_index=True)
    best = np.zeros(graph.n_sections)
    holder = np.full(graph.n_sections, -1)
    best[sections[first]] = values[first]
    holder[sections[first]] = np.asarray(head)[order][first]
    rest = np.ones(len(order), dtype=bool)
    rest[first] = False
    second = np.zeros(graph.n_sections)
    _, again = np.unique(sections[rest], return_index=True)
    second[sections[rest][again]] = values[rest][again]
    sec = graph.section[rows]
    return np.where(holder[sec] == rows, second[sec], best[sec])


def citation_counts(labels: Sequence[np.ndarray], n_articles: int) -> np.ndarray:
    """How many of the questions (``labels``: each one's distinct corpus rows) cite each article."""
    counts = np.zeros(n_articles)
    for rows in labels:
        np.add.at(counts, np.unique(np.asarray(rows, dtype=np.int64)), 1.0)
    return counts


def article_lengths(articles) -> np.ndarray:
    """Each article's length in words (white-space separated, ``str.split()``) of its text, corpus order.
    A plain loop over the texts: pandas' ``.str.split().str.len()``, the same counts, took 0.40 s
    against 0.21 s over frlaw-dev's 29,115 articles in a cold run's ranker build."""
    texts = articles["article"].fillna("").astype(str).tolist()
    return np.fromiter((len(t.split()) for t in texts), dtype=np.float64, count=len(texts))


#: Weight of the fusion's score (0-1) added to the model's: it orders the trees' ties (on frlaw-dev
#: test 138 of 150 questions had tied candidates) and nothing else (two distinct leaf sums differ by
#: far more), so a run file's order is its scores' order, as evaluators read it.
TIE_BREAK = 1e-6


def ranked_rows(rows: np.ndarray, X: np.ndarray, score: np.ndarray, systems: Sequence[str] = SYSTEMS):
    """``rows`` and their scores best first: the model's score plus :data:`TIE_BREAK` times the
    fusion's, remaining ties by the fusion's rank."""
    names = feature_names(systems)
    score = np.asarray(score, dtype=np.float64) + TIE_BREAK * np.nan_to_num(X[:, names.index("fused_score")])
    order = np.lexsort((X[:, names.index("fused_rank")], -score))
    return rows[order], score[order]


# -- the ranker's folder -------------------------------------------------------------------------
#: A ranker folder: its record (the name of every trained model's, with ``"kind": "ranker"``), the
#: trees (:meth:`.trees.TreeEnsemble.as_dict`) and, in a sub-folder the record names under each adapter input
#: (:data:`ADAPTER_INPUTS`), the query adapter that input's features came from.
RECORD_FILE = "bsard_training.json"
TREES_FILE = "trees.json"
KIND = "ranker"
_MAX_RECORD_BYTES = 1 << 20
_MAX_TREES_BYTES = 64 << 20


def is_ranker_folder(folder) -> bool:
    """Whether ``folder`` holds a learned ranker (its trees and a record of kind ``ranker``)."""
    from .encoder_base import read_json_record

    folder = Path(folder)
    if not (folder / TREES_FILE).is_file() or not (folder / RECORD_FILE).is_file():
        return False
    try:
        return read_json_record(folder / RECORD_FILE, _MAX_RECORD_BYTES).get("kind") == KIND
    except ValueError:
        return False


def read_record(folder) -> tuple[dict, dict[str, Path]]:
    """``(record, adapter folders)`` of a ranker folder (each adapter input among its systems -> its sub-folder), the
    record checked (not the trees: :func:`read_ranker`). Raises :class:`ValueError`: one line saying what is wrong."""
    from .encoder_base import read_kind_record

    folder = Path(folder)
    record = read_kind_record(folder, RECORD_FILE, KIND, "a learned ranker's", _MAX_RECORD_BYTES)
    systems = record.get("systems")
    if not isinstance(systems, list) or not systems or any(s not in INPUTS for s in systems) \
            or "bm25" not in systems or len(set(systems)) != len(systems):
        raise ValueError(f"{folder}: the record's systems {repr(systems)[:200]} are not a list of {', '.join(INPUTS)} "
                         "with bm25")
    if record.get("features") != feature_names(systems):
        raise ValueError(f"{folder}: the record's features are not this version's for {', '.join(systems)}; "
                         "train the ranker again")
    adapters = {}
    for system in (s for s in ADAPTER_INPUTS.values() if s in systems):
        name = record[system].get("folder") if isinstance(record.get(system), dict) else None
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
            raise ValueError(f"{folder}: the record names no sub-folder for its {system} input")
        adapters[system] = folder / name
    return record, adapters


def read_ranker(folder):
    """``(record, ensemble, adapter folders)`` of a ranker folder, every part checked
    (:func:`read_record`, then the trees against their sha256): :class:`ValueError` with one line
    saying what is wrong."""
    import json

    from .encoder_base import file_sha256
    from .trees import TreeEnsemble

    folder = Path(folder)
    record, adapters = read_record(folder)
    path = folder / TREES_FILE
    if path.stat().st_size > _MAX_TREES_BYTES:
        raise ValueError(f"{folder}: {TREES_FILE} is over {_MAX_TREES_BYTES >> 20} MB")
    if (record.get("weights_sha256") or {}).get(TREES_FILE) != file_sha256(path):
        raise ValueError(f"{folder}: {TREES_FILE} does not match its record's sha256 (altered or truncated); "
                         "train the ranker again")
    try:
        ensemble = TreeEnsemble.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{folder}: {TREES_FILE}: {exc}") from None
    if ensemble.num_features != len(record["features"]):
        raise ValueError(f"{folder}: the trees read {ensemble.num_features} features, the record names "
                         f"{len(record['features'])}")
    return record, ensemble, adapters


class RankerRetriever:
    """The learned ranker over its input systems (``parts``: system -> retriever, the keys of
    :data:`SYSTEMS` the folder was fitted with), the corpus' graph, the train split's citation
    prior and the articles' lengths; see :mod:`.ranker`."""

    def __init__(self, parts: Mapping[str, object], ensemble, *, article_ids: Sequence[str], graph, structure,
                 prior: np.ndarray, lengths: np.ndarray, name: str, systems: Sequence[str] = SYSTEMS,
                 candidates: int = CANDIDATES, depth: int = DEPTH):
        self.systems = tuple(systems)
        missing = [s for s in self.systems if s not in parts]
        if missing:
            raise ValueError(f"the learned ranker needs the {', '.join(missing)} system(s)")
        self.parts = {s: parts[s] for s in self.systems}
        self.retrievers = list(self.parts.values())  # what bundles walk for the indexes and models
        self.ensemble, self.graph, self.structure = ensemble, graph, structure
        self.article_ids = [str(a) for a in article_ids]
        self.prior, self.lengths = np.asarray(prior, dtype=np.float64), np.asarray(lengths, dtype=np.float64)
        self.candidates, self.depth, self.name = int(candidates), int(depth), name

    @property
    def size(self) -> int:
        return len(self.article_ids)

    def _features(self, runs: Mapping[str, tuple[np.ndarray, np.ndarray]], votes=(None, None)):
        """``(rows, X)`` of :func:`question_features` for one question: ``runs``, every system's
        ranking to the depth as ``(corpus rows, scores)``, and the neighbours' ``votes`` (:meth:`_votes`)."""
        return question_features(runs, graph=self.graph, structure=self.structure, prior=self.prior,
                                 lengths=self.lengths, votes=votes[0], votes_sim=votes[1], systems=self.systems,
                                 candidates=self.candidates, depth=self.depth)

    def search_arrays(self, question: str, k: int = 100) -> tuple[tuple[np.ndarray, np.ndarray], dict]:
        """``((rows, scores), runs)``: the ``k`` best corpus rows and their scores, best first, and
        each input system's own ranking to the depth (system -> ``(rows, scores)``, :attr:`systems`
        order), all arrays: no :class:`Hit` is built (:meth:`search` makes the top ``k`` ones)."""
        k = clip_k(k, self.size)
        runs, votes = self._inputs(run_together(self._input_calls(question)))
        return self._ranked(runs, votes, k), runs

    def _input_calls(self, question: str) -> list[Callable[[], object]]:
        """The searches of ``question``'s inputs, to run at once (:func:`run_together`): each input
        system to the depth, its ranking shared with the page's other columns (:func:`part_rows`,
        the memo of :func:`part_search`), then the neighbours' votes."""
        depth = min(self.depth, self.size)
        return [*(lambda r=r: part_rows(r, question, depth) for r in self.parts.values()),
                lambda: self._votes(question)]

    def _inputs(self, found: Sequence) -> tuple[dict, object]:
        """``(runs, votes)`` from the results of :meth:`_input_calls`."""
        return dict(zip(self.parts, found[:-1])), found[-1]

    def _ranked(self, runs, votes, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best rows and scores of a question from its inputs: the features and the trees."""
        rows, X = self._features(runs, votes)
        if not len(rows):
            return rows, np.zeros(0)
        rows, score = ranked_rows(rows, X, self.ensemble.predict(X), self.systems)
        return rows[:k], score[:k]

    def search_parts(self, question: str, k: int = 100) -> tuple[list[Hit], list[list[Hit]]]:
        """:meth:`search` with each input system's own ranking (in :attr:`systems` order), so a
        front end can say where each put a hit."""
        (rows, score), runs = self.search_arrays(question, k)
        return (ranked_hits(rows, score, self.article_ids),
                [ranked_hits(*runs[s], self.parts[s].article_ids) for s in self.parts])

    def _votes(self, question: str):
        return self.parts["neighbours"].votes(question) if "neighbours" in self.parts else (None, None)

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return ranked_hits(*self.search_arrays(question, k)[0], self.article_ids)

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        """:meth:`search` of each question, one question's features and trees computed while the
        next one's inputs search (:func:`run_together`): the same hits as one at a time. On frlaw-dev
        test (149 questions, 2 cores, load 2.5-3) 3.4 s against 4.0-4.8 s one question after another."""
        k = clip_k(k, self.size)
        questions = [str(q) for q in questions]
        out: list[list[Hit]] = []
        waiting = None  # the previous question's inputs, to rank
        for i in range(len(questions) + 1):
            calls = [] if waiting is None else [lambda w=waiting: self._ranked(*w, k)]
            if i < len(questions):
                calls += self._input_calls(questions[i])
            done = run_together(calls)
            if waiting is not None:
                out.append(ranked_hits(*done.pop(0), self.article_ids))
            waiting = self._inputs(done) if i < len(questions) else None
        return out


def part_specs(model) -> dict[str, tuple[str, dict]]:
    """The input systems of the ranker folder ``model``: system -> ``(kind, options)`` of the
    :class:`~.registry.RetrieverSpec` it was fitted on (BM25 and ``use`` with their defaults, the
    folder's adapters, the neighbours of its split). Raises :class:`ValueError` (the record)."""
    return _specs(*read_record(model))


def _specs(record: dict, adapters: Mapping[str, Path]) -> dict[str, tuple[str, dict]]:
    split = str(record.get("split") or "train")
    return {s: input_spec(s, split=split, adapter=adapters.get(s)) for s in record["systems"]}


def input_spec(system: str, *, split: str = "train", adapter: Path | str | None = None) -> tuple[str, dict]:
    """The ``(kind, options)`` of one input (:data:`INPUTS`): BM25 and ``use`` with their defaults, ``e5`` through
    ONNX Runtime (no torch to serve), an adapter input its ``adapter`` folder (whose record says how its base runs),
    the neighbours of ``split`` without a similarity threshold (:data:`NEIGHBOURS_MIN_SIMILARITY`)."""
    if system in ADAPTER_INPUTS.values():
        return "dense", {"encoder": str(adapter)}
    return {"bm25": ("bm25", {}), "use": ("dense", {"encoder": "use"}),
            "e5": ("dense", {"encoder": "e5", "backend": "onnx"}),
            "neighbours": ("neighbours", {"split": split, "min_similarity": NEIGHBOURS_MIN_SIMILARITY})}[system]


class RankerFolder:
    """A ranker folder as an index bundle carries it (``models/<name>/``: every file of the folder,
    its adapters' too), found by :mod:`bsard_demo.bundles` through :attr:`RankerRetriever.bundle_model`."""

    dim, max_tokens = 0, None

    def __init__(self, folder, record: dict):
        self.folder = Path(folder)
        self.model_name = self.name = self.folder.name
        self.version = str((record.get("weights_sha256") or {}).get(TREES_FILE, ""))
        self.record = {"base_model": "LightGBM LambdaRank"}

    def bundle_files(self) -> dict:
        return {p.relative_to(self.folder).as_posix(): p for p in sorted(self.folder.rglob("*")) if p.is_file()}


def build_ranker(dataset, model, *, build: Callable[[object], object]):
    """The :class:`RankerRetriever` of the ranker folder ``model`` over ``dataset``; ``build(spec)``
    builds each input system of :func:`part_specs` from its ``(kind, options)`` (the registry's
    :func:`~.registry.build_retriever`, or the app's shared builds). Raises :class:`ValueError` (the folder) and
    :class:`~bsard_demo.dataset.DataError` (the data: the ranker needs the labelled questions of
    the split it was fitted on)."""
    from .neighbours import labelled_questions
    from .structure import StructureSettings, graph_of

    folder = Path(model)
    record, ensemble, adapters = read_ranker(folder)
    split = str(record.get("split") or "train")
    _, labels = labelled_questions(dataset, split)
    if not labels:
        raise DataError(f"the learned ranker {folder.name} needs the labelled questions of split '{split}' of "
                        f"{dataset.name} (its neighbours and citation prior): none cites an article of the corpus")
    parts = {s: build(spec) for s, spec in _specs(record, adapters).items()}
    ranker = RankerRetriever(parts, ensemble, article_ids=dataset.articles["id"], graph=graph_of(dataset.articles),
                           structure=StructureSettings.from_options(record.get("structure") or {}),
                           prior=citation_counts(labels, len(dataset.articles)),
                           lengths=article_lengths(dataset.articles), name=f"ranker {folder.name}",
                           systems=record["systems"], candidates=int(record.get("candidates", CANDIDATES)),
                           depth=int(record.get("depth", DEPTH)))
    ranker.bundle_model = RankerFolder(folder, record)
    return ranker
