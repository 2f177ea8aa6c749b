"""Index bundles: export, use without building, notices for another corpus / damaged / partial
bundles, never a write into a bundle, hf:// parsing, substituted hub download and upload."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _fake_encoders import HashEncoder
from bsard_demo import bundles, cache
from bsard_demo.bundles import BundleError, CorpusId, corpus_id, export_bundle, parse_hub_ref, resolve_bundle
from bsard_demo.dataset import normalize_articles
from bsard_demo.retrievers import bm25 as bm25_module
from bsard_demo.retrievers.bm25 import BM25Retriever
from bsard_demo.retrievers.dense import DenseRetriever
from bsard_demo.sources import load_dataset

QUESTIONS = ["garantie locative bail loyer", "divorce des époux", "préavis de licenciement", "nationalité belge"]


@pytest.fixture(autouse=True)
def _no_bundle():
    cache.set_bundles(())
    cache.forget_used()
    yield
    cache.set_bundles(())
    cache.forget_used()


@pytest.fixture(scope="module")
def articles() -> pd.DataFrame:
    return load_dataset("sample").articles


def hits_of(retriever, k=40):
    return [[(h.article_id, round(h.score, 6)) for h in hs] for hs in retriever.search_many(QUESTIONS, k)]


def tree_digest(root: Path) -> str:
    """sha256 over every path, mode and file content under ``root``."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(str(stat.S_IMODE(p.lstat().st_mode)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def make_readonly(root: Path) -> None:
    for p in sorted(root.rglob("*"), reverse=True) + [root]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def make_writable(root: Path) -> None:
    for p in [root] + sorted(root.rglob("*")):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def build_both(articles, cache_root, encoder, notices=None):
    n = notices.append if notices is not None else None
    bm = BM25Retriever.build(articles, cache_root=cache_root, notice=n)
    dense = DenseRetriever.build(articles, encoder=encoder, cache_root=cache_root, notice=n)
    return bm, dense


@pytest.fixture()
def exported(tmp_path, articles):
    """A bundle of BM25 + dense (hash encoder) for the sample, and the reference results."""
    enc = HashEncoder()
    bm, dense = build_both(articles, tmp_path / "cache-a", enc)
    dest = tmp_path / "bundle"
    bundle = export_bundle(dest, cache.used_entries(), corpus=corpus_id(articles, "sample"),
                           specs=[{"kind": "bm25", "options": {}}, {"kind": "dense", "options": {"encoder": "hash16"}}],
                           retrievers=[bm, dense])
    return {"dest": dest, "bundle": bundle, "bm25": hits_of(bm), "dense": hits_of(dense)}


@pytest.fixture()
def no_build(monkeypatch):
    """Makes any BM25 or dense build fail loudly (the bundle must serve everything)."""
    def boom(*a, **k):
        raise AssertionError("an index was built although the bundle holds it")
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    monkeypatch.setattr(HashEncoder, "encode_documents", boom)


# -- export -----------------------------------------------------------------------------------

def test_export_writes_a_self_describing_bundle(exported, articles):
    dest = exported["dest"]
    manifest = json.loads((dest / "bundle.json").read_text())
    assert manifest["format"] == bundles.FORMAT and manifest["format_version"] == bundles.FORMAT_VERSION
    assert manifest["corpus"] == {"fingerprint": corpus_id(articles).fingerprint, "articles": len(articles),
                                  "dataset": "sample"}
    assert sorted(e["kind"] for e in manifest["entries"]) == ["bm25s", "dense"]
    assert manifest["encoders"] == [{"name": "hash16", "version": "1", "dim": 16}]
    assert [r["kind"] for r in manifest["retrievers"]] == ["bm25", "dense"]
    assert manifest["built"][0]["settings"]["k1"] == 1.0
    assert manifest["created_with"]["numpy"] == np.__version__ and manifest["created"].endswith("Z")
    on_disk = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()} - {"bundle.json"}
    assert set(manifest["files"]) == on_disk
    for name, meta in manifest["files"].items():
        data = (dest / name).read_bytes()
        assert meta == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert manifest["total_size"] == sum(m["size"] for m in manifest["files"].values())
    assert exported["bundle"].check() == []
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".bundle")]  # no temp folder left


def test_export_refuses_a_nonempty_folder_and_replaces_only_bundles(exported, tmp_path, articles):
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    entries = cache.used_entries()
    with pytest.raises(BundleError, match="not empty") as err:
        export_bundle(other, entries, corpus=corpus_id(articles))
    assert err.value.cause == "exists" and (other / "keep.txt").read_text() == "mine"
    with pytest.raises(BundleError, match="not empty"):
        export_bundle(other, entries, corpus=corpus_id(articles), replace=True)  # not a bundle: never replaced
    with pytest.raises(BundleError, match="replace"):
        export_bundle(exported["dest"], entries, corpus=corpus_id(articles))
    export_bundle(exported["dest"], entries[:1], corpus=corpus_id(articles), replace=True)
    assert len(json.loads((exported["dest"] / "bundle.json").read_text())["entries"]) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_bundle(empty, entries, corpus=corpus_id(articles)).check() == []


def test_export_of_a_damaged_entry_leaves_nothing(tmp_path, articles):
    BM25Retriever.build(articles, cache_root=tmp_path / "c")
    entries = cache.used_entries()
    victim = next(p for p in Path(entries[0].path).rglob("*") if p.is_file() and p.name != cache.MANIFEST)
    victim.write_bytes(victim.read_bytes()[:-1] + b"\x00")
    with pytest.raises(BundleError, match="differs") as err:
        export_bundle(tmp_path / "b", entries, corpus=corpus_id(articles))
    assert err.value.cause == "damaged"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_export_needs_saved_entries(tmp_path, articles):
    with pytest.raises(BundleError, match="nothing to export"):
        export_bundle(tmp_path / "b", [], corpus=corpus_id(articles))
    unsaved = cache.UsedEntry("bm25s", "k", None, "BM25 index", "unsaved")
    with pytest.raises(BundleError, match="could not be saved"):
        export_bundle(tmp_path / "b", [unsaved], corpus=corpus_id(articles))
    assert not (tmp_path / "b").exists()


# -- using a bundle ---------------------------------------------------------------------------

def test_matching_bundle_serves_an_empty_cache_without_building_and_is_never_written(exported, tmp_path, articles,
                                                                                      no_build):
    dest = exported["dest"]
    make_readonly(dest)
    before = tree_digest(dest)
    try:
        bundles.activate(str(dest), corpus=corpus_id(articles, "sample"))
        empty_cache = tmp_path / "cache-b"
        notices: list[str] = []
        bm, dense = build_both(articles, empty_cache, HashEncoder(), notices)
        assert notices == []
        assert hits_of(bm) == exported["bm25"] and hits_of(dense) == exported["dense"]
        assert not empty_cache.exists() or not any(empty_cache.rglob("*"))  # nothing copied to the cache
        used = cache.used_entries()
        assert {u.source for u in used} == {"bundle"} and all(Path(u.path).is_relative_to(dest) for u in used)
        # a second process-wide use is served from the memo of checked entries, same results
        assert hits_of(BM25Retriever.build(articles, cache_root=empty_cache)) == exported["bm25"]
    finally:
        assert tree_digest(dest) == before
        make_writable(dest)


def test_bundle_from_the_hub_cache_layout_with_links(exported, tmp_path, articles, no_build):
    """snapshot_download returns a folder of symbolic links into a blobs folder."""
    snap, blobs = tmp_path / "hf" / "snapshots" / "abc", tmp_path / "hf" / "blobs"
    blobs.mkdir(parents=True)
    for p in exported["dest"].rglob("*"):
        if p.is_file():
            blob = blobs / hashlib.sha256(p.read_bytes()).hexdigest()
            shutil.copyfile(p, blob)
            link = snap / p.relative_to(exported["dest"])
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    bundles.activate(str(snap))
    bm = BM25Retriever.build(articles, cache_root=tmp_path / "empty")
    assert hits_of(bm) == exported["bm25"]


def test_bundle_for_another_corpus_is_noted_and_results_are_unchanged(tmp_path, articles):
    smaller = articles.iloc[:150].reset_index(drop=True)
    BM25Retriever.build(smaller, cache_root=tmp_path / "c")
    dest = tmp_path / "b"
    export_bundle(dest, cache.used_entries(), corpus=corpus_id(smaller, "first 150"))
    reference = hits_of(BM25Retriever.build(articles, use_cache=False))

    bundle = bundles.activate(str(dest), corpus=corpus_id(articles, "sample"))
    assert "another corpus" in bundle.corpus_note(corpus_id(articles, "sample"))
    assert bundle.corpus_note(corpus_id(smaller)) is None
    notices: list[str] = []
    got = BM25Retriever.build(articles, cache_root=tmp_path / "c2", notice=notices.append)
    assert hits_of(got) == reference
    assert len(notices) == 1 and "\n" not in notices[0]
    assert "another corpus" in notices[0] and "150 articles of first 150" in notices[0]
    assert f"{len(articles)} articles" in notices[0]

    # without knowing the served corpus it still says what the bundle holds
    bundles.activate(str(dest))
    notices.clear()
    BM25Retriever.build(articles, cache_root=tmp_path / "c2", notice=notices.append)
    assert len(notices) == 1 and "has no BM25 index for these settings" in notices[0]


def test_bundle_without_the_requested_kind_or_settings(exported, tmp_path, articles):
    bundles.activate(str(exported["dest"]), corpus=corpus_id(articles, "sample"))
    notices: list[str] = []
    BM25Retriever.build(articles, k1=1.3, cache_root=tmp_path / "c", notice=notices.append)
    assert len(notices) == 1 and "has no BM25 index for these settings" in notices[0] and "other settings" in notices[0]
    # settings given by the caller are compared with the bundle's
    bundle = bundles.active()
    entry = next(e for e in bundle.entries.values() if e.kind == "dense")
    object.__setattr__(entry, "describe", {"settings": {"encoder": "use"}})
    _, note = bundle.lookup("dense", "nokey", what="embeddings (e5)", describe={"settings": {"encoder": "e5"}})
    assert "encoder: 'e5' here, 'use' in the bundle" in note
    _, note = bundle.lookup("splade", "nokey", what="SPLADE index")
    assert "holds no SPLADE index" in note


def test_damaged_bundle_file_is_noted_and_rebuilt(exported, tmp_path, articles):
    dest = exported["dest"]
    npy = next(dest.glob("dense/*/embeddings.npy"))
    data = bytearray(npy.read_bytes())
    data[-3] ^= 0xFF  # same size, other bytes
    npy.write_bytes(bytes(data))
    before = tree_digest(dest)
    bundles.activate(str(dest))
    enc = HashEncoder()
    notices: list[str] = []
    dense = DenseRetriever.build(articles, encoder=enc, cache_root=tmp_path / "fresh", notice=notices.append)
    assert enc.documents == len(articles)  # rebuilt
    assert hits_of(dense) == exported["dense"]
    assert len(notices) == 1 and "damaged (checksum of embeddings.npy differs)" in notices[0]
    assert tree_digest(dest) == before
    assert any("checksum" in p for p in bundles.open_bundle(dest).check())


def test_partial_bundle_is_noted(exported, tmp_path, articles):
    dest = exported["dest"]
    shutil.rmtree(next(dest.glob("bm25s/*")))
    bundles.activate(str(dest))
    notices: list[str] = []
    bm = BM25Retriever.build(articles, cache_root=tmp_path / "fresh", notice=notices.append)
    assert hits_of(bm) == exported["bm25"]
    assert len(notices) == 1 and "is incomplete (missing file" in notices[0]
    # the other entry still serves
    notices.clear()
    enc = HashEncoder()
    DenseRetriever.build(articles, encoder=enc, cache_root=tmp_path / "fresh", notice=notices.append)
    assert notices == [] and enc.documents == 0


def test_unreadable_entry_with_matching_checksums_is_noted(exported, tmp_path, articles):
    """bundle.json re-signed over altered content: checksums pass, the reader refuses it."""
    dest = exported["dest"]
    ids = next(dest.glob("dense/*/ids.json"))
    ids.write_text(json.dumps(list(reversed(json.loads(ids.read_text())))))
    for folder in [ids.parent]:  # re-sign the entry manifest and bundle.json
        man = json.loads((folder / cache.MANIFEST).read_text())
        man["files"]["ids.json"] = {"sha256": cache.sha256_file(ids), "size": ids.stat().st_size}
        (folder / cache.MANIFEST).write_text(json.dumps(man))
    top = json.loads((dest / "bundle.json").read_text())
    for name in top["files"]:
        p = dest / name
        top["files"][name] = {"size": p.stat().st_size, "sha256": cache.sha256_file(p)}
    (dest / "bundle.json").write_text(json.dumps(top))
    bundles.activate(str(dest))
    notices: list[str] = []
    dense = DenseRetriever.build(articles, encoder=HashEncoder(), cache_root=tmp_path / "fresh", notice=notices.append)
    assert hits_of(dense) == exported["dense"]
    assert len(notices) == 1 and "cannot be read (ValueError: article ids differ" in notices[0]


def test_no_cache_build_ignores_bundles(exported, articles):
    bundles.activate(str(exported["dest"]))
    enc = HashEncoder()
    DenseRetriever.build(articles, encoder=enc, use_cache=False)
    assert enc.documents == len(articles)


@pytest.mark.parametrize("bad", ["", "   "])
def test_activate_empty_value_deactivates(exported, bad, monkeypatch):
    bundles.activate(str(exported["dest"]))
    assert bundles.active() is not None
    assert bundles.activate(bad) is None and bundles.active() is None and cache.active_bundles() == ()


def test_activate_reads_bsard_index_and_reports_errors(exported, tmp_path, monkeypatch):
    monkeypatch.setenv("BSARD_INDEX", str(exported["dest"]))
    assert bundles.activate().root == exported["dest"]
    monkeypatch.setenv("BSARD_INDEX", str(tmp_path / "nowhere"))
    with pytest.raises(BundleError, match="no such folder") as err:
        bundles.activate()
    assert err.value.cause == "missing" and bundles.active() is None
    lines: list[str] = []
    assert bundles.activate(on_error=lines.append) is None
    assert len(lines) == 1 and "no such folder" in lines[0] and "from the cache or built" in lines[0]
    monkeypatch.delenv("BSARD_INDEX")
    assert bundles.activate() is None


def test_folder_that_is_not_a_bundle(tmp_path):
    with pytest.raises(BundleError, match="no bundle.json") as err:
        resolve_bundle(str(tmp_path))
    assert err.value.cause == "damaged"
    (tmp_path / "bundle.json").write_text("{not json")
    with pytest.raises(BundleError, match="unreadable bundle.json"):
        resolve_bundle(str(tmp_path))
    (tmp_path / "bundle.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(BundleError, match="format"):
        resolve_bundle(str(tmp_path))
    (tmp_path / "bundle.json").write_text(json.dumps({"format": bundles.FORMAT, "format_version": 99}))
    with pytest.raises(BundleError, match="newer bsard-demo"):
        resolve_bundle(str(tmp_path))
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(BundleError, match="not a folder"):
        resolve_bundle(str(f))


@pytest.mark.parametrize("where, value", [
    ("kind", "../../elsewhere"), ("key", ".."), ("key", "a/../../b"), ("kind", "/etc"), ("key", "x/y"),
    ("key", ""), ("model", "../models/x"), ("model", "/abs/models/x"), ("model", "models/../../x"),
    ("file", "../outside.bin"), ("file", "/etc/passwd"),
])
def test_a_bundle_naming_a_place_outside_it_is_refused(exported, tmp_path, where, value):
    """Issue 37: bundle.json's entry kind/key, models[].path and file names were joined to the bundle's root
    unchecked; one naming a place outside it (absolute, '..') is now refused in one line, as a damaged bundle."""
    dest = tmp_path / "tampered"
    shutil.copytree(exported["dest"], dest)
    manifest = json.loads((dest / "bundle.json").read_text())
    if where == "model":
        manifest["models"] = [{"name": "m", "path": value}]
    elif where == "file":
        manifest["files"][value] = {"size": 1, "sha256": "0" * 64}
    else:
        manifest["entries"][0][where] = value
    (dest / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="outside the bundle") as err:
        resolve_bundle(str(dest))
    assert err.value.cause == "damaged" and "\n" not in str(err.value) and "it is not used" in str(err.value)
    lines: list[str] = []
    assert bundles.activate(str(dest), on_error=lines.append) is None and bundles.active() is None
    assert len(lines) == 1 and "outside the bundle" in lines[0]


def test_used_entries_are_recorded_per_process_thread_safely(tmp_path):
    def worker(i):
        for j in range(20):
            cache.load_or_build("t", f"k{i}-{j}", read=lambda f: 1, build=lambda: 1,
                                write=lambda v, f: (f / "x").write_text("1"), what="thing", root=tmp_path)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    used = cache.used_entries()
    assert len(used) == 80 and {u.source for u in used} == {"built"}
    cache.forget_used()
    cache.load_or_build("t", "k0-0", read=lambda f: 1, build=lambda: 1 / 0, write=None, what="thing", root=tmp_path)
    assert [(u.key, u.source) for u in cache.used_entries()] == [("k0-0", "cache")]


# -- hub names --------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("hf://owner/name", ("owner/name", None, "model")),
    ("  hf://Owner-1/my.bundle_2@v1.0  ", ("Owner-1/my.bundle_2", "v1.0", "model")),
    ("hf://owner/name@" + "0123456789abcdef" * 2 + "01234567",
     ("owner/name", "0123456789abcdef" * 2 + "01234567", "model")),
    ("hf://owner/name@refs/pr/3", ("owner/name", "refs/pr/3", "model")),
    ("hf://datasets/owner/name@main", ("owner/name", "main", "dataset")),
    ("hf://models/owner/name", ("owner/name", None, "model")),
    ("HF://owner/name", ("owner/name", None, "model")),
])
def test_parse_hub_ref(value, expected):
    ref = parse_hub_ref(value)
    assert (ref.repo_id, ref.revision, ref.repo_type) == expected
    assert parse_hub_ref(ref.url) == ref


@pytest.mark.parametrize("bad", ["hf://", "hf://name", "hf://a/b/c", "hf://owner/name@", "hf://-owner/name",
                                 "hf://owner/na--me", "hf://owner/na..me", "hf://own er/name",
                                 "hf://owner/name@bad rev", "hf://spaces/owner/name", "owner/name",
                                 "https://huggingface.co/owner/name"])
def test_parse_hub_ref_refuses_bad_values(bad):
    with pytest.raises(BundleError, match="hf://OWNER/NAME") as err:
        parse_hub_ref(bad)
    assert err.value.cause == "invalid" and "\n" not in str(err.value)


# -- substituted hub download -----------------------------------------------------------------

class FakeDownload:
    def __init__(self, result=None, error=None, delay=0.0):
        self.result, self.error, self.delay, self.calls = result, error, delay, []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if self.delay:
            time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return str(self.result)


def test_resolve_hub_bundle_downloads_with_token_and_revision(exported, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "env-token")
    fake = FakeDownload(exported["dest"])
    bundle = resolve_bundle("hf://me/bsard-index@v2", download=fake, reachable=lambda: True)
    assert bundle.label == "hf://me/bsard-index@v2" and bundle.root == exported["dest"]
    call = fake.calls[0]
    assert call["repo_id"] == "me/bsard-index" and call["revision"] == "v2" and call["repo_type"] == "model"
    assert call["token"] == "env-token" and call["local_files_only"] is False
    resolve_bundle("hf://datasets/me/x", token="secret-token", download=fake, reachable=lambda: True)
    assert fake.calls[1]["token"] == "secret-token" and fake.calls[1]["repo_type"] == "dataset"
    monkeypatch.delenv("HF_TOKEN")
    resolve_bundle("hf://me/x", download=fake, reachable=lambda: True)
    assert fake.calls[2]["token"] is None and fake.calls[2]["revision"] is None


def test_offline_uses_the_local_copy_or_says_offline(exported):
    fake = FakeDownload(exported["dest"])
    assert resolve_bundle("hf://me/x", download=fake, reachable=lambda: False).root == exported["dest"]
    assert fake.calls[0]["local_files_only"] is True

    class LocalEntryNotFoundError(Exception):
        pass
    with pytest.raises(BundleError) as err:
        resolve_bundle("hf://me/x", download=FakeDownload(error=LocalEntryNotFoundError("not cached")),
                       reachable=lambda: False)
    assert err.value.cause == "offline"
    assert "unreachable and no copy is in the local Hugging Face cache" in str(err.value)
    assert "hf://me/x" in str(err.value) and "\n" not in str(err.value)


def test_download_timeout_and_denied_and_damaged(tmp_path):
    with pytest.raises(BundleError, match="no complete answer in time") as err:
        resolve_bundle("hf://me/x", download=FakeDownload(tmp_path, delay=2.0), reachable=lambda: True, deadline=0.2)
    assert err.value.cause == "timeout"

    class RepositoryNotFoundError(Exception):
        pass
    with pytest.raises(BundleError, match="set HF_TOKEN") as err:
        resolve_bundle("hf://me/private", download=FakeDownload(error=RepositoryNotFoundError("401 Client Error")),
                       reachable=lambda: True)
    assert err.value.cause == "denied"
    with pytest.raises(BundleError, match="no bundle.json") as err:
        resolve_bundle("hf://me/empty", download=FakeDownload(tmp_path), reachable=lambda: True)
    assert err.value.cause == "damaged"
    with pytest.raises(BundleError, match="OSError: disk full") as err:
        resolve_bundle("hf://me/x", download=FakeDownload(error=OSError("disk full")), reachable=lambda: True)
    assert err.value.cause == "error"


def test_activate_hub_bundle_reports_offline_in_one_line(monkeypatch):
    monkeypatch.setenv("BSARD_INDEX", "hf://me/x")
    lines: list[str] = []
    assert bundles.activate(download=FakeDownload(error=ConnectionError("refused")), reachable=lambda: False,
                            on_error=lines.append) is None
    assert len(lines) == 1 and "hf://me/x" in lines[0] and "hub is unreachable" in lines[0]


# -- substituted upload -----------------------------------------------------------------------

class FakeHub:
    def __init__(self, fail=None):
        self.created, self.uploaded, self.fail = [], [], fail

    def create_repo(self, **kwargs):
        self.created.append(kwargs)

    def upload_folder(self, **kwargs):
        if self.fail:
            raise self.fail
        self.uploaded.append(kwargs)


def test_push_bundle_uploads_the_folder(exported):
    hub = FakeHub()
    push = {"token": "tok", "upload": hub.upload_folder, "create_repo": hub.create_repo}
    url = bundles.push_bundle(exported["dest"], "me/bsard-index", **push)
    assert url == "hf://me/bsard-index"
    assert hub.created == [{"repo_id": "me/bsard-index", "repo_type": "model", "private": None, "exist_ok": True,
                            "token": "tok"}]
    up = hub.uploaded[0]
    assert up["folder_path"] == str(exported["dest"]) and up["repo_id"] == "me/bsard-index" and up["token"] == "tok"
    assert up["delete_patterns"] == "*" and "index bundle" in up["commit_message"]
    url = bundles.push_bundle(exported["dest"], "hf://datasets/me/b@dev", **push)
    assert url == "hf://datasets/me/b@dev"
    assert hub.uploaded[1]["repo_type"] == "dataset" and hub.uploaded[1]["revision"] == "dev"


def test_push_refuses_damaged_bundles_and_reports_hub_errors(exported):
    hub = FakeHub(fail=RuntimeError("403 Forbidden"))
    with pytest.raises(BundleError, match="cannot publish.*403 Forbidden.*HF_TOKEN"):
        bundles.push_bundle(exported["dest"], "me/x", token="t", upload=hub.upload_folder, create_repo=hub.create_repo)
    with pytest.raises(BundleError, match="OWNER/NAME"):
        bundles.push_bundle(exported["dest"], "not a repo", upload=hub.upload_folder, create_repo=hub.create_repo)
    victim = next(exported["dest"].glob("bm25s/*/ids.json"))
    victim.write_text("[]")
    ok = FakeHub()
    with pytest.raises(BundleError, match="not published, it is damaged") as err:
        bundles.push_bundle(exported["dest"], "me/x", upload=ok.upload_folder, create_repo=ok.create_repo)
    assert err.value.cause == "damaged" and ok.uploaded == [] and ok.created == []


# -- corpus fingerprint ----------------------------------------------------------------------

def test_corpus_id_sees_every_column_and_the_order(articles):
    base = corpus_id(articles)
    assert base == corpus_id(articles.copy()) and base.articles == len(articles)
    changed = articles.copy()
    changed.loc[3, "section"] = changed.loc[3, "section"] + " bis"
    assert corpus_id(changed).fingerprint != base.fingerprint
    assert corpus_id(articles.iloc[::-1]).fingerprint != base.fingerprint
    tiny = normalize_articles(pd.DataFrame({"id": ["1", "2"], "article": ["a b", "c"]}))
    assert CorpusId.from_json(corpus_id(tiny, "t").to_json()) == corpus_id(tiny, "t")
