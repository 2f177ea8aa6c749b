"""The tiny corpus of the CLI and bundle tests: eight articles (lease, family, nationality) and
three questions about them, written as a local dataset folder; the commands run in-process; no
index bundle active around a test.

A test file that needs other data derives it here (:func:`articles`' options, or its own
questions) and writes it with :func:`make_data`. Fixtures are imported by name
(``from _tiny_corpus import data_dir, no_bundle  # noqa: F401``); ``no_bundle`` is autouse.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import pandas as pd
import pytest

from bsard_demo import bundles, cache
from bsard_demo.cli.main import build_parser

ARTICLE_TEXTS = (
    "Le bail de résidence principale est conclu pour neuf ans.",
    "La garantie locative ne peut excéder deux mois de loyer.",
    "Le locataire peut résilier le bail moyennant un préavis de trois mois.",
    "Les enfants doivent des aliments à leurs parents dans le besoin.",
    "Le divorce est prononcé lorsque la désunion des époux est irrémédiable.",
    "L'étranger peut acquérir la nationalité belge par déclaration.",
    "Le bailleur enregistre le bail dans les deux mois.",
    "La pension alimentaire est fixée selon les besoins de l'enfant.",
)


def articles(*, long_seventh: bool = False, codes: Sequence[str] | None = None) -> pd.DataFrame:
    """The eight articles, ids ``"1"``…``"8"``, references ``Art. 1``…; ``long_seventh``: the
    seventh one said 60 times (longer than a model's window); ``codes``: a ``code`` column."""
    texts = list(ARTICLE_TEXTS)
    if long_seventh:
        texts[6] = f"{texts[6]} " * 60
    frame = pd.DataFrame({
        "id": [str(i) for i in range(1, 9)],
        "reference": [f"Art. {i}" for i in range(1, 9)],
        "article": texts,
    })
    return frame if codes is None else frame.assign(code=list(codes))


ARTICLES = articles()
#: Three test questions: the deposit (article 2), ending a lease (3 and 7), the divorce (5).
QUESTIONS = pd.DataFrame({
    "id": ["10", "11", "12"], "category": ["Logement", "Logement", "Famille"], "subcategory": [""] * 3,
    "question": ["Quel est le montant maximal de la garantie locative ?", "Comment résilier mon bail ?",
                 "Comment obtenir le divorce ?"],
    "extra_description": [""] * 3, "article_ids": ["2", "3,7", "5"],
})


def make_data(folder: Path, articles: pd.DataFrame = ARTICLES, questions: pd.DataFrame = QUESTIONS) -> Path:
    """``folder`` (made) with ``articles.csv`` and ``questions_test.csv``: a dataset for ``--data``."""
    folder.mkdir(parents=True)
    articles.to_csv(folder / "articles.csv", index=False)
    questions.to_csv(folder / "questions_test.csv", index=False)
    return folder


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """The tiny corpus as ``tmp_path / "data"``."""
    return make_data(tmp_path / "data")


@contextmanager
def without_bundle(monkeypatch) -> Iterator[None]:
    """No ``$BSARD_INDEX`` nor ``$HF_TOKEN``, the hub offline, no bundle active and no cache use
    recorded; no bundle active and no use recorded afterwards either."""
    monkeypatch.delenv("BSARD_INDEX", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bundles.deactivate()
    cache.forget_used()
    try:
        yield
    finally:
        bundles.deactivate()
        cache.forget_used()


@pytest.fixture(autouse=True)
def no_bundle(monkeypatch):
    """:func:`without_bundle` around every test of a file that imports it."""
    with without_bundle(monkeypatch):
        yield


def run_cli(*argv: str) -> int:
    """``python -m bsard_demo ARGV`` in-process, through the real parser (every command), without
    :func:`bsard_demo.cli.main.main`'s runtime set-up and last-resort handlers: an exception
    reaches the test."""
    args = build_parser().parse_args(list(argv))
    return args.func(args)
