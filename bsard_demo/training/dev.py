"""The dev figure of ``train``: the trained model scored on the test split, dense alone and fused
with BM25, exactly as ``run`` + ``evaluate`` give it."""
from __future__ import annotations

from pathlib import Path

from ..dataset import Dataset, parse_splits
from ..evaluation import evaluate
from ..retrievers import RetrieverSpec, build_retriever
from ..retrievers.base import Progress
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts, search_all
from ..retrievers.hybrid_specs import hybrid_spec, make_hybrid
from ..retrievers.kinds import DENSE, HYBRID
from ..retrievers.registry import BASE_PART

#: The split ``train`` scores its model on (its "dev figure"), when the dataset has it.
DEV_SPLIT = "test"
#: The corpus size up to which ``train`` scores its model by default: scoring encodes every article
#: with the new model (a trained MiniLM through ONNX: 4.95 articles/s on 2 busy cores, so 29,115
#: articles take over an hour and a half; docs/benchmarks.md, "Trained encoders through ONNX"),
#: a cost a user asks for with ``--evaluate``.
DEV_MAX_ARTICLES = 5000


def dev_evaluation(folder: Path, dataset: Dataset, split: str = DEV_SPLIT, *,
                   with_description: bool = DEFAULT_WITH_DESCRIPTION, cache_root: Path | None = None,
                   progress: Progress | None = None) -> dict:
    """R@100 and MAP@100 on ``split`` of the model ``folder``, dense alone and fused with BM25
    (the product's hybrid of that model: :func:`~bsard_demo.retrievers.hybrid_specs.hybrid_spec`),
    exactly as ``run`` + ``evaluate`` give them; the embeddings land in the cache, so those
    ``run`` lines then only load them. ``value`` is the dense R@100 (what a bundle's menu shows)."""
    dense = build_retriever(RetrieverSpec(DENSE.name, {"encoder": str(folder)}), dataset, cache_root=cache_root,
                            progress=progress)
    bm25 = build_retriever(RetrieverSpec(BASE_PART), dataset, cache_root=cache_root, progress=progress)
    hybrid = make_hybrid(hybrid_spec([str(folder)]), [bm25, dense], corpus_size=len(dataset.articles))
    questions = dataset.questions(split)
    texts = question_texts(questions, with_description)
    out: dict = {"split": split, "questions": len(questions), "measure": "recall@100"}
    for name, retriever in ((DENSE.name, dense), (HYBRID.name, hybrid)):
        hits = search_all(retriever, texts, min(100, len(dataset.articles)))
        ranked = {str(q): [h.article_id for h in hs] for q, hs in zip(questions["id"], hits)}
        means = evaluate(dataset.qrels(split), ranked, ks=(100,)).means
        out[name] = {"recall@100": means["recall@100"], "map@100": means["map@100"]}
    out["value"] = out[DENSE.name]["recall@100"]
    return out


def fitted_on_dev(split: str) -> bool:
    """Whether a model fitted on ``split`` (one or several, ``"train,synthetic"``) saw :data:`DEV_SPLIT`."""
    return DEV_SPLIT in parse_splits(split)


def dev_wanted(options, dataset: Dataset, notes: list[str]) -> bool:
    if options.evaluate is False or fitted_on_dev(options.split) or DEV_SPLIT not in dataset.splits:
        return False
    if options.evaluate is None and len(dataset.articles) > DEV_MAX_ARTICLES:
        notes.append(f"not scored on {DEV_SPLIT}: that encodes all {len(dataset.articles):,} articles with the new "
                     f"model (over {DEV_MAX_ARTICLES:,}); --evaluate does it, or the run lines below then evaluate")
        return False
    return True


def dev_asked(options, dataset: Dataset) -> bool:
    """Whether a model fitted with ``options`` (``evaluate``, ``split``) is scored on :data:`DEV_SPLIT`:
    unless ``--no-evaluate``, when it was not fitted on it and the dataset has it."""
    return options.evaluate is not False and not fitted_on_dev(options.split) and DEV_SPLIT in dataset.splits

