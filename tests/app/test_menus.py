"""What the shared menus offer (bsard_demo.app.menus), without Streamlit."""
from __future__ import annotations

from bsard_demo.app.data_words import FolderAccess
from bsard_demo.app.menus import chosen_source, source_choice, source_choices


def test_a_local_folder_is_offered_only_where_allowed():
    assert source_choices(FolderAccess()) == ["hub", "sample"]
    assert source_choices(FolderAccess(free=True)) == ["hub", "sample", "local"]
    assert source_choices(FolderAccess(fixed="/data")) == ["hub", "sample", "local"]


def test_the_radio_shows_the_current_choice_else_the_requested_source():
    choices = ["hub", "sample"]
    assert source_choice("sample", choices, "hub", "hub") == "sample"
    assert source_choice("local", choices, "hub", "sample") == "hub"  # a choice no longer offered
    assert source_choice(None, choices, "/some/folder", "sample") == "sample"  # a folder not offered


def test_a_click_loads_the_hub_the_sample_or_the_one_folder_named():
    assert chosen_source("hub", FolderAccess()) == "hub"
    assert chosen_source("local", FolderAccess(fixed="/data")) == "/data"
    assert chosen_source("local", FolderAccess(free=True)) is None  # a path must be typed
    assert chosen_source(None, FolderAccess()) is None
