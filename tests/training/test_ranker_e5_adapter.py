"""The learned ranker over a query adapter on e5 (bsard_demo/training/ranker.py, issue 41 item 1): ``train --base e5``
fits the adapter over e5 through ONNX Runtime and its record says so; ``train --ranker`` reads it as the
``e5adapter`` input (its runs out of fold), the folder carries it, and ``run --retriever ranker`` ranks as the
library, its part on the very e5 the ranker's ``e5`` input runs. On tiny_data cut to the articles its train questions
and first test questions cite (:func:`cited_only`): e5 embeds ~40 short articles, not ~110 (4.2 CPU s of the test's
6.2 were e5's corpus embeddings)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bsard_demo.cli.main import main

pytest.importorskip("lightgbm")
pytest.importorskip("onnxruntime", reason="e5 through ONNX Runtime needs onnxruntime (requirements.txt)")


#: The test questions kept (their gold articles stay in the corpus).
TEST_QUESTIONS = 5


def cited_only(data: Path, folder: Path) -> Path:
    """``data`` (a dataset folder) with its train questions, its first :data:`TEST_QUESTIONS` test questions and only
    the articles they cite, as a dataset folder."""
    import pandas as pd

    folder.mkdir()
    read = lambda name: pd.read_csv(data / name, dtype=str, keep_default_na=False)  # noqa: E731
    questions = {"train": read("questions_train.csv"), "test": read("questions_test.csv").head(TEST_QUESTIONS)}
    cited = {a for q in questions.values() for ids in q["article_ids"] for a in ids.split(",")}
    articles = read("articles.csv")
    articles[articles["id"].isin(cited)].to_csv(folder / "articles.csv", index=False)
    for split, q in questions.items():
        q.to_csv(folder / f"questions_{split}.csv", index=False)
    return folder


def test_a_ranker_reads_an_adapter_on_e5_as_its_e5adapter_input(tiny_data, tmp_path):
    from bsard_demo.app.answers import part_label
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.retrievers.adapter import read_adapter
    from bsard_demo.retrievers.encoders import resolve_encoder
    from bsard_demo.retrievers.ranker import ADAPTER_INPUTS, part_specs, read_ranker
    from bsard_demo.sources import load_dataset
    from bsard_demo.training.ranker import RankerOptions, ranker_systems

    data = cited_only(tiny_data, tmp_path / "data")
    cache, adapter, ranker = tmp_path / "cache", tmp_path / "e5-adapter", tmp_path / "ranker"
    common = ["--data", str(data), "--cache-dir", str(cache), "--no-progress", "--no-evaluate"]
    assert main(["train", "--base", "e5", "--out", str(adapter), "--adapter-steps", "3", *common]) == 0
    assert read_adapter(adapter)[1]["base"]["backend"] == "onnx"
    # by default an adapter's input is among the ranker's when its folder is given, and only then
    assert ranker_systems(RankerOptions(out=ranker, adapters=[adapter]))[0] == ["bm25", "use", "neighbours", "e5",
                                                                               "e5adapter"]
    assert main(["train", "--ranker", "--ranker-adapter", str(adapter), "--ranker-inputs", "bm25,e5adapter",
                 "--folds", "2", "--out", str(ranker), *common]) == 0
    record, _, adapters = read_ranker(ranker)
    assert record["systems"] == ["bm25", "e5adapter"] and record["adapter"] is None
    assert record["e5adapter"]["base"] == "e5" and adapters == {"e5adapter": ranker / "e5-adapter"}
    assert part_specs(ranker)["e5adapter"] == ("dense", {"encoder": str(ranker / "e5-adapter")})

    run = tmp_path / "r.trec"
    assert main(["run", "--retriever", "ranker", "--encoder", str(ranker), "--data", str(data), "--split", "test",
                 "--cache-dir", str(cache), "--out", str(run), "--no-progress"]) == 0
    ds = load_dataset(str(data))
    built = build_retriever(RetrieverSpec("ranker", {"model": str(ranker)}), ds, cache_root=cache)
    assert built.parts["e5adapter"].encoder.base is resolve_encoder("e5", "onnx")
    first = ds.questions("test").iloc[0]
    lines = [ln.split() for ln in run.read_text().splitlines() if ln.split()[0] == str(first["id"])]
    assert lines and [ln[2] for ln in lines] == [h.article_id for h in built.search(str(first["question"]),
                                                                                     len(lines))]
    assert [part_label(s, tuple(ADAPTER_INPUTS.values())) for s in built.systems] == ["BM25", "adaptateur e5"]
