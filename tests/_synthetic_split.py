"""A dataset folder holding a ``questions_synthetic.csv`` beside the sample's files (issue 30, item 6): synthetic
questions whose ids repeat the train split's (keys must stay unique over the union), one per train question citing
its first gold article, plus one TWIN: the text of a test question, citing an article no other question cites."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from _small_sample import small_sample_folder
from bsard_demo.sources import load_dataset


def synthetic_folder(root: Path, n_articles: int = 130) -> dict:
    """Write the folder; returns ``{"folder", "twin_text", "twin_article", "synthetic"}``."""
    folder = small_sample_folder(root, n_articles)
    ds = load_dataset(folder)
    cited = {a for s in ds.split_names for ids in ds.questions(s)["article_ids"] for a in ids}
    lonely = next(a for a in ds.articles["id"] if a not in cited)
    train, test = ds.questions("train"), ds.questions("test")
    rows = [{"id": qid, "category": "", "subcategory": "", "question": f"Que prévoit la règle suivante : {text} ?",
             "extra_description": "", "article_ids": ids[0]}
            for qid, text, ids in zip(train["id"], train["question"], train["article_ids"])]
    twin = str(test["question"].iloc[0])
    rows.append({"id": "999999", "category": "", "subcategory": "", "question": twin, "extra_description": "",
                 "article_ids": lonely})
    frame = pd.DataFrame(rows)
    frame.to_csv(folder / "questions_synthetic.csv", index=False)
    return {"folder": folder, "twin_text": twin, "twin_article": lonely, "synthetic": frame}
