"""The Streamlit app's logic, importable and testable without Streamlit (apart from :mod:`.ui`).

:mod:`.state` (the session's dataset, shared indexes, folder access), the two page models
:mod:`.search_page` and :mod:`.score_page`, :mod:`.render` (HTML fragments of escaped text),
:mod:`.highlight` (escaping and query-term highlighting), :mod:`.charts` (Altair charts) and
:mod:`.ui` (the Streamlit glue: cached resources, sidebar, progress bars, error guard). The
pages (``pages/*.py``) only wire widgets to these.
"""
