"""bsard-demo: search and score BSARD (Belgian Statutory Article Retrieval Dataset).

Run with ``streamlit run app.py``. The shell: page navigation, the dataset sidebar, and the
notices every page shows (fictional sample, fallback banner). Pages: ``pages/search.py`` and
``pages/score.py``; their logic is in ``bsard_demo.app``.
"""
import streamlit as st

from bsard_demo import settings

settings.prepare_runtime()  # before any page loads faiss, torch or tokenizers (a user's own values win)

from bsard_demo.app import hosting_ui, ui  # noqa: E402

st.set_page_config(page_title="BSARD — recherche et évaluation", page_icon=":material/balance:", layout="wide",
                   initial_sidebar_state="expanded")
hosting_ui.hide_error_details()  # Community Cloud forces a value that shows tracebacks on 1.67
ui.inject_style()

pages = st.navigation([
    st.Page("pages/search.py", title="Rechercher", icon=":material/search:", default=True),
    st.Page("pages/score.py", title="Évaluer des runs", icon=":material/analytics:"),
])

data = None
with ui.guard("chargement des données"):
    data = ui.active_data()
    ui.sidebar_data(data)
    ui.fallback_banner(data)
    ui.fictional_notice(data)
    hosting_ui.show_bundle_notices(data)  # the index bundle (BSARD_INDEX), activated once per process
st.session_state["active_data"] = data

if data is not None:
    pages.run()
