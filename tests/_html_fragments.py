"""Reading the HTML fragments the app renders (``bsard_demo.app.render``, ``highlight``): their
tags with attributes, and their text as a browser shows it, entities decoded."""
from __future__ import annotations

from html.parser import HTMLParser


class Fragment(HTMLParser):
    """``tags``: ``(tag, attributes)`` of every start (or self-closing) tag, in order; ``text``:
    the text pieces between them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(fragment: str) -> Fragment:
    p = Fragment()
    p.feed(fragment)
    p.close()
    return p
