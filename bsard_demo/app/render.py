"""HTML fragments of the Search page: hit cards, passages and their reminders, « Voir la section »,
the « Questions proches déjà traitées » panel, missed gold articles, the question box.

Every fragment is built from escaped text (:mod:`bsard_demo.app.highlight`) and only the fixed tags
and classes written here (styled by ``bsard_demo.app.style.STYLE``); it is safe for ``st.html``. The
one script, :data:`COPY_SCRIPT` (the copy buttons), is fixed text. Labels are French.
"""
from __future__ import annotations

import hashlib
from typing import Iterable, Sequence

from ..analyzer import Analyzer
from . import french
from .answers import PANEL_TITLE, SimilarQuestion
from .highlight import escape_html as esc, highlight_html
from .passages import ContextArticle, Entry
from .search_page import MissedGold, ShownHit, breadcrumb_text

PREVIEW_CHARS = 300
COPY_TITLE = "Copier la référence et son fil d'Ariane"

#: How long a searched question is kept at the top of the view while its page settles (ms): at most
#: ``PIN_MS``, and no longer than ``SETTLED_MS`` after the page's last change (a test's or a tool's scroll after that
#: stays where it goes).
PIN_MS, SETTLED_MS = 30_000, 1_000
#: Run once per page (``st.html(..., unsafe_allow_javascript=True)``): a click on a
#: ``button.bsard-copy`` copies its ``data-copy`` text; a click on ``button.bsard-edit`` brings the
#: question's box into view and puts the cursor in it; and a searched question's box
#: (:func:`question_box` with a ``search``) that this tab has not shown yet is scrolled to the top of the
#: view, so the first hits are on the screen after a search, and kept there while the page settles (:data:`PIN_MS`
#: after, until the visitor scrolls, taps or types: a later render or a scroll not the visitor's is undone; a CI run
#: had found the question 81 px above a phone's screen on arrival); and Streamlit's file uploader gets French
#: accessible names (its own English words are hidden by the stylesheet). Fixed text: no data goes into it
#: (the browser tests tell it from an injected script by its ``data-bsard`` attribute).
COPY_SCRIPT = """<script data-bsard="copy">
if (!window.__bsardCopy) {
  window.__bsardCopy = true;
  document.addEventListener('click', async (event) => {
    const edit = event.target.closest && event.target.closest('button.bsard-edit');
    if (edit) {
      const box = document.querySelector('[data-testid="stTextArea"] textarea');
      if (box) { box.scrollIntoView({block: 'center'}); box.focus(); }
      return;
    }
    const button = event.target.closest && event.target.closest('button.bsard-copy');
    if (!button) return;
    const text = button.dataset.copy || '';
    try { await navigator.clipboard.writeText(text); }
    catch (err) {
      const area = document.createElement('textarea');
      area.value = text; document.body.appendChild(area); area.select(); document.execCommand('copy'); area.remove();
    }
    const label = button.textContent;
    button.textContent = 'Copié ✓';
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  const name = (element, words) => {
    if (element && element.getAttribute('aria-label') !== words) element.setAttribute('aria-label', words);
  };
  const reveal = () => {
    for (const zone of document.querySelectorAll('[data-testid="stFileUploaderDropzone"]')) {
      for (const button of zone.querySelectorAll('button')) {  // the one whose English words are hidden
        if (button.querySelector('[data-testid="stMarkdownContainer"]')) name(button, 'Choisir des fichiers');
      }
      const input = zone.querySelector('input[type="file"]');  // the runs' uploader takes several files
      name(input, input && input.multiple ? 'Fichiers à évaluer' : "Fichier d'étiquettes");
    }
    const box = document.querySelector('.bsard-question[data-search]');
    if (!box) return;
    if (box.dataset.search !== window.__bsardShown) {
      window.__bsardShown = box.dataset.search;
      window.__bsardPinned = Date.now() + PIN_MS;
    }
    if (pinned()) box.scrollIntoView({block: 'start'});
  };
  const pinned = () => Date.now() < Math.min(window.__bsardPinned || 0, window.__bsardChanged + SETTLED_MS);
  // the visitor's own scroll, tap or key ends the pin; any other scroll while it holds is undone
  for (const kind of ['wheel', 'touchstart', 'pointerdown', 'keydown']) {
    document.addEventListener(kind, () => { window.__bsardPinned = 0; }, {capture: true, passive: true});
  }
  document.addEventListener('scroll', () => { if (pinned()) requestAnimationFrame(reveal); },
                            {capture: true, passive: true});
  new MutationObserver(() => { window.__bsardChanged = Date.now(); reveal(); })
    .observe(document.body, {childList: true, subtree: true});
  window.__bsardChanged = Date.now();
  reveal();
}
</script>""".replace("PIN_MS", str(PIN_MS)).replace("SETTLED_MS", str(SETTLED_MS))


def breadcrumb(parts: Sequence[str]) -> str:
    """``code › livre › … › section`` (escaped)."""
    return esc(breadcrumb_text(parts))


def score_text(score: float) -> str:
    """A hit's score in French, four significant digits (``4,428``)."""
    return french.decimal(float(f"{score:.4g}"))


def copy_text(reference: str, parts: Sequence[str]) -> str:
    """What the copy button of a hit copies: its reference, then its breadcrumb."""
    crumbs = breadcrumb_text(parts)
    return f"{reference} — {crumbs}" if crumbs else reference


def _copy_button(reference: str, parts: Sequence[str]) -> str:
    return (f'<button class="bsard-copy" type="button" title="{esc(COPY_TITLE)}" '
            f'data-copy="{esc(copy_text(reference, parts))}">Copier la référence</button>')


def _badges(hit: ShownHit) -> str:
    badges = []
    if hit.marker is not None:
        badges.append(f'<span class="bsard-badge {hit.marker.kind}" title="écart de rang avec la colonne de référence">'
                      f"{esc(hit.marker.label)}</span>")
    if hit.gold:
        badges.append('<span class="bsard-badge gold" title="article pertinent selon le jeu de données">✓ '
                      'pertinent</span>')
    return "".join(badges)


def _why(hit: ShownHit) -> str:
    return (f'<div class="bsard-why" title="rang de cet article dans chaque système fusionné">{esc(hit.why)}</div>'
            if hit.why else "")


def _head(hit: ShownHit, rank: str) -> str:
    reference = hit.reference or f"Article {hit.article_id}"
    return (f'<div class="bsard-head"><span class="bsard-rank">{rank}</span>{_badges(hit)}'
            f'<span class="bsard-ref" title="{esc(reference)}">{esc(reference)}</span>'
            f'<span class="bsard-score" title="identifiant {esc(hit.article_id)}">score {esc(score_text(hit.score))}'
            f" · id {esc(hit.article_id)}</span></div>")


def _crumbs(parts: Sequence[str]) -> str:
    return f'<div class="bsard-crumbs" title="{breadcrumb(parts)}">{breadcrumb(parts)}</div>' if parts else ""


def _body(hit: ShownHit, terms: frozenset[str], analyzer: Analyzer | None, preview_chars: int) -> str:
    preview = highlight_html(hit.text, terms, analyzer, max_chars=preview_chars)
    body = f'<div class="bsard-text">{preview}</div>'
    full = highlight_html(hit.text, terms, analyzer)
    if full != preview:  # a preview that runs to the end of its last word may be the whole text
        body += f'<details><summary>Texte complet</summary><div class="bsard-full">{full}</div></details>'
    return body


def section_view(context: Sequence[ContextArticle], terms: Iterable[str] = (), analyzer: Analyzer | None = None,
                 shown: Iterable[str] = ()) -> str:
    """« Voir la section »: the articles around a hit or passage, the displayed hits marked (nothing
    when the section holds no other article than those of the card, ``shown``)."""
    if len(context) <= 1 or {c.article_id for c in context} <= set(shown):
        return ""
    terms = frozenset(terms)
    items = []
    for c in context:
        mark = (f'<span class="bsard-badge hit" title="article de cette colonne">résultat n° {c.rank}</span>'
                if c.rank is not None else "")
        text = highlight_html(c.text, terms, analyzer) + (" …" if c.cut else "")
        items.append(f'<div class="{"bsard-ctx hit" if c.rank is not None else "bsard-ctx"}">'
                     f'<div class="bsard-head">{mark}'
                     f'<span class="bsard-ref">{esc(c.reference or "Article " + c.article_id)}'
                     f'</span></div><div class="bsard-text">{text}</div></div>')
    return (f'<details class="bsard-section"><summary>Voir la section ({len(context)} articles)</summary>'
            f'{"".join(items)}</details>')


def _tools(reference: str, parts: Sequence[str], section: str) -> str:
    return f'<div class="bsard-tools">{_copy_button(reference, parts)}{section}</div>'


def hit_card(hit: ShownHit, terms: Iterable[str], analyzer: Analyzer | None = None,
             preview_chars: int = PREVIEW_CHARS, context: Sequence[ContextArticle] = ()) -> str:
    """One hit: rank, marker, reference (or id), gold badge, score, breadcrumb, why-line (a
    hybrid's), highlighted preview and, when the text is longer than the preview, the full text
    in ``<details>``; then the copy button and, given ``context``, « Voir la section »."""
    terms = frozenset(terms)
    css = "bsard-hit gold" if hit.gold else "bsard-hit"
    tools = _tools(hit.reference or f"Article {hit.article_id}", hit.breadcrumb, section_view(context, terms, analyzer))
    return (f'<div class="{css}" data-article="{esc(hit.article_id)}">{_head(hit, f"{hit.rank}.")}'
            f"{_crumbs(hit.breadcrumb)}{_why(hit)}{_body(hit, terms, analyzer, preview_chars)}{tools}</div>")


def passage_card(entry: Entry, terms: Iterable[str], analyzer: Analyzer | None = None,
                 preview_chars: int = PREVIEW_CHARS, context: Sequence[ContextArticle] = ()) -> str:
    """A passage (:class:`~bsard_demo.app.passages.Entry` with members): its title, the ranks
    of its articles, then each article in corpus order with its own rank, badges, score,
    why-line and preview; then the copy button (title and breadcrumb) and « Voir la section »."""
    terms = frozenset(terms)
    lead, members = entry.hit, entry.members
    ranks = ", ".join(f"n° {m.rank}" for m in sorted(members, key=lambda m: m.rank))
    head = (f'<div class="bsard-head"><span class="bsard-rank">{lead.rank}.</span>'
            '<span class="bsard-badge passage" title="articles consécutifs d\'une même section">passage</span>'
            f'<span class="bsard-ref" title="{esc(entry.title)}">{esc(entry.title)}</span>'
            f'<span class="bsard-score">{len(members)} articles · rangs {esc(ranks)}</span></div>')
    blocks = [f'<div class="{"bsard-member gold" if m.gold else "bsard-member"}" data-member="{esc(m.article_id)}">'
              f'{_head(m, f"n° {m.rank}")}{_why(m)}{_body(m, terms, analyzer, preview_chars)}</div>' for m in members]
    css = "bsard-hit bsard-passage gold" if any(m.gold for m in members) else "bsard-hit bsard-passage"
    tools = _tools(entry.title, lead.breadcrumb, section_view(context, terms, analyzer,
                                                              [m.article_id for m in members]))
    return (f'<div class="{css}" data-article="{esc(lead.article_id)}">{head}{_crumbs(lead.breadcrumb)}'
            f'{"".join(blocks)}{tools}</div>')


def reminder_card(entry: Entry) -> str:
    """A hit shown in a passage above: its rank, badges, reference, score and why-line, and
    where its passage is."""
    hit = entry.hit
    css = "bsard-hit bsard-reminder gold" if hit.gold else "bsard-hit bsard-reminder"
    lead_rank = entry.lead.rank if entry.lead is not None else hit.rank
    return (f'<div class="{css}" data-article="{esc(hit.article_id)}">{_head(hit, f"{hit.rank}.")}{_why(hit)}'
            f'<div class="bsard-note">dans le passage « {esc(entry.title)} », au rang {lead_rank} ci-dessus</div>'
            '</div>')


def entry_card(entry: Entry, terms: Iterable[str], context: Sequence[ContextArticle] = (),
               analyzer: Analyzer | None = None) -> str:
    """The card of one column entry (:func:`~bsard_demo.app.passages.group_passages`)."""
    if entry.kind == "passage":
        return passage_card(entry, terms, analyzer, context=context)
    if entry.kind == "reminder":
        return reminder_card(entry)
    return hit_card(entry.hit, terms, analyzer, context=context)


def similar_panel(questions: Sequence[SimilarQuestion]) -> str:
    """« Questions proches déjà traitées »: each question (text, id, category, similarity, how
    many of its articles are among the results), its cited articles one click away, each marked
    with its rank in every column that shows it."""
    items = []
    for i, q in enumerate(questions, 1):
        cited = []
        for c in q.cited:
            if c.shown:
                where = "".join(f'<span class="bsard-badge in">n° {rank} · {esc(column)}</span>'
                                for column, rank in c.shown)
            else:
                where = f'<small>{"absent des résultats" if c.in_corpus else "absent du corpus"}</small>'
            cited.append(f'<li><span class="bsard-ref">{esc(c.reference or "Article " + c.article_id)}</span> {where}'
                         f'{_crumbs(c.breadcrumb)}</li>')
        meta = (f"n° {esc(q.qid)} · {esc(q.category or 'sans catégorie')} · similarité "
                f"{french.decimal(q.similarity, 1)} · {q.cited_shown} article(s) cité(s) sur {len(q.cited)} parmi les "
                "résultats")
        items.append(f'<details class="bsard-sq"><summary><span class="bsard-rank">{i}.</span> {esc(q.text)}'
                     f'<br><small>{meta}</small></summary><ul>{"".join(cited)}</ul></details>')
    return (f'<div class="bsard-similar"><div class="bsard-similar-head"><b>{esc(PANEL_TITLE)}</b> '
            "<small>questions de citoyens auxquelles des juristes ont déjà répondu (split train), les plus proches de "
            "la vôtre : ouvrez-en une pour voir les articles qu'elle cite.</small></div>"
            f'{"".join(items)}</div>')


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


def search_id(question: str) -> str:
    """A searched question's mark (hex digits): :data:`COPY_SCRIPT` scrolls to a question box once per mark."""
    return hashlib.sha1(question.strip().encode("utf-8")).hexdigest()[:16]


def question_box(question: str, terms: Iterable[str], analyzer: Analyzer | None = None, *,
                 search: bool = False) -> str:
    """The searched question, escaped, its indexed terms highlighted. ``search``: the Search page's
    question, the heading of its results (an ``h2``, marked for :data:`COPY_SCRIPT`'s scroll), with a
    « Modifier la question » button that brings the question's box back."""
    text = highlight_html(question, terms, analyzer, newlines=True)
    if not search:
        return f'<div class="bsard-question">{text}</div>'
    return (f'<div class="bsard-qrow"><h2 class="bsard-question" data-search="{search_id(question)}">{text}</h2>'
            '<button class="bsard-edit" type="button">Modifier la question</button></div>')


#: Shown by the stylesheet (``bsard_demo.app.style.STYLE``) only while the page holds a file the uploader
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
