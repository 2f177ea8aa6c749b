"""The hosted demo's glue: the index bundle from ``st.secrets`` (else the environment), activated
once per process, its notices (another corpus, damaged, missing) with unchanged results; secrets
without a secrets.toml; tracebacks hidden under Cloud's forced setting; the large-upload slot."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from _app_helpers import REPO, TIMEOUT, assert_clean, set_app_env
from _tiny_corpus import without_bundle
from bsard_demo import bundles, cache
from bsard_demo.app import hosting, hosting_ui, score_uploads
from bsard_demo.app.hosting import LARGE_UPLOAD_BYTES, WAIT_NOTICE, UploadSlot, setup_bundle
from bsard_demo.retrievers import bm25 as bm25_module
from bsard_demo.retrievers.bm25 import BM25Retriever
from bsard_demo.sources import load_sample

QUESTION = "Mon propriétaire peut-il garder ma garantie locative ?"


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch, tmp_path):
    """Each test is a new server process: empty Streamlit resources, no active bundle."""
    set_app_env(monkeypatch, tmp_path / "app-cache", "sample")
    st.cache_resource.clear()
    with without_bundle(monkeypatch):
        yield
    st.cache_resource.clear()


@pytest.fixture(scope="module")
def sample_bundle(tmp_path_factory) -> Path:
    """A BM25 bundle of the sample, exported through the library."""
    root = tmp_path_factory.mktemp("bundle")
    cache.forget_used()
    BM25Retriever.build(load_sample().articles, cache_root=root / "cache")
    dest = root / "bundle"
    bundles.export_bundle(dest, cache.used_entries(), corpus=bundles.corpus_id(load_sample().articles, "sample"))
    return dest


@pytest.fixture(scope="module")
def other_bundle(tmp_path_factory) -> Path:
    """A BM25 bundle of another corpus (the sample's first 100 articles)."""
    root = tmp_path_factory.mktemp("other")
    articles = load_sample().articles.iloc[:100].reset_index(drop=True)
    cache.forget_used()
    BM25Retriever.build(articles, cache_root=root / "cache")
    dest = root / "bundle"
    bundles.export_bundle(dest, cache.used_entries(), corpus=bundles.corpus_id(articles, "first 100"))
    return dest


def hit_ids(at: AppTest) -> list[str]:
    return [h.value.split('data-article="', 1)[1].split('"', 1)[0] for h in at.html
            if h.value.startswith('<div class="bsard-hit')]


def search(secrets: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    for k, v in (secrets or {}).items():
        at.secrets[k] = v
    at.run()
    at.text_area(key="question").input(QUESTION).run()
    assert_clean(at)
    return at


def plain(markdown: str) -> str:
    """Rendered Markdown text without its escaping backslashes."""
    return markdown.replace("\\", "")


def notices(at: AppTest) -> list[str]:
    return [plain(e.value) for e in list(at.main.info) + list(at.main.warning) if "préconstruits" in e.value]


@pytest.fixture(scope="module")
def reference() -> list[str]:
    return [h.article_id for h in BM25Retriever.build(load_sample().articles, use_cache=False).search(QUESTION, 10)]


def test_matching_bundle_from_secrets_serves_without_building(sample_bundle, reference, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("built although the bundle holds the index")
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    at = search({"BSARD_INDEX": str(sample_bundle)})
    assert hit_ids(at) == reference
    assert notices(at) == []
    side = plain(" ".join(c.value for c in at.sidebar.caption))
    assert "Index préconstruits : index BM25 pour 220 articles de sample (" in side and " Mo, empreinte " in side
    assert not any("Note :" in c.value for c in at.main.caption)
    assert [u.source for u in cache.used_entries()] == ["bundle"]


def test_bundle_is_activated_once_per_process(sample_bundle, monkeypatch):
    calls = []
    real = bundles.activate

    def counting(*a, **k):
        calls.append(a)
        return real(*a, **k)
    monkeypatch.setattr(hosting.bundles, "activate", counting)
    monkeypatch.setenv("BSARD_INDEX", str(sample_bundle))  # the environment, when no secret says otherwise
    at = search()
    at.text_area(key="question").input("divorce").run()
    search()  # another session of the same process
    assert len(calls) == 1 and calls[0][0] == str(sample_bundle)


def test_bundle_for_another_corpus_is_one_notice_and_results_are_unchanged(other_bundle, reference):
    at = search({"BSARD_INDEX": str(other_bundle)})
    assert hit_ids(at) == reference
    shown = notices(at)
    assert len(shown) == 1 and "autre corpus" in shown[0] and "100 articles of first 100" in shown[0]
    assert "220 articles" in shown[0]
    assert not any("index bundle" in c.value for c in at.main.caption)  # said once, above
    at.switch_page("pages/score.py").run()
    assert len(notices(at)) == 1  # on every page


@pytest.mark.parametrize("case", ["missing", "damaged", "not a bundle"])
def test_unusable_bundle_is_a_warning_and_the_usual_build(case, sample_bundle, reference, tmp_path):
    import shutil

    value = tmp_path / "b"
    if case == "damaged":
        shutil.copytree(sample_bundle, value)
        victim = next(p for p in value.glob("bm25s/*/*") if p.is_file() and p.name != cache.MANIFEST)
        victim.write_bytes(victim.read_bytes()[:-1] + b"!")
    elif case == "not a bundle":
        value.mkdir()
    at = search({"BSARD_INDEX": str(value), "HF_TOKEN": "hf_never_shown"})
    assert hit_ids(at) == reference
    shown = notices(at)
    assert len(shown) == 1 and at.main.warning and "hf_never_shown" not in " ".join(shown)
    expected = {"missing": "no such folder", "damaged": "endommagés (bm25s/", "not a bundle": "no bundle.json"}[case]
    assert expected in shown[0]


def test_hub_bundle_gets_the_token_from_secrets(sample_bundle, monkeypatch):
    import huggingface_hub

    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: calls.append(kw) or str(sample_bundle))
    at = search({"BSARD_INDEX": "hf://me/bsard-index", "HF_TOKEN": "hf_from_secrets"})
    assert calls and calls[0]["token"] == "hf_from_secrets" and calls[0]["repo_id"] == "me/bsard-index"
    assert "Index préconstruits" in " ".join(c.value for c in at.sidebar.caption)


def shown_texts(at: AppTest) -> str:
    """Every text of the page and its sidebar a visitor reads (Markdown escapes removed)."""
    kinds = ("markdown", "caption", "warning", "info", "error", "success", "title", "subheader")
    return plain(" ".join(e.value for k in kinds for e in at.get(k)))


@pytest.mark.parametrize("case", ["relative missing", "damaged", "hub, another corpus"])
def test_the_pages_name_the_bundle_never_its_address(case, sample_bundle, other_bundle, tmp_path, monkeypatch):
    """Issue 37: BSARD_INDEX's address (a server folder, a relative path, an hf:// owner/repo) reached every
    visitor in the notices and the build notes (« Note : index bundle /srv/…: its BM25 index is damaged »);
    pages now name the bundle by its last component only."""
    import shutil

    import huggingface_hub

    if case == "relative missing":
        value, name, hidden = "deploy/no-such-bundle", "no-such-bundle", "deploy/"
    elif case == "damaged":
        value = tmp_path / "srv" / "frlaw-bundle"
        shutil.copytree(sample_bundle, value)
        victim = next(p for p in value.glob("bm25s/*/*") if p.is_file() and p.name != cache.MANIFEST)
        victim.write_bytes(victim.read_bytes()[:-1] + b"!")
        value, name, hidden = str(value), "frlaw-bundle", str(tmp_path)
    else:
        monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: calls.append(kw) or str(other_bundle))
        value, name, hidden = "hf://someone/bsard-index@0123abcd", "bsard-index@0123abcd", "someone"
    calls: list[dict] = []
    at = search({"BSARD_INDEX": value})
    text = shown_texts(at)
    assert name in text and hidden not in text and "hf://" not in text, text
    if calls:  # the pinned revision reaches the download
        assert calls[0]["repo_id"] == "someone/bsard-index" and calls[0]["revision"] == "0123abcd"


def test_markup_in_a_bundle_name_is_escaped(tmp_path):
    at = search({"BSARD_INDEX": str(tmp_path / "<img src=x onerror=alert(1)>**b**")})
    raw = [e.value for e in at.main.warning if "préconstruits" in e.value]
    assert len(raw) == 1 and not re.search(r"(?<!\\)<img", raw[0]) and "**b**" not in raw[0]
    assert "<img src=x onerror=alert(1)>**b**" in plain(raw[0])


# --------------------------------------------------------------------------- secrets, errors

def test_secret_without_a_secrets_file_falls_back_to_the_environment(monkeypatch):
    class NoFile:  # st.secrets raises on its first read when no secrets.toml exists, and on every read
        reads = 0

        def keys(self):
            NoFile.reads += 1
            raise FileNotFoundError("No secrets found")

    class Broken:
        def keys(self):
            raise ValueError("bad toml")

    monkeypatch.setattr(st, "secrets", NoFile())
    monkeypatch.setenv("BSARD_INDEX", "/from/env")
    assert hosting_ui.secret("BSARD_INDEX") == "/from/env" and hosting_ui.secret("HF_TOKEN") is None
    NoFile.reads = 0
    hosting_ui.app_settings()
    assert NoFile.reads == 1  # the secrets are read once for all the settings, not once per setting
    monkeypatch.setattr(st, "secrets", Broken())
    assert hosting_ui.secret("BSARD_INDEX") == "/from/env"
    monkeypatch.setattr(st, "secrets", {"BSARD_INDEX": "/from/secrets", "HF_TOKEN": ""})
    monkeypatch.setenv("HF_TOKEN", "env-token")
    assert hosting_ui.secret("BSARD_INDEX") == "/from/secrets" and hosting_ui.secret("HF_TOKEN") == "env-token"


def test_the_real_app_starts_without_any_secrets_file():
    assert not (REPO / ".streamlit" / "secrets.toml").exists()
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT).run()
    assert_clean(at)
    assert notices(at) == []


BOOM = '''
import streamlit as st
from bsard_demo.app import hosting_ui
if {hide}:
    hosting_ui.hide_error_details()
raise RuntimeError("secret detail")
'''


@pytest.mark.parametrize("hide", [True, False])
def test_cloud_forced_setting_shows_no_traceback(hide, tmp_path):
    from streamlit import config

    script = tmp_path / "boom.py"
    script.write_text(BOOM.format(hide=hide))
    before = config.get_option("client.showErrorDetails")
    try:
        config.set_option("client.showErrorDetails", False)  # what Community Cloud forces
        at = AppTest.from_file(str(script), default_timeout=TIMEOUT).run()
        (exc,) = at.exception
        if hide:
            assert exc.stack_trace == [] and "secret detail" not in exc.message and "redacted" in exc.message
        else:  # the forced value alone shows the traceback (source lines included): the setting hides it
            assert exc.stack_trace and "secret detail" in " ".join(exc.stack_trace)
    finally:
        config.set_option("client.showErrorDetails", before)


# --------------------------------------------------------------------------- large uploads

def test_large_uploads_are_scored_one_at_a_time():
    slot = UploadSlot(1, threshold=100, poll=0.01)
    inside, peak, waits = [0], [0], []
    lock = threading.Lock()

    def score(i):
        with slot.hold(1000, key=i, on_wait=waits.append):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1
    threads = [threading.Thread(target=score, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1 and slot.waits >= 1 and waits and all(w >= 0 for w in waits)
    # small uploads and scorings already done do not queue
    with slot.hold(1000, key="busy"):
        done = threading.Event()

        def small():
            with slot.hold(99):
                done.set()
        threading.Thread(target=small).start()
        assert done.wait(2)
        with slot.hold(1000, key=3) as waited:  # key 3 was scored: served by the app's cache
            assert waited is False


def test_slot_is_released_on_errors_and_forgets_old_scorings():
    now = [0.0]
    slot = UploadSlot(1, threshold=1, poll=0.01, remember=2, ttl=10, clock=lambda: now[0])
    with pytest.raises(RuntimeError):
        with slot.hold(5, key="a"):
            raise RuntimeError("scoring failed")
    assert slot.needed(5, "a")  # not recorded as done, and the slot is free again
    with slot.hold(5, key="a"):
        pass
    assert not slot.needed(5, "a")
    now[0] = 11
    assert slot.needed(5, "a")  # the app's cache has dropped it by now
    for k in ("b", "c", "d"):
        with slot.hold(5, key=k):
            pass
    assert slot.needed(5, "b") and not slot.needed(5, "d")


def test_give_back_memory_never_raises():
    assert hosting.give_back_memory() in (True, False)


def test_slot_count_setting():
    assert [hosting_ui.slot_count(v) for v in (None, "", "3", " 2 ", "0", "-1", "x")] == [1, 1, 3, 2, 1, 1, 1]


def test_constants_match_the_scoreboard_cache():
    assert (hosting_ui.SCORED_REMEMBERED, hosting_ui.SCORED_TTL_S) == \
        (score_uploads.SCOREBOARD_ENTRIES, score_uploads.SCOREBOARD_TTL_S)
    assert 3 * 2**20 < LARGE_UPLOAD_BYTES < 29 * 10**6


SLOT_PAGE = '''
import streamlit as st
from bsard_demo.app import hosting_ui
with hosting_ui.large_upload_slot([("big.trec", b"x" * {size})], key="k"):
    st.write("scored")
'''


def test_score_page_waits_for_the_slot_and_then_scores(tmp_path):
    script = tmp_path / "slot.py"
    script.write_text(SLOT_PAGE.format(size=LARGE_UPLOAD_BYTES))
    slot = hosting_ui.upload_slot()
    release = threading.Event()

    def other_visitor():
        with slot.hold(LARGE_UPLOAD_BYTES, key="other"):
            release.wait(60)
    def release_once_waited():  # the other visitor finishes once this one is seen waiting
        deadline = time.monotonic() + 60
        while slot.waits == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        release.set()
    t = threading.Thread(target=other_visitor)
    t.start()
    threading.Thread(target=release_once_waited).start()
    at = AppTest.from_file(str(script), default_timeout=TIMEOUT).run()
    t.join()
    assert_clean(at)
    assert [m.value for m in at.markdown] == ["scored"]
    assert slot.waits == 1
    assert not [e for e in at.info if WAIT_NOTICE in e.value]  # the notice is gone once scored


def test_setup_bundle_never_raises(tmp_path):
    got = setup_bundle({"BSARD_INDEX": str(tmp_path / "none")}.get)
    assert got.bundle is None and "no such folder" in got.problem and bundles.active() is None
    assert setup_bundle({}.get).value == ""
    broken = pd.DataFrame({"id": ["1"], "article": ["x"]})
    assert not got.serves("k", broken)


def test_a_running_page_derives_the_corpus_texts_once(monkeypatch):
    """page_running opens frame_memo.keeping: the first visitor's checks and builds of one page run read
    the corpus' texts once; once no page runs they are not held."""
    from bsard_demo.analyzer import article_texts

    articles, calls, real = load_sample().articles, [], pd.DataFrame.__getitem__
    monkeypatch.setattr(pd.DataFrame, "__getitem__", lambda frame, key: calls.append(key) or real(frame, key))
    with hosting_ui.page_running():
        assert article_texts(articles) == article_texts(articles)
    assert calls.count("article") == 1
    article_texts(articles)
    assert calls.count("article") == 2
