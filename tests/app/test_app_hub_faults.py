"""Hub faults seen from the app (``AppTest``, ``BSARD_DATA`` unset so the hub is the default).

The real loader runs (``bsard_demo.sources.load_hub`` through ``app_state.open_data``); only what
cannot happen offline on purpose is substituted: the reachability probe, the download function
and the download deadline, via ``app_state.load_dataset``. Offline is not substituted at all:
``HF_HUB_OFFLINE=1`` and an empty Hugging Face cache. Each case must end on the sample with a
French banner naming the cause and quoting the loader's message, and a usable page.
"""
from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bsard_demo import sources
from bsard_demo.app import data_words, sidebar, state as app_state
from bsard_demo.sources import DataUnavailable, load_sample

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "bsard_demo" / "sample_data"
TIMEOUT = 120
QUESTION = "Mon propriétaire peut-il garder ma garantie locative ?"
FALLBACK = "l'application utilise l'échantillon fictif fourni avec elle."


def unmd(body: str) -> str:
    """A Markdown body as read: escapes removed, hard line breaks as plain ``\\n``."""
    return re.sub(r"\\(.)", r"\1", body).replace("  \n", "\n")


def banners(at: AppTest) -> list[str]:
    """The fallback banners (the page's notice about the data source, when it says why)."""
    return [b for b in (unmd(i.value) for i in [*at.main.info, *at.main.warning]) if b.startswith("Le ")]


def details(at: AppTest) -> str:
    """The sidebar's « Détails techniques »: the loader's own message."""
    return " ".join(unmd(c.value) for e in at.sidebar.expander if e.label == "Détails techniques" for c in e.caption)


@pytest.fixture(autouse=True)
def offline_env(monkeypatch, tmp_path, tmp_path_factory):
    """No ``BSARD_DATA``, offline, an empty HF cache; the app's process-wide memos are cleared
    before and after (a hub dataset loaded here must not leak into other tests)."""
    import huggingface_hub.constants

    from bsard_demo.app import link_policy

    # the cache below is shared by this file's tests: embeddings one of them builds must not add the
    # hybrid to a later test's first page (as _app_helpers.set_app_env does for the other app tests)
    monkeypatch.setattr(link_policy, "SHOW_STORED_HYBRID", False)
    cache = tmp_path_factory.getbasetemp() / "hub-faults-cache"
    cache.mkdir(exist_ok=True)
    monkeypatch.delenv("BSARD_DATA", raising=False)
    monkeypatch.setenv("BSARD_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.chdir(REPO)

    def reset():
        sidebar.failure_memo().forget(("hub",))
        sidebar.clear_loaded()

    reset()
    yield
    reset()


def hub_loader(monkeypatch, **load_hub_kwargs) -> dict:
    """Route the app's "hub" to :func:`sources.load_hub` with these arguments (the dict returned
    can be updated to change them between runs)."""
    kwargs = dict(load_hub_kwargs)

    def load_dataset(spec, *, need_corpus=True, download=None):
        if str(spec) == "hub":
            return sources.load_hub(need_corpus=need_corpus, **kwargs)
        return sources.load_dataset(spec, need_corpus=need_corpus, download=download)

    monkeypatch.setattr(app_state, "load_dataset", load_dataset)
    return kwargs


def loader_message(**load_hub_kwargs) -> str:
    """The loader's own message for this fault (the CLI's ``--data`` advice is only its code)."""
    with pytest.raises(DataUnavailable) as info:
        sources.load_hub(**load_hub_kwargs)
    message = str(info.value)
    assert "--data" not in message and info.value.advice == "other_source"
    return message


def served_from(folder: Path):
    def download(*, filename, **kwargs):
        return str(folder / filename)
    return download


def start() -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def assert_on_the_sample_saying(at: AppTest, cause: str, message: str) -> None:
    """The banner (a French sentence with the cause, then the loader's message), the sample in
    the sidebar with its fictional notice, and a search that works."""
    banner = banners(at)  # one notice: why, and what is shown instead (its articles invented)
    assert banner == [f"Le jeu BSARD n'a pas pu être obtenu du hub Hugging Face ({cause}) : {FALLBACK}\n"
                      f"{unmd(data_words.FICTIONAL_NOTICE)}"], banner
    assert len(at.main.info) + len(at.main.warning) == 1
    assert details(at) == message and "--data" not in details(at)  # CLI advice is not shown in the app
    side = " ".join(m.value for m in at.sidebar.markdown)
    assert "Échantillon fictif" in side
    assert at.sidebar.radio(key="data_choice").value == "sample"  # what is loaded
    assert at.sidebar.button(key="data_retry").label == "Réessayer la source demandée"
    at.text_area(key="question").input(QUESTION).run()
    assert not at.exception and not at.error
    assert len([h for h in at.html if h.value.startswith('<div class="bsard-hit')]) == 10


def test_offline_without_a_cached_copy():
    message = loader_message()  # the real probe and hf_hub_download, offline
    at = start()
    assert_on_the_sample_saying(at, "hub injoignable et aucune copie en cache local", message)
    assert "the hub is unreachable and the file is not in the local cache" in message


def test_hub_that_does_not_answer_in_time(monkeypatch):
    release = threading.Event()

    def stalled(**kwargs):
        release.wait(30)  # a socket read that never returns
        raise TimeoutError("released")

    fault = dict(download=stalled, reachable=lambda: True, deadline=1.0)
    try:
        message = loader_message(**fault)
        hub_loader(monkeypatch, **fault)
        at = start()
        assert_on_the_sample_saying(at, "le hub n'a pas répondu à temps", message)
        assert "no answer within 1 s" in message
    finally:
        release.set()


def test_partial_download_then_retry(monkeypatch, tmp_path):
    hub = tmp_path / "hub"
    shutil.copytree(SAMPLE, hub, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    full = (SAMPLE / "articles.csv").read_bytes()
    (hub / "articles.csv").write_bytes(full[: len(full) // 3])  # cut mid-file, as a broken download
    fault = dict(download=served_from(hub), reachable=lambda: True)
    message = loader_message(**fault)
    kwargs = hub_loader(monkeypatch, **fault)
    at = start()
    assert_on_the_sample_saying(at, "fichiers reçus incomplets ou endommagés", message)
    assert "damaged or partly downloaded" in message

    # the download is complete now: "Réessayer" loads the hub, the banner goes (no question
    # typed, so that no index is built over this stand-in for the hub)
    at.text_area(key="question").input("").run()
    (hub / "articles.csv").write_bytes(full)
    kwargs["download"] = served_from(hub)
    at.sidebar.button(key="data_retry").click().run()
    assert not at.exception and not banners(at)
    assert "BSARD (hub Hugging Face)" in " ".join(unmd(m.value) for m in at.sidebar.markdown)
    assert at.sidebar.radio(key="data_choice").value == "hub"
    assert not any("FICTIFS" in w.value for w in at.main.warning)


def test_choosing_the_hub_offline_keeps_the_current_folder(monkeypatch, tmp_path):
    ds = load_sample()
    ds.articles.head(30).to_csv(tmp_path / "articles.csv", index=False)
    q = ds.questions("test").head(3).copy()
    q["article_ids"] = [",".join(ids) for ids in q["article_ids"]]
    q.to_csv(tmp_path / "questions_test.csv", index=False)
    monkeypatch.setenv("BSARD_DATA", str(tmp_path))
    message = loader_message()  # offline, nothing cached
    at = start()
    assert not banners(at)
    at.sidebar.radio(key="data_choice").set_value("hub").run()
    assert not at.exception
    banner = banners(at)
    assert banner == ["Le jeu BSARD n'a pas pu être obtenu du hub Hugging Face (hub injoignable et aucune copie en "
                      "cache local) : l'application utilise le jeu de données déjà chargé (Dossier local : "
                      f"{tmp_path.name})."], banner  # the server's folder by its last part
    assert details(at) == message and at.sidebar.radio(key="data_choice").value == "local"
    side = " ".join(unmd(m.value) for m in at.sidebar.markdown)
    assert f"Dossier local : {tmp_path.name}" in side and str(tmp_path.parent) not in side
    assert "30 articles" in side and "3 questions (test)" in side
    assert not any("FICTIFS" in w.value for w in at.warning)
    # the folder is still what the pages use
    at.text_area(key="question").input(QUESTION).run()
    assert not at.exception and not at.error
    ids = [h.value.split('data-article="')[1].split('"')[0]
           for h in at.html if h.value.startswith('<div class="bsard-hit')]
    assert len(ids) == 10 and set(ids) <= set(ds.articles.head(30)["id"])
    at.switch_page("pages/score.py").run()
    assert at.selectbox(key="score_split").options == ["test (3 questions)"]
    # and choosing the sample afterwards works as before
    at.sidebar.radio(key="data_choice").set_value("sample").run()
    assert not banners(at) and "Échantillon fictif" in " ".join(m.value for m in at.sidebar.markdown)


# --------------------------------------------------------------------------- the logic alone

def test_open_data_keeps_the_dataset_the_session_had():
    sample, folder = load_sample(), load_sample()
    calls = []

    def load(spec):
        calls.append(spec)
        if spec in ("hub", "/gone"):
            raise DataUnavailable(f"{spec}: unreachable")
        return folder if spec == "/data" else sample

    data = app_state.open_data("hub", load, fallback="/data")
    assert (data.spec, data.requested, data.dataset) == ("/data", "hub", folder)
    assert data.fallback_reason.endswith("l'application utilise le jeu de données déjà chargé (Dossier local : /data).")
    assert data.detail == "hub: unreachable"
    gone = app_state.open_data("hub", load, fallback="/gone")  # the kept folder went away too
    assert gone.spec == "sample" and gone.fallback_reason.endswith(FALLBACK)
    assert app_state.open_data("hub", load, fallback="sample").spec == "sample"
    assert calls == ["hub", "/data", "hub", "/gone", "sample", "hub", "sample"]


@pytest.mark.parametrize("message, cause, french", [
    ("cannot download articles.csv (x): the hub is unreachable and the file is not in the local cache", "offline",
     "hub injoignable"),
    ("cannot download articles.csv (x): TimeoutError: no answer within 120 s", "timeout", "pas répondu à temps"),
    ("the hub files look damaged or partly downloaded (questions_test.csv: …)", "damaged", "incomplets ou endommagés"),
    ("cannot download articles.csv (x): HTTPError: 500 Server Error", "error", None),
])
def test_hub_cause_and_the_message_shown(message, cause, french):
    error = DataUnavailable(message, cause)
    assert str(error) == message and error.advice == "other_source"  # the advice is the CLI's to word
    found = data_words.hub_cause(error)
    assert (found is None) if french is None else (french in found)
    reason = data_words.fallback_reason("hub", error)
    assert reason.startswith("Le jeu BSARD n'a pas pu être obtenu du hub Hugging Face"
                             + (f" ({found})" if found else " :"))
    assert data_words.failure_detail(error) == message
