"""The Streamlit app's logic, importable and testable without Streamlit (apart from :mod:`.ui` and
:mod:`.hosting_ui`); the pages (``pages/*.py``) only wire widgets to it. :mod:`.state`: dataset, shared indexes
(:mod:`.data_words`: its names and folder access, :mod:`.progress_words`: a
build's progress); page models :mod:`.search_model` (its sections :mod:`.search_page`, :mod:`.search_examples`,
:mod:`.link_codec`, :mod:`.link_policy`, :mod:`.link_widgets`, :mod:`.answers`, :mod:`.passages`,
:mod:`.search_words`) and :mod:`.score_page` (its sections :mod:`.score_uploads` with :mod:`.problem_words`,
:mod:`.score_tables`, :mod:`.score_compare`,
:mod:`.score_drill`, :mod:`.score_anchors`, :mod:`.score_builtins`, :mod:`.score_builtin_runs`,
:mod:`.score_systems`, :mod:`.score_misses`); :mod:`.menus`: what the shared menus offer; :mod:`.naming`: names
and fingerprints, not paths; :mod:`.builds`: encoders offered, :mod:`.first_builds`: their slow first builds;
output: :mod:`.render`, :mod:`.highlight`, :mod:`.charts`, :mod:`.french`, :mod:`.style`; hosting: :mod:`.hosting`,
:mod:`.hosting_ui`, :mod:`.visitor_limits` (what one visitor cannot do to the others); Streamlit glue:
:mod:`.ui`, :mod:`.sidebar`, :mod:`.score_ui`, :mod:`.search_ui` (the Search page's sections that only draw).
A test (``tests/app/test_app_modules.py``) checks that this list names every module.
"""
