"""The Streamlit app's logic, importable and testable without Streamlit (apart from :mod:`.ui`
and :mod:`.hosting_ui`). The pages (``pages/*.py``) only wire widgets to these.

- :mod:`.state`: the session's dataset, shared indexes, folder access;
- the page models: :mod:`.search_page` (with :mod:`.search_links`, shareable links;
  :mod:`.answers`, the citizen's answers; :mod:`.passages`, runs of consecutive articles) and
  :mod:`.score_page`;
- :mod:`.builds`: the encoders offered and their index builds as the app presents them;
- output: :mod:`.render` (HTML fragments of escaped text), :mod:`.highlight` (escaping and
  query-term highlighting), :mod:`.charts` (Altair charts), :mod:`.french` (French numbers);
- hosting: :mod:`.hosting` (the server's bundle, the upload slot) and :mod:`.hosting_ui`;
- :mod:`.ui`: the Streamlit glue (cached resources, sidebar, progress bars, error guard).

A test (``tests/app/test_app_modules.py``) checks that this list names every module.
"""
