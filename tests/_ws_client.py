"""A Streamlit visitor without a browser: Streamlit's own websocket protocol (``/_stcore/stream``)
with the protobuf messages of the installed streamlit, so one core drives a hundred visitors.

What a browser tab does, reduced to the messages (Streamlit's frontend, ``WebsocketConnection``
and ``App.sendRerunBackMsg``): open ``ws://HOST/_stcore/stream`` with the subprotocol
``streamlit``; send a ``BackMsg.rerun_script`` whose ``ClientState`` holds the address's query
string and page (``page_name`` = the address's path on first load, else the
``page_script_hash`` the ``navigation`` message announced); read ``ForwardMsg``s until
``script_finished`` says ``FINISHED_SUCCESSFULLY`` (a run stopped early for a rerun is followed
by the rerun). A button press is a rerun whose ``widget_states`` hold the button's id with
``trigger_value``. A file dropped on ``st.file_uploader`` (:meth:`Visitor.upload`) is three steps, as the
frontend's ``FileUploadClient``: a ``BackMsg.file_urls_request`` that the session answers with a
``file_urls_response`` (one upload URL per file), an HTTP ``PUT`` of each file to its URL (multipart,
with the XSRF cookie the health endpoint sets and the same token in ``X-Xsrftoken``), then a rerun
whose uploader state lists the files. No message hashes are claimed as cached, so every element
arrives whole.

:class:`Visitor` does that; :class:`Page` is what one finished run drew (elements by delta
path) with the readers the checks need: the hit cards' article ids per column, the server
search time shown, error elements, a button's id, a data frame by column name.
:func:`search_visit` and :func:`score_visit` are the two visits of the load benches
(``bench/load_ws.py``, ``bench/faults.py``; tested by tests/app/test_ws_client.py), each returning a
:class:`Visit` with its timing and its failures.

Test support, imported by name (``from _ws_client import Visitor``). Imports only the standard
library, ``websockets`` (installed with streamlit), pyarrow and streamlit's protobuf modules.
"""
from __future__ import annotations

import asyncio
import html
import re
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Sequence
from urllib.parse import urlencode

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

STREAM = "/_stcore/stream"
HEALTH = "/_stcore/health"
XSRF_COOKIE = "_streamlit_xsrf"
SUBPROTOCOL = "streamlit"
RUN_TIMEOUT_S = 120.0
#: the Search page's hit card (``bsard_demo.app.render.hit_card``) and its server-time caption
HIT_RE = re.compile(r'<div class="bsard-hit[^"]*" data-article="([^"]*)"')
SERVER_MS_RE = re.compile(r"recherche : ([0-9\u202f]+(?:,[0-9]+)?) ms \(serveur\)")  # French: « 1 234,5 »
SCORE_BUTTON = "Évaluer ce système intégré"


class ProtocolError(RuntimeError):
    """The server closed, answered something unexpected, or did not finish a run in time."""


@dataclass
class Column:
    """One column of the Search page: its heading, the server time it shows, its hits' ids."""

    label: str
    server_ms: float | None
    ids: list[str]


@dataclass
class Page:
    """What one script run drew: ``elements`` by delta path (the last element sent at a path wins,
    as in the browser), the run's seconds, the query string the page wrote into the address
    (``page_info_changed``) and the pages the ``navigation`` message offers (url path → hash)."""

    elements: dict[tuple[int, ...], object]
    seconds: float
    query_string: str | None = None
    pages: dict[str, str] = field(default_factory=dict)

    def of_type(self, kind: str) -> list[tuple[tuple[int, ...], object]]:
        """``(path, proto)`` of every element of ``kind`` (``"html"``, ``"button"``, …), in page order."""
        return [(p, getattr(e, kind)) for p, e in sorted(self.elements.items()) if e.WhichOneof("type") == kind]

    def columns(self) -> list[Column]:
        """The Search page's result columns, left to right: the hit cards grouped by the block
        that holds them, with that block's ``h3`` heading and ``(serveur)`` caption."""
        blocks: dict[tuple[int, ...], Column] = {}
        for path, element in sorted(self.elements.items()):
            kind = element.WhichOneof("type")
            block = path[:-1]
            if kind == "html" and (ids := [html.unescape(i) for i in HIT_RE.findall(element.html.body)]):
                blocks.setdefault(block, Column("", None, [])).ids.extend(ids)
            elif kind == "heading" and element.heading.tag == "h3":
                blocks.setdefault(block, Column("", None, [])).label = element.heading.body
            elif kind == "markdown" and (m := SERVER_MS_RE.search(element.markdown.body)):
                ms = m.group(1).replace("\u202f", "").replace(",", ".")
                blocks.setdefault(block, Column("", None, [])).server_ms = float(ms)
        return [c for c in blocks.values() if c.ids]

    def errors(self) -> list[str]:
        """Exceptions and error alerts on the page (their first 200 characters)."""
        out = [e.message[:200] or e.type for _p, e in self.of_type("exception")]
        out += [a.body[:200] for _p, a in self.of_type("alert") if a.format == a.ERROR]
        return out

    def button_id(self, label: str) -> str | None:
        return next((b.id for _p, b in self.of_type("button") if b.label == label), None)

    def table_with(self, column: str):
        """The first data frame (a ``pyarrow.Table``) having a column named ``column``, else None."""
        import pyarrow as pa

        for _p, frame in self.of_type("dataframe"):
            table = pa.ipc.open_stream(frame.arrow_data.data).read_all()
            if column in table.schema.names:
                return table
        return None


class Visitor:
    """One browser tab's worth of session: ``async with Visitor(url) as v: page = await v.open(...)``."""

    def __init__(self, base_url: str, *, timeout: float = RUN_TIMEOUT_S,
                 headers: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.ws_url = self.base_url.replace("http://", "ws://", 1) + STREAM
        self.timeout = timeout
        self.headers = dict(headers or {})  # e.g. a browser's cookie (a sticky proxy's route)
        self.ws = None
        self.pages: dict[str, str] = {}
        self.session_id: str | None = None
        self.page_hash = ""  # the page shown (navigation), sent with each rerun

    async def connect(self) -> "Visitor":
        self.ws = await asyncio.wait_for(
            websockets.connect(self.ws_url, subprotocols=[SUBPROTOCOL], max_size=None, compression=None,
                               ping_interval=None, open_timeout=self.timeout, additional_headers=self.headers),
            self.timeout)
        return self

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    async def __aenter__(self) -> "Visitor":
        return await self.connect()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def open(self, path: str = "", query: str | Mapping[str, str | Sequence[str]] = "") -> Page:
        """The first load of ``/PATH?QUERY`` (a deep link), as a tab's first rerun request."""
        msg = BackMsg()
        msg.rerun_script.query_string = query if isinstance(query, str) else urlencode(query, doseq=True)
        msg.rerun_script.page_name = path.strip("/")
        return await self._run(msg)

    async def goto(self, path: str) -> Page:
        """Follow the sidebar link to the page whose address is ``/PATH``."""
        if path not in self.pages:
            raise ProtocolError(f"no page {path!r} announced (navigation offered {sorted(self.pages)})")
        msg = BackMsg()
        msg.rerun_script.page_script_hash = self.pages[path]
        self.page_hash = self.pages[path]
        return await self._run(msg)

    async def clear_cache(self) -> None:
        """Send the ``clear_cache`` back-message (the developer menu's « Clear cache », which any client can send)."""
        if self.ws is None:
            raise ProtocolError("not connected")
        msg = BackMsg()
        msg.clear_cache = True
        await self.ws.send(msg.SerializeToString())

    async def click(self, page: Page, label: str) -> Page:
        """Press the button labelled ``label`` on ``page`` (a rerun with its trigger set)."""
        button = page.button_id(label)
        if button is None:
            raise ProtocolError(f"no button {label!r} on the page")
        msg, widget = self._rerun_with(page, button)
        widget.trigger_value = True
        return await self._run(msg)

    async def send_states(self, page: Page, states: Mapping[str, str | int]) -> Page:
        """A rerun of ``page`` with the widget states ``states`` (id → a text or integer value), whatever the page
        drew: what a hostile client may send (a browser sends only the ids the page drew)."""
        msg, widget = self._rerun_with(page, "")
        msg.rerun_script.widget_states.ClearField("widgets")
        for widget_id, value in states.items():
            widget = msg.rerun_script.widget_states.widgets.add()
            widget.id = widget_id
            if isinstance(value, str):
                widget.string_value = value
            else:
                widget.int_value = value
        return await self._run(msg)

    def _rerun_with(self, page: Page, widget_id: str):
        """A rerun of ``page`` (its script, its query string) and the state of its widget ``widget_id``, to fill."""
        msg = BackMsg()
        msg.rerun_script.page_script_hash = self.page_hash
        if page.query_string is not None:
            msg.rerun_script.query_string = page.query_string
        widget = msg.rerun_script.widget_states.widgets.add()
        widget.id = widget_id
        return msg, widget

    async def upload(self, page: Page, files: Sequence[tuple[str, bytes]]) -> Page:
        """Drop ``files`` (``(name, bytes)``) on the first file uploader of ``page``, as a browser does: upload
        URLs from the session, a ``PUT`` of each file, then the rerun that reads them (the page it draws)."""
        uploader = next((u.id for _p, u in page.of_type("file_uploader")), None)
        if uploader is None:
            raise ProtocolError("no file uploader on the page")
        request = BackMsg()
        request.file_urls_request.request_id = uuid.uuid4().hex
        request.file_urls_request.session_id = self.session_id or ""
        request.file_urls_request.file_names.extend(name for name, _ in files)
        await self.ws.send(request.SerializeToString())
        urls = await self._file_urls(request.file_urls_request.request_id)
        if len(urls) != len(files):
            raise ProtocolError(f"{len(urls)} upload URL(s) for {len(files)} file(s)")
        token = await asyncio.to_thread(self._xsrf_token)
        for (name, data), url in zip(files, urls):
            await asyncio.to_thread(self._put, url.upload_url, name, data, token)
        msg, widget = self._rerun_with(page, uploader)
        for (name, data), url in zip(files, urls):
            info = widget.file_uploader_state_value.uploaded_file_info.add()
            info.file_id, info.name, info.size = url.file_id, name, len(data)
            info.file_urls.CopyFrom(url)
        return await self._run(msg)

    async def _file_urls(self, request_id: str) -> list:
        """The ``FileURLs`` of the session's ``file_urls_response`` to ``request_id``."""
        deadline = time.monotonic() + self.timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                raw = await asyncio.wait_for(self.ws.recv(), left)
            except asyncio.TimeoutError:
                break
            except websockets.ConnectionClosed as exc:
                raise ProtocolError(f"the server closed the connection ({exc.code})") from None
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            if fwd.WhichOneof("type") == "file_urls_response" and fwd.file_urls_response.response_id == request_id:
                if fwd.file_urls_response.error_msg:
                    raise ProtocolError(f"no upload URLs: {fwd.file_urls_response.error_msg}")
                return list(fwd.file_urls_response.file_urls)
        raise ProtocolError(f"no upload URLs within {self.timeout:.0f} s")

    def _xsrf_token(self) -> str | None:
        """The XSRF cookie the health endpoint sets (None when the server does not protect uploads)."""
        with urllib.request.urlopen(self.base_url + HEALTH, timeout=self.timeout) as resp:
            for header in resp.headers.get_all("Set-Cookie") or []:
                name, _, rest = header.partition("=")
                if name.strip() == XSRF_COOKIE:
                    return rest.split(";", 1)[0]
        return None

    def _put(self, url: str, name: str, data: bytes, token: str | None) -> None:
        """``PUT`` one file to its upload URL as the frontend does (a multipart form of one file)."""
        boundary = uuid.uuid4().hex
        quoted = name.replace("\\", "\\\\").replace('"', '\\"')
        body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{quoted}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", **self.headers}
        if token is not None:
            headers["X-Xsrftoken"] = token
            headers["Cookie"] = "; ".join(c for c in (self.headers.get("Cookie"), f"{XSRF_COOKIE}={token}") if c)
        target = url if url.startswith("http") else self.base_url + "/" + url.lstrip("/")
        request = urllib.request.Request(target, data=body, headers=headers, method="PUT")
        with urllib.request.urlopen(request, timeout=self.timeout) as resp:
            if resp.status not in (200, 204):
                raise ProtocolError(f"upload of {name!r}: HTTP {resp.status}")

    async def _run(self, msg: BackMsg) -> Page:
        """Send ``msg`` and collect the elements of the run that finishes successfully."""
        if self.ws is None:
            raise ProtocolError("not connected")
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        deadline = time.monotonic() + self.timeout
        elements: dict[tuple[int, ...], object] = {}
        query = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"the run did not finish within {self.timeout:.0f} s")
            try:
                raw = await asyncio.wait_for(self.ws.recv(), left)
            except asyncio.TimeoutError:
                raise ProtocolError(f"the run did not finish within {self.timeout:.0f} s") from None
            except websockets.ConnectionClosed as exc:
                raise ProtocolError(f"the server closed the connection ({exc.code})") from None
            if isinstance(raw, str):
                raise ProtocolError("a text frame: not Streamlit's protocol")
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "new_session":  # a script run starts: the page is redrawn from here
                elements = {}
                self.session_id = fwd.new_session.initialize.session_id or self.session_id
            elif kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fwd.navigation.app_pages}
                self.page_hash = fwd.navigation.page_script_hash or self.page_hash
            elif kind == "page_info_changed":
                query = fwd.page_info_changed.query_string
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                elements[tuple(fwd.metadata.delta_path)] = fwd.delta.new_element
            elif kind == "script_finished":
                status = fwd.script_finished
                if status == ForwardMsg.FINISHED_SUCCESSFULLY:
                    return Page(elements, time.perf_counter() - start, query, dict(self.pages))
                if status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    raise ProtocolError("the script did not compile")


# --------------------------------------------------------------------------- the two visits

@dataclass
class Visit:
    """One visit's outcome: ``seconds`` of the page run that answered, the server times the
    page showed (ms), and the failures: ``wrong`` (an answer differs from the reference),
    ``errors`` (error elements, protocol failures)."""

    kind: str
    seconds: float | None = None
    server_ms: list[float] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.wrong and not self.errors


def check_columns(columns: Sequence[Column], expected: Sequence[Sequence[str]]) -> list[str]:
    """What differs between the page's columns and the expected ids (one list per column, in order)."""
    if len(columns) != len(expected):
        return [f"{len(columns)} result column(s) on the page, {len(expected)} expected"]
    return [f"column {c.label!r}: page {c.ids} vs library {list(e)}"
            for c, e in zip(columns, expected) if c.ids != list(e)]


def check_r100(page: Page, expected: str) -> list[str]:
    """``[]`` when the metrics table's first R@100 cell is ``expected`` (``"%.2f"``, in %)."""
    table = page.table_with("R@100")
    if table is None or table.num_rows == 0:
        return ["no metrics table with an R@100 column on the page"]
    shown = f"{float(table.column('R@100')[0].as_py()):.2f}"
    return [] if shown == expected else [f"R@100 shown {shown} vs CLI {expected}"]


async def search_visit(base_url: str, query: str | Mapping[str, str | Sequence[str]],
                       expected: Sequence[Sequence[str]], *, timeout: float = RUN_TIMEOUT_S,
                       headers: Mapping[str, str] | None = None) -> Visit:
    """Open the deep link ``/search?QUERY``; the hit cards of each column must equal ``expected``."""
    visit = Visit("search", started=time.time())
    try:
        async with Visitor(base_url, timeout=timeout, headers=headers) as v:
            page = await v.open("search", query)
        visit.seconds = page.seconds
        columns = page.columns()
        visit.server_ms = [c.server_ms for c in columns if c.server_ms is not None]
        visit.wrong = check_columns(columns, expected)
        visit.errors = page.errors()
    except (ProtocolError, OSError, asyncio.TimeoutError, websockets.WebSocketException) as exc:
        visit.errors.append(f"{type(exc).__name__}: {exc}")
    return visit


async def score_visit(base_url: str, expected_r100: str, *, timeout: float = RUN_TIMEOUT_S,
                      hold: float = 0.0, headers: Mapping[str, str] | None = None) -> Visit:
    """Open the app, follow the link to the Score page, press « Évaluer ce système intégré »
    (the menu opens on BM25); the R@100 shown must be ``expected_r100``. ``seconds`` is the
    press's run. ``hold``: seconds to stay connected afterwards (a visitor reading the page)."""
    visit = Visit("score", started=time.time())
    try:
        async with Visitor(base_url, timeout=timeout, headers=headers) as v:
            await v.open("")
            page = await v.goto("score")
            page = await v.click(page, SCORE_BUTTON)
            if hold:
                await asyncio.sleep(hold)
        visit.seconds = page.seconds
        visit.wrong = check_r100(page, expected_r100)
        visit.errors = page.errors()
    except (ProtocolError, OSError, asyncio.TimeoutError, websockets.WebSocketException) as exc:
        visit.errors.append(f"{type(exc).__name__}: {exc}")
    return visit
