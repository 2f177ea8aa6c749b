"""bsard-demo: search and score BSARD (Belgian Statutory Article Retrieval Dataset).

Run with ``streamlit run app.py``. The shell: page navigation, the dataset sidebar, and the
notices every page shows (fictional sample, fallback banner). Pages: ``pages/search.py`` and
``pages/score.py``; their logic is in ``bsard_demo.app``.
"""
import weakref

import streamlit as st

from bsard_demo import settings

settings.prepare_runtime()  # before any page loads faiss, torch or tokenizers (a user's own values win)

from bsard_demo.app import hosting_ui, sidebar, style, ui  # noqa: E402

hosting_ui.tune_process()  # once per process: memory handed back when idle, glibc's arenas capped, BLAS on 1 thread
ui.drop_forged_widget_states()  # a client's states for widgets no page drew, before anything reads the session

# "auto": the sidebar is open on a wide screen and closed on a phone, where it would cover the question box
st.set_page_config(page_title="BSARD — recherche et évaluation", page_icon=str(style.ICON), layout="wide",
                   initial_sidebar_state="auto")
hosting_ui.hide_error_details()  # Community Cloud forces a value that shows tracebacks on 1.67
ui.inject_style()

# The Search page is the default page, at "/"; "/search" (the path a person guesses) is the same page,
# hidden from the menu, and "/score" the Score page. Any other path gets a French note on the default
# page instead of Streamlit's English « Page not found » modal (ui.unknown_path).
PAGES = [
    st.Page("pages/search.py", title="Rechercher", icon=":material/search:", default=True, url_path="rechercher"),
    st.Page("pages/search.py", title="Rechercher", icon=":material/search:", url_path="search", visibility="hidden"),
    st.Page("pages/score.py", title="Évaluer des runs", icon=":material/analytics:", url_path="score"),
]
unknown = ui.unknown_path(p.url_path for p in PAGES)
pages = st.navigation(PAGES)
if unknown:
    ui.unknown_path_note(unknown)

data = None
with ui.guard("chargement des données"):
    data = sidebar.active_data()
    sidebar.sidebar_data(data)
    # one notice: the data shown and why, the index bundle's (BSARD_INDEX, activated once per process) included
    sidebar.data_notice(data, hosting_ui.bundle_notes(data))
# The run's dataset for the page (ui.current_data): a weak reference, so that a session keeps no dataset of its own
# between runs (a disconnected one is kept two minutes for a reconnection): every session uses the shared one.
st.session_state[ui.RUN_DATA] = weakref.ref(data) if data is not None else None

if data is not None:
    with hosting_ui.page_running():  # no memory is handed back while a page runs
        pages.run()
