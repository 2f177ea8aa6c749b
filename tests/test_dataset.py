"""Dataset schema handling and the three sources (hub with a substituted download, folder, sample)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bsard_demo.dataset import DataError, normalize_articles, normalize_questions, parse_article_ids, read_csv_table
from bsard_demo.frame_memo import frame_memo, keeping
from bsard_demo.sources import HUB_REPO_ID, DataUnavailable, load_dataset, load_hub


@pytest.mark.parametrize("value, expected", [
    ("947,948", ("947", "948")),
    ("1102, 1101,1102", ("1102", "1101")),
    (12024, ("12024",)),
    (947.0, ("947",)),
    ([3, "4", 3], ("3", "4")),
    ("[5, 6]", ("5", "6")),
    ("", ()),
    (None, ()),
    ("12 13;14", ("12", "13", "14")),
    ("nan", ()),
    ("art-12, L.5", ("art-12", "L.5")),
])
def test_parse_article_ids(value, expected):
    assert parse_article_ids(value) == expected


@pytest.mark.parametrize("value", [1.5, "{947,948}", "[947", "(12)", True])
def test_parse_article_ids_rejects_junk(value):
    with pytest.raises(ValueError):
        parse_article_ids(value)


def test_normalize_articles_current_layout_fills_missing_columns():
    df = normalize_articles(pd.DataFrame({"id": [3, 10], "article": ["a", None], "code": ["C", "C"]}))
    assert list(df["id"]) == ["3", "10"]
    assert df.loc[1, "article"] == "" and df.loc[0, "chapter"] == ""
    assert df.isna().sum().sum() == 0


def test_normalize_articles_2021_layout():
    raw = pd.DataFrame({"id": [1], "article": ["Texte"], "code": ["Code civil"], "article_no": ["1724"],
                        "description": ["d"], "law_type": ["national"]})
    df = normalize_articles(raw)
    assert df.loc[0, "reference"] == "Art. 1724, Code civil"


def test_normalize_articles_rejects_repeated_ids():
    with pytest.raises(DataError, match="repeated article id"):
        normalize_articles(pd.DataFrame({"id": [1, 1], "article": ["a", "b"]}))


def test_normalize_questions_lists_every_bad_line():
    raw = pd.DataFrame({"id": [1, 2, 3], "question": ["q"] * 3, "article_ids": ["1", 2.5, 3.5]})
    with pytest.raises(DataError) as exc:
        normalize_questions(raw)
    assert "line 3" in str(exc.value) and "line 4" in str(exc.value)


def test_read_csv_table_errors():
    with pytest.raises(DataError, match="empty"):
        read_csv_table(b"  \n", source="x.csv")
    with pytest.raises(DataError, match="line 2"):
        read_csv_table(b"id,article\n\xff\xfe,1\n", source="x.csv")
    df = read_csv_table("\ufeffid,article\r\n1,\"a, b\"\r\n".encode(), source="x.csv")
    assert list(df.columns) == ["id", "article"] and df.loc[0, "article"] == "a, b"


def test_real_question_files(real_bsard):
    test = real_bsard.questions("test")
    assert len(test) == 222 and len(real_bsard.questions("train")) == 886
    q274 = test.set_index("id").loc["274", "article_ids"]
    assert q274.count("1102") == 1 and len(q274) == 6
    assert (test["extra_description"] == "").sum() == 23
    assert test["category"].value_counts()["Famille"] == 67
    assert real_bsard.articles is None
    n = test["article_ids"].map(len)
    assert n.mean() == pytest.approx(4.77, abs=0.005) and n.median() == 2 and n.max() == 57


def fake_hub(tmp_path: Path, folder: Path, calls: list):
    """A stand-in for hf_hub_download that serves files from ``folder``, recording each call."""
    def download(*, repo_id, filename, repo_type, **kwargs):
        calls.append((repo_id, filename, repo_type, kwargs.get("local_files_only")))
        path = folder / filename
        if not path.exists():
            raise FileNotFoundError(f"404 {filename}")
        return str(path)
    return download


def test_hub_loader_uses_download_function(tmp_path, real_bsard_dir):
    calls: list = []
    ds = load_hub(need_corpus=False, download=fake_hub(tmp_path, real_bsard_dir, calls), reachable=lambda: True)
    assert ds.kind == "hub" and len(ds.questions("test")) == 222
    assert {c[1] for c in calls} == {"questions_train.csv", "questions_test.csv"}
    assert all(c[0] == HUB_REPO_ID and c[2] == "dataset" and c[3] is False for c in calls)


def test_hub_with_corpus(tmp_path, real_bsard_dir):
    folder = tmp_path / "hub"
    shutil.copytree(real_bsard_dir, folder)
    pd.DataFrame({"id": range(1, 22634), "article": ["x"] * 22633}).to_csv(folder / "articles.csv", index=False)
    ds = load_hub(download=fake_hub(tmp_path, folder, []), reachable=lambda: True)
    assert len(ds.articles) == 22633


def test_hub_offline_uses_cache_only_and_fails_clearly(tmp_path):
    calls: list = []
    with pytest.raises(DataUnavailable) as exc:
        load_hub(download=fake_hub(tmp_path, tmp_path / "empty", calls), reachable=lambda: False)
    msg = str(exc.value)
    assert "unreachable" in msg and "--data" not in msg  # the core's message names no CLI option
    assert exc.value.advice == "other_source"  # the CLI words it: --data sample / --data PATH
    assert calls and calls[0][3] is True  # offline: only the local cache is asked
    assert exc.value.cause == "offline" and exc.value.detail == msg


def test_hub_partial_download_is_reported(tmp_path, real_bsard_dir):
    folder = tmp_path / "hub"
    shutil.copytree(real_bsard_dir, folder)
    (folder / "questions_test.csv").write_bytes((real_bsard_dir / "questions_test.csv").read_bytes()[:5])
    with pytest.raises(DataUnavailable, match="damaged or partly downloaded") as exc:
        load_hub(need_corpus=False, download=fake_hub(tmp_path, folder, []), reachable=lambda: True)
    assert exc.value.cause == "damaged"


def test_hub_timeout_and_other_failures_have_their_cause(tmp_path):
    def slow(**kwargs):
        raise TimeoutError("read timed out")

    def broken(**kwargs):
        raise RuntimeError("500 Server Error")

    with pytest.raises(DataUnavailable) as exc:
        load_hub(need_corpus=False, download=slow, reachable=lambda: True)
    assert exc.value.cause == "timeout" and "read timed out" in str(exc.value)
    with pytest.raises(DataUnavailable) as exc:
        load_hub(need_corpus=False, download=broken, reachable=lambda: True)
    assert exc.value.cause == "error" and "500 Server Error" in exc.value.detail


def test_real_hub_download_offline_is_fast_and_clear(monkeypatch, tmp_path):
    """The real huggingface_hub code path, on this offline machine (or with HF_HUB_OFFLINE)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(DataUnavailable, match="unreachable") as exc:
        load_hub(need_corpus=False)
    assert exc.value.advice == "other_source"


def test_folder_source_errors(tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        load_dataset(tmp_path / "nope")
    with pytest.raises(DataError, match="questions_<split>.csv"):
        load_dataset(tmp_path)
    (tmp_path / "questions_dev.csv").write_text("id,question,article_ids\n1,q,\"5,6\"\n")
    with pytest.raises(DataError, match="no articles.csv"):
        load_dataset(tmp_path)
    ds = load_dataset(tmp_path, need_corpus=False)
    assert ds.split_names == ["dev"] and ds.qrels("dev") == {"1": frozenset({"5", "6"})}
    (tmp_path / "articles.csv").write_text("id,article\n5,a\n6,b\n")
    assert len(load_dataset(tmp_path).articles) == 2
    (tmp_path / "articles.csv").write_text("nope\n")
    with pytest.raises(DataError, match="missing column"):
        load_dataset(tmp_path)


def test_sample_dataset_is_complete_and_consistent():
    ds = load_dataset("sample")
    assert ds.kind == "sample" and ds.fictional and "fictional" in ds.name
    arts = ds.articles
    assert len(arts) >= 200 and arts["code"].nunique() >= 5
    assert arts["code"].str.contains("(fictif)", regex=False).all()
    assert (arts["article"].str.len() > 0).all() and arts["id"].is_unique
    assert (arts["book"] != "").sum() > 100 and (arts["section"] != "").sum() > 50
    assert set(ds.split_names) == {"train", "test"}
    n_q = sum(len(ds.questions(s)) for s in ds.split_names)
    assert n_q >= 40
    ids = set(arts["id"])
    for split in ds.split_names:
        q = ds.questions(split)
        assert all(set(g) <= ids and g for g in q["article_ids"])
        assert set(q["category"]) <= {"Logement", "Famille", "Argent", "Justice", "Etrangers", "Protection sociale",
                                      "Travail"}
    themes = set(ds.questions("test")["category"]) | set(ds.questions("train")["category"])
    assert len(themes) == 7


# -- frame_memo: facts of a corpus frame, once per frame object --------------------------------

def test_frame_memo_computes_once_per_frame_and_key_and_never_for_another_frame():
    frame = pd.DataFrame({"id": ["1", "2"], "article": ["a", "b"]})
    calls = []

    def compute(tag):
        return lambda: calls.append(tag) or f"{tag}{len(calls)}"

    assert frame_memo(frame, "k", compute("k")) == frame_memo(frame, "k", compute("k")) == "k1"
    assert frame_memo(frame, "other", compute("o")) == "o2"
    assert frame_memo(frame.copy(), "k", compute("k")) == "k3"  # another frame, even with the same content
    edited = frame.copy()
    edited.loc[0, "article"] = "changed"
    assert frame_memo(edited, "k", compute("k")) == "k4"
    frame["extra"] = ["x", "y"]  # a column added: the frame's memo is dropped
    assert frame_memo(frame, "k", compute("k")) == "k5"
    assert frame_memo(frame.head(1), "k", compute("k")) == "k6"
    assert frame_memo(["not", "a", "frame"], "k", compute("k")) == "k7"  # no shape: computed every time
    assert frame_memo(["not", "a", "frame"], "k", compute("k")) == "k8"


def test_frame_memo_does_not_keep_its_frame_alive():
    import gc
    import weakref

    frame = pd.DataFrame({"id": ["1"]})
    frame_memo(frame, "k", lambda: "value")
    ref = weakref.ref(frame)
    del frame
    gc.collect()
    assert ref() is None


def test_frame_memo_holds_large_values_only_while_keeping():
    frame = pd.DataFrame({"id": ["1"]})
    calls = []

    def texts():
        calls.append(1)
        return len(calls)

    assert [frame_memo(frame, "texts", texts, keep=False) for _ in range(2)] == [1, 2]  # not held
    with keeping():
        with keeping():  # nested: held until the outer one closes
            assert frame_memo(frame, "texts", texts, keep=False) == 3
        assert frame_memo(frame, "texts", texts, keep=False) == 3
    assert frame_memo(frame, "texts", texts, keep=False) == 4  # dropped when the last closed


def test_a_row_holds_what_iloc_holds_and_a_replaced_dataset_has_its_own_memo():
    import dataclasses

    from bsard_demo.sources import load_sample

    ds = load_sample()
    a = ds.articles.copy()
    a.loc[a.index[1], "section"] = None  # a blank header cell: NaN both ways
    ds = dataclasses.replace(ds, articles=a)
    for pos in range(len(a)):
        want, got = a.iloc[pos].to_dict(), ds.row(pos)
        assert list(got) == list(want)
        assert all((pd.isna(want[c]) and pd.isna(got[c])) or got[c] == want[c] for c in want), pos
    assert ds.article(str(a["id"].iloc[3])) == ds.row(3) and ds.article("no such id") is None
    other = dataclasses.replace(ds, articles=a.iloc[::-1].reset_index(drop=True))  # its own rows, not ds's
    assert other.row(0)["id"] == a["id"].iloc[-1] and ds.row(0)["id"] == a["id"].iloc[0]


@pytest.mark.parametrize("text", ["string[pyarrow]", pd.StringDtype("pyarrow", na_value=np.nan), "string[python]",
                                  object])
def test_a_row_is_ilocs_row_for_every_kind_of_column(text):
    """Dataset.row reads Arrow-backed text from its Arrow arrays: the same values and types as pandas' own
    item access, missing ones included (pd.NA or NaN, as the dtype has it), over several chunks."""
    import dataclasses

    from bsard_demo.sources import load_sample

    half = pd.DataFrame({"id": ["1", "2", None], "article": ["é", None, "x" * 300], "n": [1, 2, 3],
                         "f": [0.5, np.nan, 2.0]}).astype({"id": text, "article": text})
    a = pd.concat([half, half.assign(id=half["id"].str.cat(["b"] * 3))], ignore_index=True)  # two chunks
    ds = dataclasses.replace(load_sample(), articles=a)
    for pos in range(len(a)):
        want, got = {c: a[c].array[pos] for c in a.columns}, ds.row(pos)
        assert list(got) == list(want)
        for c in want:
            assert type(got[c]) is type(want[c]), (pos, c, got[c], want[c])
            assert got[c] is want[c] or got[c] == want[c] or (pd.isna(got[c]) and pd.isna(want[c])), (pos, c)
