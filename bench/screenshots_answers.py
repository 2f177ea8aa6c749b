"""The README's screenshots of the Search page's answers (panel, passages, why-lines, « Voir la
section ») at 1500 px and on a phone (390 × 844, Chromium device emulation), on a real dataset.

    .venv/bin/python bench/screenshots_answers.py --data ../shared/data/frlaw-dev \\
        --index /work/artifacts/frlaw-bundle --python /work/artifacts/hosted-venv/bin/python --out docs/screenshots

``--python``: the interpreter that runs ``streamlit run app.py`` (the torch-free hosted venv for the
public demo's install). Writes search-answers.png, search-section.png, search-phone.png (arrival)
and search-phone-answers.png into ``--out``. Never run ``playwright install``: /usr/bin/chromium.
"""
from __future__ import annotations

if __package__ in (None, ""):  # python bench/NAME.py
    import _path  # noqa: F401

import argparse
import sys
import tempfile
import urllib.parse
from pathlib import Path

from bench.browser import STEP_MS, AppServer, app_env, chromium_options, wait_idle

QUESTION = "Mon employeur peut-il mettre fin à ma période d'essai sans préavis ?"


def settle(page) -> None:
    page.wait_for_selector(".bsard-similar", timeout=STEP_MS * 5)
    wait_idle(page, STEP_MS * 5)


def top_of(page, selector: str, offset: int = 70) -> None:
    """Scroll Streamlit's main area so that ``selector``'s first element is ``offset`` px below the top."""
    page.locator(selector).first.evaluate(
        f"e => {{ e.scrollIntoView({{block: 'start'}}); e.closest('[data-testid=\"stMain\"]').scrollBy(0, -{offset}); "
        f"}}")
    page.wait_for_timeout(400)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--index", default="", help="BSARD_INDEX for the server (an index bundle folder)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--k", type=int, default=8)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="answers-shots-"))
    env = app_env(args.data, work / "cache", BSARD_ALLOW_FOLDERS="1", BSARD_INDEX=args.index)
    path = "/search?" + urllib.parse.urlencode({"q": args.question, "k": args.k})
    args.out.mkdir(parents=True, exist_ok=True)
    with AppServer(env, work / "streamlit.log", python=args.python) as app, sync_playwright() as p:
        browser = p.chromium.launch(**chromium_options())
        wide = browser.new_context(viewport={"width": 1500, "height": 1000}, locale="fr-BE")
        page = wide.new_page()
        page.goto(app.url + path, wait_until="domcontentloaded", timeout=STEP_MS)
        settle(page)
        page.locator(".bsard-sq summary").nth(1).click()  # a similar question's cited articles
        column = page.locator("[data-testid='stColumn']").filter(has=page.locator(".bsard-why")).last
        column.locator(".bsard-section summary").first.click()  # a hybrid hit's section
        top_of(page, ".bsard-question", 20)
        page.screenshot(path=str(args.out / "search-answers.png"))
        top_of(page, ".bsard-why", 160)
        page.screenshot(path=str(args.out / "search-section.png"))
        wide.close()
        phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                                    device_scale_factor=2, locale="fr-BE")
        page = phone.new_page()
        page.goto(app.url + path, wait_until="domcontentloaded", timeout=STEP_MS)
        settle(page)
        page.screenshot(path=str(args.out / "search-phone.png"))  # on arrival
        page.locator(".bsard-sq summary").first.click()
        top_of(page, ".bsard-similar")
        page.screenshot(path=str(args.out / "search-phone-answers.png"))
        phone.close()
        browser.close()
    shots = ('search-answers.png', 'search-section.png', 'search-phone.png', 'search-phone-answers.png')
    print(f"wrote {', '.join(n for n in shots)} into {args.out}")


if __name__ == "__main__":
    main()
