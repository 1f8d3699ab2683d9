"""The dashboard as a plain request handler, mountable in any stdlib HTTP server.

:func:`handle` ``(method, path, query, state_provider) -> (status, headers, body)`` serves:

* ``/`` : the page (``static/index.html``), with ``/static/app.js`` and ``/static/app.css``
  (hand-written, no external network at run time);
* ``/api/state`` : the whole view state (:meth:`engine.views.state.ViewState.to_dict`, with
  the derived ``views`` the page draws); what ``allot ... --url`` reads;
* ``/api/explain?job=ID`` : the explanation of a workload (:func:`engine.views.explain.explain`);
* ``/api/eta?job=ID`` : the forecast start (:func:`engine.views.forecast.forecast`);
* ``/api/usage?subtree=NODE`` and ``/api/usage.png?subtree=NODE`` : the usage report and chart.

``state_provider`` is a zero-argument callable returning the current
:class:`~engine.views.state.ViewState` (or ``None`` before there is one: 503). The JSON of a
state is cached while the provider returns the same object. :func:`serve` runs it in a
``ThreadingHTTPServer`` for ``allot dashboard``; the reconciler mounts :func:`handle` in its own
metrics server (``engine.k8s.metrics.serve(app=...)``).
"""

from __future__ import annotations

import json
import mimetypes
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Mapping
from urllib.parse import parse_qs, urlsplit

from engine.errors import UserError
from engine.views.derived import document
from engine.views.state import ViewState

STATIC = Path(__file__).resolve().parent / "static"
Response = tuple[int, dict[str, str], bytes]
StateProvider = Callable[[], "ViewState | None"]
PATHS = ("/", "/index.html", "/api/state", "/api/explain", "/api/eta", "/api/usage", "/api/usage.png")

_cache_lock = threading.Lock()
_cache: dict[str, object] = {"state": None, "body": b""}


def _json(status: int, doc: object) -> Response:
    body = json.dumps(doc, allow_nan=False).encode()
    return status, {"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store"}, body


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message})


def handles(path: str) -> bool:
    """Whether :func:`handle` serves ``path`` (for servers that mount it beside their own)."""
    return path in PATHS or path.startswith("/static/")


def _state_json(state: ViewState) -> bytes:
    with _cache_lock:
        if _cache["state"] is not state:
            _cache["body"] = json.dumps(document(state), allow_nan=False).encode()
            _cache["state"] = state
        return _cache["body"]  # type: ignore[return-value]


def handle(method: str, path: str, query: Mapping[str, list[str]] | str,
           state_provider: StateProvider) -> Response:
    """Serve one request; never raises for a bad request (4xx) or a missing state (503)."""
    if isinstance(query, str):
        query = parse_qs(query)
    if method not in ("GET", "HEAD"):
        return _error(405, f"method {method} not allowed")
    if path in ("/", "/index.html"):
        return _static("index.html")
    if path.startswith("/static/"):
        return _static(path[len("/static/"):])
    if not path.startswith("/api/"):
        return _error(404, f"no page {path}")
    state = state_provider()
    if state is None:
        return _error(503, "no state yet: the reconciler has not finished a pass")
    arg = lambda name: (query.get(name) or [""])[0]  # noqa: E731
    if path in ("/api/explain", "/api/eta") and not arg("job"):
        return _error(400, f"{path} needs the workload: ?job=ID (an id or a unique suffix of one)")
    try:
        if path == "/api/state":
            return 200, {"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store"}, \
                _state_json(state)
        if path == "/api/explain":
            from engine.views.explain import explain
            from engine.views.state import NotFound

            try:
                exp = explain(state, arg("job"))
            except NotFound as err:
                return _error(404, str(err))
            return _json(200, {**exp.to_dict(), "text": exp.text(), "now": state.now})
        if path == "/api/eta":
            from engine.views.forecast import forecast

            found = state.find(arg("job"))
            if len(found) != 1 or found[0] not in {w.id for w in state.snapshot.pending}:
                return _error(404, f"no pending workload {arg('job')!r}")
            return _json(200, forecast(state, found).to_dict())
        if path in ("/api/usage", "/api/usage.png"):
            from engine.views.usage import usage_png, usage_report

            rep = usage_report(state, arg("subtree") or None)
            if path == "/api/usage":
                return _json(200, rep)
            with tempfile.TemporaryDirectory() as tmp:
                png = Path(usage_png(rep, str(Path(tmp) / "usage.png"))).read_bytes()
            return 200, {"Content-Type": "image/png", "Cache-Control": "no-store"}, png
    except UserError as err:  # a view's problems name their CLI flag: here the query parameter
        return _error(400, "; ".join(str(p).removeprefix("--") for p in err.problems))
    return _error(404, f"no endpoint {path}")


def _static(name: str) -> Response:
    target = (STATIC / name).resolve()
    if STATIC not in target.parents or not target.is_file():
        return _error(404, f"no file {name}")
    ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if ctype.startswith("text/") or ctype.endswith("javascript"):
        ctype += "; charset=utf-8"
    return 200, {"Content-Type": ctype, "Cache-Control": "no-cache"}, target.read_bytes()


def make_handler(state_provider: StateProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            url = urlsplit(self.path)
            status, headers, body = handle("GET", url.path, url.query, state_provider)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def serve(state_provider: StateProvider, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve the dashboard in a daemon thread; ``server.shutdown()`` stops it."""
    server = ThreadingHTTPServer((host, port), make_handler(state_provider))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="allot-dashboard", daemon=True).start()
    return server
