"""A public page names bundles and models by name and fingerprint (bsard_demo.app.naming,
bsard_demo.app.score_systems, the sidebar's bundle line), never by a path of the machine."""
from __future__ import annotations

import pytest

from bsard_demo.app.builds import EncoderOption
from bsard_demo.app.naming import digests_fingerprint, files_fingerprint, public_name, strip_paths
from bsard_demo.app.score_builtins import baseline_specs
from bsard_demo.app.score_systems import ranker_caption, spec_targets, system_captions


@pytest.mark.parametrize("text, shown", [
    ("plongements (/tmp/tmpab12cd/frlaw-use-adapter) pour 29 115 articles de /srv/data/frlaw-dev.",
     "plongements (frlaw-use-adapter) pour 29 115 articles de frlaw-dev."),
    ("ajusté sur C:\\Users\\me\\bsard (split train)", "ajusté sur bsard (split train)"),
    ("~/models/adapter, ok", "adapter, ok"),
    ("voir https://github.com/a/b et models/x", "voir https://github.com/a/b et models/x"),  # not paths
])
def test_paths_become_their_last_component(text, shown):
    assert strip_paths(text) == shown


def test_public_names_and_fingerprints():
    assert public_name("/tmp/x/frlaw-dev/") == "frlaw-dev" and public_name("hf://owner/repo") == "repo"
    assert public_name("BSARD (Hugging Face hub)") == "BSARD (Hugging Face hub)"
    files = {"a": {"sha256": "1" * 64, "size": 1}, "b": {"sha256": "2" * 64}}
    same = {"b": {"sha256": "2" * 64}, "a": {"sha256": "1" * 64, "size": 9}}
    assert files_fingerprint(files) == files_fingerprint(same) and len(files_fingerprint(files)) == 12
    assert files_fingerprint(files) != files_fingerprint({**files, "b": {"sha256": "3" * 64}})
    assert files_fingerprint({}) == ""
    assert digests_fingerprint({"a": "1" * 64, "b": "2" * 64}) == files_fingerprint(files)


ADAPTER = EncoderOption("bundle:frlaw-use-adapter", "frlaw-use-adapter — adaptateur des questions sur use · "
                        "Rappel@100 0,539 (split test)", "frlaw-use-adapter", bundled=True, adapter=True)
RANKER_RECORD = {
    "kind": "ranker", "created": "2026-12-04T16:40:00+00:00", "systems": ["bm25", "use", "adapter", "neighbours"],
    "dataset": {"name": "/tmp/tmpq1w2e3/frlaw-dev", "split": "train", "questions": 356, "questions_used": 356},
    "weights_sha256": {"trees.json": "a" * 64},
    "evaluation": {"split": "test", "questions": 150, "measure": "recall@100", "value": 0.6732,
                   "ranker": {"recall@100": 0.6732, "map@100": 0.2841}},
}


def test_the_ranker_is_described_by_its_own_record():
    line = ranker_caption("frlaw-ranker", RANKER_RECORD)
    assert line.startswith("frlaw-ranker — classement appris (LightGBM LambdaRank) sur bm25 + use + adapter")
    assert "ajusté sur frlaw-dev (split train, 356 questions, 2026-12-04)" in line and "/tmp" not in line
    assert f"empreinte {digests_fingerprint({'trees.json': 'a' * 64})}" in line
    assert "Rappel@100 0,673 (split test), MAP@100 0,284" in line and "0,539" not in line


def test_each_system_is_captioned_with_what_it_runs():
    specs = baseline_specs(models={ADAPTER.key: ADAPTER.target}, neighbours=True, adapters=[ADAPTER.key],
                           rankers=["frlaw-ranker"])
    rankers = {"frlaw-ranker": ranker_caption("frlaw-ranker", RANKER_RECORD)}
    ranker_label = next(label for label in specs if label.startswith("Classement appris"))
    assert spec_targets(specs[ranker_label]) == {"frlaw-ranker"}
    assert system_captions(specs[ranker_label], [ADAPTER], rankers) == [rankers["frlaw-ranker"]]
    assert system_captions(specs["Dense (bundle:frlaw-use-adapter)"], [ADAPTER], rankers) == [ADAPTER.label]
    assert system_captions(specs["BM25"], [ADAPTER], rankers) == []


def test_the_sidebar_names_the_bundle_and_the_fixed_folder_without_paths():
    from types import SimpleNamespace

    from bsard_demo.app.data_words import FolderAccess
    from bsard_demo.app.hosting_ui import public_caption
    from bsard_demo.app.menus import dataset_label

    files = {"models/a/adapter.npy": {"sha256": "1" * 64, "size": 3}}
    setup = SimpleNamespace(bundle=SimpleNamespace(label="/tmp/tmpzz/frlaw-bundle", manifest={"files": files}))
    caption = public_caption(setup, "Index préconstruits : plongements (/tmp/tmpzz/frlaw-use-adapter) pour 3 "
                                    "articles de /tmp/tmpzz/frlaw-dev (1 Mo, empreinte 6d1e4556a027).")
    assert "/tmp" not in caption and "plongements (frlaw-use-adapter)" in caption
    assert caption.endswith(f"Paquet « frlaw-bundle », empreinte {files_fingerprint(files)}.")
    data = SimpleNamespace(spec="/srv/data/frlaw-dev")
    assert dataset_label(data, FolderAccess(fixed="/srv/data/frlaw-dev")).endswith(": frlaw-dev")
    assert dataset_label(data, FolderAccess(free=True)).endswith(": /srv/data/frlaw-dev")  # typed by the visitor


def test_markup_is_not_taken_for_a_path():
    assert strip_paths("<script>x</script> <b>y</b>") == "<script>x</script> <b>y</b>"


def test_a_path_after_a_colon_is_named_by_its_last_part_and_a_url_stays():
    assert strip_paths("failed:/srv/a/b (/home/app/.cache/x/articles.csv: not a CSV)") == \
        "failed:b (articles.csv: not a CSV)"
    assert strip_paths("see https://huggingface.co/x/y at 10:30") == "see https://huggingface.co/x/y at 10:30"


def test_the_sidebar_bundle_line_is_made_once_per_bundle(monkeypatch):
    """The bundle line (a fingerprint of the bundle's files, the paths stripped) is made for the first page
    run of a bundle only; another bundle object gets its own line."""
    from types import SimpleNamespace

    from bsard_demo.app import hosting_ui
    from bsard_demo.app.highlight import md_escape
    from bsard_demo.app.hosting import bundle_caption

    def setup(label, digit):
        corpus = SimpleNamespace(dataset="/srv/x/frlaw-dev", articles=3, fingerprint="f" * 64)
        bundle = SimpleNamespace(label=label, manifest={"files": {"a": {"sha256": digit * 64}}}, entries={},
                                 corpus=corpus, total_size=2**20)
        return SimpleNamespace(bundle=bundle)

    first, other = setup("/tmp/tmpzz/frlaw-bundle", "1"), setup("/tmp/tmpzz/other-bundle", "2")
    expected = [md_escape(hosting_ui.public_caption(s, bundle_caption(s))) for s in (first, other)]
    real, made = hosting_ui.files_fingerprint, []
    monkeypatch.setattr(hosting_ui, "files_fingerprint", lambda files: made.append(files) or real(files))
    monkeypatch.setattr(hosting_ui, "_SIDEBAR_LINE", {})
    assert [hosting_ui.sidebar_line(first) for _ in range(3)] == [expected[0]] * 3 and len(made) == 1
    assert "/srv" not in expected[0] and "/tmp" not in expected[0] and expected[0] != expected[1]
    assert [hosting_ui.sidebar_line(other) for _ in range(2)] == [expected[1]] * 2 and len(made) == 2
    assert hosting_ui.sidebar_line(SimpleNamespace(bundle=None)) is None
