"""The Search page's example questions (``pages/search.py``'s first menu): those of the ``test`` split, else of
the first split, with their labels, and the gold articles of the one chosen while the question box still holds
its text."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..dataset import Dataset


def example_questions(dataset: Dataset, split: str = "test") -> pd.DataFrame:
    """The split's questions with labels: columns ``id, question, category, article_ids``
    (questions with an empty text dropped), in split order."""
    if split not in dataset.splits:
        return pd.DataFrame(columns=["id", "question", "category", "article_ids"])
    q = dataset.questions(split)
    q = q[q["question"].str.strip() != ""]
    return q[["id", "question", "category", "article_ids"]].reset_index(drop=True)


@dataclass(frozen=True)
class ExampleGold:
    """The labels of the chosen example question, while the question box still holds its text."""

    qid: str
    split: str
    category: str
    article_ids: list[str]


@dataclass
class Examples:
    """The example questions offered on the Search page: those of ``split`` (None: no split)."""

    split: str | None
    frame: pd.DataFrame
    texts: dict[str, str] = field(default_factory=dict)  # qid -> question text
    labels: dict[str, str] = field(default_factory=dict)  # qid -> the selectbox line

    def gold_for(self, chosen: str | None, question: str) -> ExampleGold | None:
        """The labels of example ``chosen`` when ``question`` is its text (stripped), else None."""
        if chosen is None or not self.split or self.texts.get(chosen, "").strip() != question:
            return None
        row = self.frame[self.frame["id"] == chosen].iloc[0]
        return ExampleGold(str(chosen), self.split, str(row["category"] or ""), list(row["article_ids"]))


def examples_of(dataset: Dataset) -> Examples:
    """The example questions of ``dataset``: its ``test`` split, else its first split (once per dataset)."""
    return dataset.memo("examples", lambda: _examples(dataset))


#: An example question's menu line keeps about this many characters of it (two lines of a phone's menu).
EXAMPLE_CHARS = 90


def _short(question: str) -> str:
    """The question's first :data:`EXAMPLE_CHARS` characters, cut at a word, « … » when cut."""
    if len(question) <= EXAMPLE_CHARS:
        return question
    return question[:EXAMPLE_CHARS].rsplit(" ", 1)[0] + " …"


def _examples(dataset: Dataset) -> Examples:
    split = "test" if "test" in dataset.splits else (dataset.split_names[0] if dataset.split_names else None)
    frame = example_questions(dataset, split) if split else example_questions(dataset)
    texts = dict(zip(frame["id"], frame["question"]))
    labels = {row.id: f"n° {row.id} · {row.category or 'sans catégorie'} · {_short(row.question)}"
              for row in frame.itertuples()}
    return Examples(split, frame, texts, labels)
