"""HTML fragments of the Search page (hit cards, missed gold articles, the question box).

Every fragment is built from escaped text (:mod:`bsard_demo.app.highlight`) and only the fixed tags
and classes written here (styled by ``bsard_demo.app.ui.STYLE``); it is safe for ``st.html``.
Labels are French.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from ..analyzer import Analyzer
from .highlight import escape_html as esc
from .highlight import highlight_html
from .search_page import MissedGold, ShownHit

PREVIEW_CHARS = 300
BREADCRUMB_SEPARATOR = " › "


def breadcrumb(parts: Sequence[str]) -> str:
    """``code › livre › … › section`` (escaped)."""
    return BREADCRUMB_SEPARATOR.join(esc(p) for p in parts if str(p).strip())


def score_text(score: float) -> str:
    return f"{score:.4g}"


def hit_card(hit: ShownHit, terms: Iterable[str], analyzer: Analyzer | None = None,
             preview_chars: int = PREVIEW_CHARS) -> str:
    """One hit: rank, marker, reference (or id), gold badge, score, breadcrumb, highlighted
    preview and, when the text is longer than the preview, the full text in ``<details>``."""
    terms = frozenset(terms)
    badges = []
    if hit.marker is not None:
        badges.append(f'<span class="bsard-badge {hit.marker.kind}" title="écart de rang avec la colonne de référence">'
                      f"{esc(hit.marker.label)}</span>")
    if hit.gold:
        badges.append('<span class="bsard-badge gold" title="article pertinent selon le jeu de données">✓ pertinent</span>')
    reference = hit.reference or f"Article {hit.article_id}"
    head = (f'<div class="bsard-head"><span class="bsard-rank">{hit.rank}.</span>{"".join(badges)}'
            f'<span class="bsard-ref" title="{esc(reference)}">{esc(reference)}</span>'
            f'<span class="bsard-score" title="identifiant {esc(hit.article_id)}">score {esc(score_text(hit.score))}'
            f" · id {esc(hit.article_id)}</span></div>")
    crumbs = (f'<div class="bsard-crumbs" title="{breadcrumb(hit.breadcrumb)}">{breadcrumb(hit.breadcrumb)}</div>'
              if hit.breadcrumb else "")
    preview = highlight_html(hit.text, terms, analyzer, max_chars=preview_chars)
    body = f'<div class="bsard-text">{preview}</div>'
    if len(hit.text) > preview_chars:
        full = highlight_html(hit.text, terms, analyzer)
        body += f'<details><summary>Texte complet</summary><div class="bsard-full">{full}</div></details>'
    css = "bsard-hit gold" if hit.gold else "bsard-hit"
    return f'<div class="{css}" data-article="{esc(hit.article_id)}">{head}{crumbs}{body}</div>'


def missed_list(missed: Sequence[MissedGold], k: int, depth: int, outside: Sequence[MissedGold] = (),
                code: str | None = None) -> str:
    """The gold articles absent from the top k, with their rank within ``depth``; with a code
    filter (``code``), those of that code only, then the gold articles ``outside`` it apart
    (« hors du code filtré »: they cannot be ranked, whatever the system)."""
    scope = " de ce code" if code else ""
    if not missed:
        head = f'<div class="bsard-missed">Tous les articles pertinents{scope} sont dans le top {k}.</div>'
    else:
        items = []
        for m in missed:
            label = esc(m.reference or f"Article {m.article_id}")
            if not m.in_corpus:
                where = "absent du corpus"
            elif m.rank is None:
                where = f"au-delà du rang {depth}"
            else:
                where = f"rang {m.rank}"
            items.append(f"<li>{label} <small>(id {esc(m.article_id)}, {where})</small></li>")
        head = (f'<div class="bsard-missed"><b>Articles pertinents{scope} absents du top {k}</b>'
                f'<ul>{"".join(items)}</ul></div>')
    if not code or not outside:
        return head
    items = []
    for m in outside:
        label = esc(m.reference or f"Article {m.article_id}")
        where = "hors du code filtré" if m.in_corpus else "absent du corpus"
        items.append(f"<li>{label} <small>(id {esc(m.article_id)}, {where})</small></li>")
    return (head + f'<div class="bsard-missed"><b>Articles pertinents hors du code filtré « {esc(code)} »</b> '
            f'<small>(non classés ici, non comptés dans les scores)</small><ul>{"".join(items)}</ul></div>')


def question_box(question: str, terms: Iterable[str], analyzer: Analyzer | None = None) -> str:
    """The searched question, escaped, its indexed terms highlighted."""
    return f'<div class="bsard-question">{highlight_html(question, terms, analyzer, newlines=True)}</div>'


#: Shown by the stylesheet (``bsard_demo.app.ui.STYLE``) only while the page holds a file the uploader
#: refused: Streamlit rejects a file above ``server.maxUploadSize`` in the browser, so the server
#: never sees it and cannot say so itself.
UPLOAD_REFUSED_CLASS = "bsard-upload-refused"


def upload_refused_notice(limit_mb: int, max_k: int) -> str:
    """The French message for a run file above the upload limit (hidden until one is refused);
    ``max_k`` is the deepest cutoff measured (articles ranked below it do not count)."""
    return (f'<div class="{UPLOAD_REFUSED_CLASS}" role="alert"><b>Fichier refusé</b> : un fichier dépasse la limite de '
            f"{int(limit_mb)} Mo par fichier (puce rouge ci-dessus ; « File must be … or smaller » au survol). "
            "Il n'a été ni envoyé ni évalué. Retirez-le (×) et allégez-le : les mesures s'arrêtent au rang "
            f"{int(max_k)}, gardez les {int(max_k)} premiers articles de chaque question.</div>")
