"""The bundled sample cut to a few articles, as a dataset folder, for tests that embed a corpus
with a torch model (a few seconds instead of minutes on a busy 2-core machine)."""
from __future__ import annotations

import shutil
from pathlib import Path


def small_sample_folder(root: Path, n_articles: int = 60, max_chars: int | None = None,
                        header_chars: int | None = None) -> Path:
    """Write ``articles.csv`` (every gold article of the sample's questions, then other articles
    up to ``n_articles``) and both question files into ``root``; returns ``root``. ``max_chars``:
    each article's text cut to its words within that many characters (still real text, and still
    longer than a 32-token window: a dense build of it pools several windows, for fewer of them);
    ``header_chars``: each of its other text fields (reference, code, ..., description) likewise."""
    from bsard_demo.sources import load_dataset

    ds = load_dataset("sample")
    questions = {s: ds.questions(s) for s in ds.split_names}
    gold = {a for q in questions.values() for ids in q["article_ids"] for a in ids}
    others = [a for a in ds.articles["id"] if a not in gold][:max(0, n_articles - len(gold))]
    root.mkdir(parents=True, exist_ok=True)
    articles = cut_fields(ds.articles[ds.articles["id"].isin(gold | set(others))], max_chars, header_chars)
    articles.to_csv(root / "articles.csv", index=False)
    for split, q in questions.items():
        q.assign(article_ids=[",".join(ids) for ids in q["article_ids"]]).to_csv(root / f"questions_{split}.csv",
                                                                                 index=False)
    return root


def cut_fields(articles, max_chars: int | None = None, header_chars: int | None = None):
    """``articles`` (a DataFrame) with each text cut by :func:`cut_words` to ``max_chars`` and each of its other
    indexed fields (reference, code, ..., description) to ``header_chars`` (``None``: left whole; a missing value
    stays missing)."""
    from bsard_demo.analyzer import DEFAULT_FIELDS

    limits = {c: max_chars if c == "article" else header_chars for c in DEFAULT_FIELDS if c in articles.columns}
    return articles.assign(**{c: [t if not isinstance(t, str) else cut_words(t, limit) for t in articles[c]]
                              for c, limit in limits.items() if limit is not None})


def cut_words(text: str, max_chars: int) -> str:
    """``text`` cut after its last whole word within ``max_chars`` characters (whole when it fits)."""
    text = str(text)
    if len(text) <= max_chars:
        return text
    head = text[:max_chars + 1]
    return head[:head.rfind(" ")].rstrip() if " " in head else text[:max_chars]


class one_torch_thread:
    """Context manager: torch on one thread (two threads ran ~3x slower on a busy 2-core machine)."""

    def __enter__(self):
        import torch

        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self._threads)
        return False


def use_index(dataset, root: Path) -> Path:
    """``root``, an index cache holding ``dataset``'s corpus embedded by ``use`` (what the app's hybrid, the
    adapter's base and the ranker's ``use`` input load): tests that need those embeddings start their caches as
    copies of it (:func:`cache_copy`) instead of embedding the corpus again (the sample: ~3.7 CPU s each)."""
    from bsard_demo.retrievers import RetrieverSpec, build_retriever

    build_retriever(RetrieverSpec("dense", {"encoder": "use"}), dataset, cache_root=root)
    return root


def cache_copy(index: Path, dest: Path) -> Path:
    """``dest``, a cache of its own holding ``index``'s entries (a copy: the shared one stays as built)."""
    return Path(shutil.copytree(index, dest, dirs_exist_ok=True))
