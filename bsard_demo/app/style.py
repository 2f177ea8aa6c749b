"""The app's stylesheet (:data:`STYLE`, injected once per run by :func:`bsard_demo.app.ui.inject_style`): the
classes of the HTML fragments of :mod:`bsard_demo.app.render`, and the phone layout (Streamlit stacks columns
below 640 px).
"""

from pathlib import Path

#: The page's icon, a file of the package: a ``:material/…:`` icon would make the browser fetch it from a font CDN.
ICON = Path(__file__).with_name("icon.png")

STYLE = """
<style>
[data-testid="stMainBlockContainer"] {padding-top: 2.2rem;}
[data-testid="stMetricValue"] {font-size: 1.5rem;}
/* captions and their code spans dark enough for WCAG AA (4.5:1) on the page's and the sidebar's background */
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] code {color: #4b4e58;}
[data-testid="stMain"] [data-testid="stCaptionContainer"], [data-testid="stSidebar"] [data-testid="stCaptionContainer"]
  {opacity: 1;}  /* Streamlit dims some captions (0.6): 3:1 */
[data-testid="stSidebar"] [data-testid="stCaptionContainer"] {color: #3f424b;}
/* long unbroken strings (ids, junk text, 5,000-letter words) wrap instead of widening the page */
.bsard-hit, .bsard-question, .bsard-missed, .bsard-similar {overflow-wrap: anywhere; min-width: 0;}
.bsard-hit {border: 1px solid rgba(49,51,63,.15); border-radius: .5rem; padding: .6rem .8rem; margin-bottom: .6rem;
            background: rgba(255,255,255,.6);}
.bsard-hit.gold {border-left: 5px solid #2e7d32; background: rgba(46,125,50,.06);}
.bsard-head {display: flex; flex-wrap: wrap; gap: .4rem; align-items: baseline; font-size: .92rem;}
.bsard-rank {font-weight: 700; color: #31333f;}
/* a reference or breadcrumb of junk length is cut after three lines (its title attribute keeps it whole) */
.bsard-ref {font-weight: 600; min-width: 0; display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 3;
            overflow: hidden;}
.bsard-score {color: #6b6f76; font-size: .8rem; margin-left: auto; font-variant-numeric: tabular-nums;}
.bsard-badge {border-radius: .7rem; padding: 0 .45rem; font-size: .75rem; font-weight: 600; white-space: nowrap;}
.bsard-badge.gold {background: #2e7d32; color: #fff;}
.bsard-badge.up {background: #e3f2e5; color: #1b5e20;}
.bsard-badge.down {background: #fdecea; color: #b71c1c;}
.bsard-badge.same {background: #eceff1; color: #455a64;}
.bsard-badge.new {background: #e8eaf6; color: #283593;}
.bsard-crumbs {color: #6b6f76; font-size: .78rem; margin: .15rem 0 .35rem 0; display: -webkit-box;
               -webkit-box-orient: vertical; -webkit-line-clamp: 3; overflow: hidden;}
.bsard-text {font-size: .88rem; line-height: 1.45;}
.bsard-text mark, .bsard-full mark {background: #fff59d; padding: 0 .1rem; border-radius: .15rem;}
.bsard-hit details summary {cursor: pointer; color: #0068c9; font-size: .8rem; margin-top: .3rem;}
.bsard-full {font-size: .86rem; line-height: 1.45; margin-top: .3rem; white-space: normal;}
.bsard-missed {font-size: .86rem;}
/* Streamlit 1.67's uploader has no words of its own to set (its button says "Upload", its instructions
   "50MB per file"): they are hidden, the button gets French words, the limit is in the uploader's label */
[data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"],
[data-testid="stFileUploaderDropzoneInstructions"] {display: none;}
[data-testid="stFileUploaderDropzone"] button span[data-has-shortcut]::after {content: "Choisir des fichiers";}
.bsard-upload-refused {display: none; color: #7d1a1a; background: #fdecea; border-radius: .5rem; padding: .6rem .8rem;
                       font-size: .9rem;}
/* Streamlit refuses a file above server.maxUploadSize in the browser (red file chip): say so */
[data-testid="stMain"]:has([data-testid="stFileChip"][aria-invalid="true"]) .bsard-upload-refused {display: block;}
.bsard-why {color: #0b5cad; font-size: .78rem; margin: .05rem 0 .3rem 0;}
.bsard-tools {display: flex; flex-wrap: wrap; gap: .3rem .6rem; align-items: baseline; margin-top: .35rem;}
.bsard-copy {font-size: .75rem; border: 1px solid rgba(49,51,63,.25); border-radius: .4rem; background: #fff;
             color: #0b5cad; padding: .1rem .5rem; cursor: pointer;}
.bsard-section {flex-basis: 100%;}
.bsard-section summary {cursor: pointer; color: #0068c9; font-size: .8rem;}
.bsard-ctx {border-left: 3px solid #d0d7de; padding: .2rem .5rem; margin: .3rem 0;}
.bsard-ctx.hit {border-left-color: #0b5cad; background: rgba(11,92,173,.06);}
.bsard-member {border-top: 1px dashed rgba(49,51,63,.2); padding-top: .35rem; margin-top: .35rem;}
.bsard-member.gold {border-left: 4px solid #2e7d32; padding-left: .4rem;}
.bsard-badge.passage {background: #fff3e0; color: #8a4b00;}
.bsard-badge.in, .bsard-badge.hit {background: #e3f2fd; color: #0b5cad; margin-right: .2rem;}
.bsard-reminder {padding: .35rem .8rem; background: rgba(243,246,250,.8);}
.bsard-note {font-size: .8rem; color: #6b6f76;}
.bsard-similar {border: 1px solid rgba(11,92,173,.25); border-radius: .5rem; padding: .6rem .8rem;
                margin: .2rem 0 .8rem 0; background: rgba(11,92,173,.03);}
.bsard-sq {margin: .4rem 0; font-size: .9rem;}
.bsard-sq summary {cursor: pointer;}
.bsard-sq ul {margin: .3rem 0 .3rem 1.2rem; padding: 0; font-size: .86rem;}
/* a phone (Streamlit stacks the columns below 640 px): narrower margins, no element wider than the screen */
@media (max-width: 640px) {
  /* below the page's header (3.75rem on a phone): the first notice's first line is not under it */
  [data-testid="stMainBlockContainer"] {padding-left: .9rem; padding-right: .9rem; padding-top: 4.2rem;}
  [data-testid="stMainBlockContainer"] h1 {font-size: 1.9rem;}
  .bsard-score {margin-left: 0;}
}
.bsard-question {font-size: 1rem; padding: .5rem .8rem; border-left: 4px solid #0068c9; background: rgba(0,104,201,.05);
                 border-radius: .3rem; margin-bottom: .6rem; white-space: pre-wrap;}
/* the Search page's question heads its results (h2): the box's look, scrolled below the page's header */
h2.bsard-question {font-size: 1rem; font-weight: 400; line-height: 1.5; letter-spacing: normal; margin: 0;
                   scroll-margin-top: 4.2rem; flex: 1 1 auto; min-width: 0; overflow-wrap: anywhere;}
[data-testid="stColumn"] h3 {font-size: 1.35rem;}
/* a menu's long option (an example question) on two lines of its fixed-height row, not cut at the edge */
[role="option"]:has(> [data-item-hl]) {padding-top: 2px; padding-bottom: 2px;}
[role="option"] [data-item-hl] {white-space: normal; overflow: hidden; display: -webkit-box;
  -webkit-box-orient: vertical; -webkit-line-clamp: 2; line-height: 1.15; font-size: .8rem;}
.bsard-qrow {display: flex; flex-wrap: wrap; gap: .4rem .8rem; align-items: center;}
.bsard-edit {font-size: .8rem; border: 1px solid rgba(49,51,63,.25); border-radius: .4rem; background: #fff;
             color: #0b5cad; padding: .15rem .6rem; cursor: pointer;}
</style>
"""
