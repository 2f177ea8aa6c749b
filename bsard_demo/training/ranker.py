"""``train --ranker``: fit the learned ranker (:mod:`bsard_demo.retrievers.ranker`) on a split's labelled questions
and write its folder (record, trees, the query adapters it reads), usable as ``run --retriever ranker --encoder DIR``.

Every feature made from the split's labels is out-of-fold or leave-one-out: each adapter's runs come from adapters
fitted on the other folds, the neighbours never draw on the question itself, the citation prior leaves it out.
Over several splits (``--train-splits train,synthetic``) the rules hold over their union: folds are cut over it,
and a question's same-text twins (in any split) share its fold, are never its neighbours, and leave its prior.
LightGBM (``lightgbm``, a training dependency only) fits; the folder is served by numpy (:mod:`..retrievers.trees`).
Settings: :data:`CHOSEN` of :data:`CONFIGS`, by 5-fold CV on frlaw-dev train (docs/effectiveness.md, "Learned ranker").
"""
from __future__ import annotations

import importlib.metadata
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import settings
from ..dataset import DataError, Dataset, parse_splits
from ..evaluation import evaluate
from ..retrievers import RetrieverSpec, build_retriever
from ..retrievers.adapter import AdapterSettings, adapt, base_backend, fit_adapter, read_adapter, record_base
from ..retrievers.base import DEFAULT_DEPTH, Progress, Step, report_progress
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts, search_all
from ..retrievers.encoder_base import normalize_rows
from ..retrievers.kinds import RANKER
from ..retrievers.neighbours import fold as fold_text, labelled_questions
from ..retrievers.ranker import (
    ADAPTER_INPUTS,
    BASE_INPUT,
    CANDIDATES,
    INPUTS,
    KIND,
    NEIGHBOURS_INPUT,
    RECORD_FILE,
    SYSTEMS,
    TREES_FILE,
    article_lengths,
    citation_counts,
    feature_names,
    input_spec,
    question_features,
)
from ..retrievers.structure import StructureSettings, graph_of
from ..retrievers.trees import TreeEnsemble
from . import folders
from .dev import DEV_SPLIT, dev_asked, fitted_on_dev
from .folders import TrainResult, prepare_out

#: LightGBM's settings for every configuration: LambdaRank, seeded, one thread, deterministic.
BASE = {"num_threads": 1, "deterministic": True, "force_col_wise": True, "seed": 0, "verbose": -1,
        "objective": "lambdarank", "lambdarank_truncation_level": 200}
CONFIGS = {
    "l15-200": {"num_leaves": 15, "learning_rate": 0.05, "n_estimators": 200, "min_child_samples": 50},
    "l31-200": {"num_leaves": 31, "learning_rate": 0.05, "n_estimators": 200, "min_child_samples": 50},
    "l7-300": {"num_leaves": 7, "learning_rate": 0.05, "n_estimators": 300, "min_child_samples": 100},
    "l15-500-slow": {"num_leaves": 15, "learning_rate": 0.02, "n_estimators": 500, "min_child_samples": 100},
    "l15-200-bag": {"num_leaves": 15, "learning_rate": 0.05, "n_estimators": 200, "min_child_samples": 50,
                    "colsample_bytree": 0.7, "subsample": 0.8, "subsample_freq": 1},
    "l15-200-xendcg": {"num_leaves": 15, "learning_rate": 0.05, "n_estimators": 200, "min_child_samples": 50,
                       "objective": "rank_xendcg"},
    "l7-300-bag": {"num_leaves": 7, "learning_rate": 0.05, "n_estimators": 300, "min_child_samples": 100,
                   "colsample_bytree": 0.7, "subsample": 0.8, "subsample_freq": 1},
    "l7-600-slow": {"num_leaves": 7, "learning_rate": 0.025, "n_estimators": 600, "min_child_samples": 100},
    "l3-500": {"num_leaves": 3, "learning_rate": 0.05, "n_estimators": 500, "min_child_samples": 100},
}
#: The configuration ``train --ranker`` fits: the best held-out R@100 + MAP@100 of the CV (70.75 / 29.78).
CHOSEN = "l7-300"


def fit_lambdarank(matrices: Sequence[np.ndarray], labels: Sequence[np.ndarray], config: dict):
    """A fitted ``lightgbm.LGBMRanker`` over questions' feature matrices and 0/1 labels (one group
    each). :class:`DataError` when lightgbm is not installed."""
    try:
        import lightgbm as lgb  # optional: train --ranker only; serving uses retrievers/trees.py
    except ImportError:
        raise DataError("train --ranker needs LightGBM (pip install lightgbm); serving the folder does not") from None
    model = lgb.LGBMRanker(**{**BASE, **config})
    model.fit(np.vstack(matrices), np.concatenate(labels), group=[len(y) for y in labels])
    return model


@dataclass
class RankerOptions:
    out: str | Path
    #: The query adapter folders whose runs it reads, each the input of its base (:data:`ADAPTER_INPUTS`: one on use,
    #: one on e5 at most).
    adapters: Sequence[str | Path] = ()
    split: str = "train"
    folds: int = 5
    seed: int = 0
    config: str = CHOSEN
    evaluate: bool | None = None
    overwrite: bool = False
    data: str | None = None
    cache_root: Path | None = None
    #: The input systems, comma-separated names of :data:`~..retrievers.ranker.INPUTS`; None: the default
    #: :data:`~..retrievers.ranker.SYSTEMS` (an adapter input only when its adapter folder is given).
    systems: str | None = None


def adapter_inputs(options: RankerOptions) -> tuple[dict[str, tuple[Path, dict]], list[str]]:
    """``(inputs, problems)``: each readable adapter of ``options.adapters`` as its input (:data:`ADAPTER_INPUTS`)
    -> ``(folder, record)``, and a line for each one that cannot be an input (unreadable, a base no input reads, a
    base run otherwise than the ranker's input, a second adapter on one base, a folder name taken)."""
    inputs: dict[str, tuple[Path, dict]] = {}
    problems: list[str] = []
    names: set[str] = set()
    for folder in options.adapters:
        folder = Path(folder).expanduser().resolve()
        try:
            _, record = read_adapter(folder)
        except (ValueError, OSError) as exc:
            problems.append(str(exc)[:300])
            continue
        base, backend = record_base(record)
        system = ADAPTER_INPUTS.get(base)
        if system is None:
            problems.append(f"{folder.name}: an adapter on {base}, which no input reads (adapters on "
                            f"{', '.join(ADAPTER_INPUTS)})")
        elif backend != base_backend(base):
            problems.append(f"{folder.name}: an adapter on {base} run as {backend}, not as the ranker's {base} "
                            f"({base_backend(base)}): train it again")
        elif system in inputs:
            problems.append(f"two adapters on {base} ({inputs[system][0].name}, {folder.name})")
        elif folder.name in names:
            problems.append(f"two adapter folders named {folder.name}")
        else:
            inputs[system] = folder, record
            names.add(folder.name)
    return inputs, problems


def ranker_systems(options: RankerOptions) -> tuple[list[str], dict[str, tuple[Path, dict]]]:
    """``(systems, adapters)``: the input systems ``options`` asks for, in :data:`~..retrievers.ranker.INPUTS` order,
    and the adapters among them (input -> ``(folder, record)``, as :func:`adapter_inputs` read them). Raises
    :class:`ValueError` with one line naming every problem (an unknown name, no ``bm25``, an adapter folder that
    cannot be read or be an input, an adapter input without its folder or a folder without its input)."""
    adapters, problems = adapter_inputs(options)
    bases = {system: base for base, system in ADAPTER_INPUTS.items()}
    if options.systems is None:
        asked = [s for s in SYSTEMS if s not in bases or s in adapters]
    else:
        asked = [s.strip() for s in str(options.systems).split(",") if s.strip()]
        problems += [f"{s[:40]!r} is not one of {', '.join(INPUTS)}" for s in asked if s not in INPUTS][:5]
        if BASE_INPUT not in asked:
            problems.append("bm25 must be among them")
        problems += [f"{s} needs --ranker-adapter with an adapter on {bases[s]}" for s in bases
                     if s in asked and s not in adapters]
        problems += [f"--ranker-adapter {adapters[s][0].name} is given but {s} is not among them" for s in adapters
                     if s not in asked]
    if problems:
        raise ValueError(f"--ranker-inputs / --ranker-adapter: {'; '.join(problems)}")
    return [s for s in INPUTS if s in asked], adapters


def fold_of(n: int, folds: int, seed: int) -> np.ndarray:
    """Each of ``n`` questions' fold (0 … ``folds`` - 1), a seeded permutation cut in equal parts."""
    out = np.empty(n, dtype=np.int64)
    out[np.random.default_rng(seed).permutation(n)] = np.arange(n) % folds
    return out


def same_text_groups(texts: Sequence[str]) -> np.ndarray:
    """Each question's group: the first-seen order of its folded text (:func:`~..retrievers.neighbours.fold`), so
    questions of the same text, from one split or several, share a group; all texts distinct: ``0 … n - 1``."""
    first: dict[str, int] = {}
    return np.array([first.setdefault(fold_text(t), len(first)) for t in texts], dtype=np.int64)


def folds_by_text(texts: Sequence[str], folds: int, seed: int) -> np.ndarray:
    """Each question's fold, :func:`fold_of` over the :func:`same_text_groups`: a question and its same-text twins
    (a training question repeated in a synthetic split) are held out together, never fitted on while held
    out. With all texts distinct, exactly ``fold_of(len(texts), folds, seed)``."""
    groups = same_text_groups(texts)
    return fold_of(int(groups.max()) + 1 if len(groups) else 0, folds, seed)[groups]


def left_out_priors(gold: Sequence[np.ndarray], texts: Sequence[str], n_articles: int):
    """Each question's citation prior (:func:`~..retrievers.ranker.citation_counts` over the training questions)
    without its own labels nor those of its same-text twins (leave-one-out across splits), one at a time."""
    prior_all = citation_counts(gold, n_articles)
    groups = same_text_groups(texts)
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(int(g), []).append(i)
    for g in groups:
        prior = prior_all.copy()
        for j in members[int(g)]:
            prior[np.unique(gold[j])] -= 1
        yield prior


def _adapter_runs(options: RankerOptions, record: dict, texts, gold, dense, depth: int, progress):
    """Each question's run of an adapter (its folder's ``record``) over ``dense`` (its base's retriever) from an
    adapter fitted on the other folds (:func:`folds_by_text`), with the settings of that record."""
    base = record_base(record)[0]
    known = {k: v for k, v in (record.get("settings") or {}).items() if k in AdapterSettings.__dataclass_fields__}
    fit_settings = AdapterSettings(**known).check()
    queries = np.vstack([normalize_rows(dense.encoder.encode_queries([t], batch_size=1)) for t in texts])
    folds_of = folds_by_text(texts, options.folds, options.seed)
    runs: list = [None] * len(texts)
    for f in range(options.folds):
        report_progress(progress, f, options.folds, Step("fitting_adapter", encoder=base))
        held = np.flatnonzero(folds_of == f)
        rest = np.flatnonzero(folds_of != f)
        matrix, _ = fit_adapter(queries[rest], [gold[i] for i in rest], dense.embeddings, fit_settings, None,
                                name=base)
        for i, ranking in zip(held, dense.rank_vectors(adapt(queries[held], matrix), depth)):
            runs[i] = ranking
    return runs


def train_inputs(options: RankerOptions, dataset: Dataset, progress: Progress | None = None):
    """``(systems, texts, gold, runs, votes)``: the split's labelled questions, each system's run of
    each (system -> list of (rows, scores)), out-of-fold or leave-one-out, and the neighbours' votes."""
    texts, gold = labelled_questions(dataset, options.split)
    systems, adapters = ranker_systems(options)
    depth = min(DEFAULT_DEPTH, len(dataset.articles))
    searched = [s for s in systems if s not in adapters]
    bases = {s: record_base(record)[0] for s, (_, record) in adapters.items()}
    needed = searched + [b for b in dict.fromkeys(bases.values()) if b not in searched]
    built = {name: build_retriever(RetrieverSpec(*input_spec(name, split=options.split)), dataset,
                                   cache_root=options.cache_root, progress=progress) for name in needed}
    runs = {name: built[name].search_rows(texts, depth) for name in searched}
    for system, (_, record) in adapters.items():
        runs[system] = _adapter_runs(options, record, texts, gold, built[bases[system]], depth, progress)
    votes = [built[NEIGHBOURS_INPUT].votes(t) if NEIGHBOURS_INPUT in built else (None, None) for t in texts]
    return systems, texts, gold, runs, votes


def train_ranker(options: RankerOptions, dataset: Dataset, progress: Progress | None = None) -> TrainResult:
    """Fit and write the ranker folder ``options.out``. Raises :class:`ValueError` (settings, the
    adapter folder) and :class:`~bsard_demo.dataset.DataError` (data, output folder, no lightgbm)."""
    t0 = time.perf_counter()
    settings.prepare_runtime()
    if options.config not in CONFIGS:
        raise ValueError(f"--ranker-config {options.config!r}: choose {', '.join(CONFIGS)}")
    if int(options.folds) < 2:
        raise ValueError(f"--folds must be at least 2, not {options.folds}")
    _, adapters = ranker_systems(options)  # refused before anything is read or written
    folders.check_fit_data(dataset, options.split, "the ranker ranks the corpus' articles")
    options.split = ",".join(parse_splits(options.split))
    out = Path(options.out).expanduser().resolve()
    prepare_out(out, options.overwrite)
    systems, texts, gold, runs, votes = train_inputs(options, dataset, progress)
    if len(texts) < 2 * options.folds:
        raise DataError(f"split '{options.split}' of {dataset.name} has {len(texts)} labelled question(s): too few "
                        f"to fit a ranker ({2 * options.folds} at least with {options.folds} folds)")
    graph, structure = graph_of(dataset.articles), StructureSettings()
    lengths = article_lengths(dataset.articles)
    matrices, labels = [], []
    # leave-one-out: a question's own labels (and its same-text twins') are not in its prior
    for i, prior in enumerate(left_out_priors(gold, texts, len(dataset.articles))):
        rows, X = question_features({s: runs[s][i] for s in systems}, graph=graph, structure=structure,
                                    prior=prior, lengths=lengths, votes=votes[i][0], votes_sim=votes[i][1],
                                    systems=systems)
        matrices.append(X)
        labels.append(np.isin(rows, gold[i]).astype(np.int32))
    t_fit = time.perf_counter()
    report_progress(progress, 0, 1, Step("fitting_ranker"))
    model = fit_lambdarank(matrices, labels, CONFIGS[options.config])
    fit_seconds = time.perf_counter() - t_fit

    ensemble = TreeEnsemble.from_lightgbm(model.booster_)
    sample = np.vstack(matrices[: min(20, len(matrices))])
    gap = float(np.max(np.abs(ensemble.predict(sample) - model.booster_.predict(sample, raw_score=True))))
    if not gap <= 1e-9:
        raise RuntimeError(f"the numpy trees differ from LightGBM's prediction by {gap:g}")
    notes = []
    if fitted_on_dev(options.split):
        notes.append("fitted on the test split: its scores on that split are no longer held out")
    with folders.assembling(out) as tmp:
        (tmp / TREES_FILE).write_text(json.dumps(ensemble.as_dict(), separators=(",", ":")), encoding="utf-8")
        adapter_records = {s: None for s in ADAPTER_INPUTS.values()}
        for base, system in ADAPTER_INPUTS.items():
            if system in adapters:
                folder = adapters[system][0]
                shutil.copytree(folder, tmp / folder.name)
                adapter_records[system] = {"folder": folder.name, "base": base, "folds": int(options.folds),
                                           "seed": int(options.seed)}
        metadata = folders.base_record(KIND, dataset, spec=options.data, split=options.split,
                                       questions_used=len(texts))
        metadata |= {
            "base": {"name": "lightgbm lambdarank"}, "split": options.split,
            "systems": systems, "features": feature_names(systems), "structure": structure.as_dict(),
            "candidates": CANDIDATES, "depth": DEFAULT_DEPTH, **adapter_records,
            "settings": {"config": options.config, **BASE, **CONFIGS[options.config]},
            "pairs": int(sum(len(y) for y in labels)), "positives": int(sum(int(y.sum()) for y in labels)),
            "gold_in_candidates": round(float(np.mean([y.sum() / len(g) for y, g in zip(labels, gold)])), 4),
            "trees": int(model.booster_.num_trees()), "loss": {"last": None},
            "seconds": {"training": round(fit_seconds, 2), "total": None},
            "versions": {**folders.library_versions(), "lightgbm": _version("lightgbm")},
        }

        dev = (lambda: ranker_dev(tmp, dataset, cache_root=options.cache_root, progress=progress)) \
            if dev_asked(options, dataset) else None
        folders.finish_folder(tmp, out, metadata, t0, weights=[TREES_FILE], record_file=RECORD_FILE, dev=dev)
    return TrainResult(out, metadata, time.perf_counter() - t0, data=options.data, notes=notes)


def ranker_dev(folder: Path, dataset: Dataset, split: str = DEV_SPLIT, *, cache_root: Path | None = None,
               progress: Progress | None = None) -> dict:
    """R@100 and MAP@100 on ``split`` of the ranker ``folder``, exactly as ``run`` + ``evaluate``."""
    ranker = build_retriever(RetrieverSpec(RANKER.name, {"model": str(folder)}), dataset, cache_root=cache_root,
                             progress=progress)
    questions = dataset.questions(split)
    hits = search_all(ranker, question_texts(questions, DEFAULT_WITH_DESCRIPTION), min(100, len(dataset.articles)))
    means = evaluate(dataset.qrels(split), {str(q): [h.article_id for h in hs] for q, hs in zip(questions["id"], hits)},
                     ks=(100,)).means
    return {"split": split, "questions": len(questions), "measure": "recall@100",
            RANKER.name: {"recall@100": means["recall@100"], "map@100": means["map@100"]},
            "value": means["recall@100"]}


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""

