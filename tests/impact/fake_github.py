"""A local stand-in for the GitHub REST endpoints ``ci/post_comment.py`` uses.

It serves, on 127.0.0.1 and a free port: ``GET /repos/{o}/{r}/issues/{n}/comments`` with
``page``/``per_page`` and a ``Link`` header like GitHub's (page size capped by ``page_cap``),
``POST`` to the same path, and ``PATCH /repos/{o}/{r}/issues/comments/{id}``. Requests
without ``Authorization: Bearer <token>`` get GitHub's 401. Tests queue forced responses
(rate limits, 5xx) with :meth:`FakeGitHub.fail_next`, and read every request from ``log``.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Logged:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: object


@dataclass
class FakeGitHub:
    token: str
    repo: str = "acme/budgets"
    page_cap: int = 100
    comments: dict[int, list[dict]] = field(default_factory=dict)
    log: list[Logged] = field(default_factory=list)
    forced: list[tuple[int, dict[str, str], dict]] = field(default_factory=list)
    next_id: int = 1000
    link_host: str | None = None  # host written into Link headers (default: this server)
    lost_replies: int = 0  # POSTs that make their comment but answer 502 (a reply lost on the way)

    def add_comment(self, pr: int, body: str, user: str = "someone") -> dict:
        self.next_id += 1
        comment = {"id": self.next_id, "body": body, "user": {"login": user},
                   "html_url": f"https://github.test/{self.repo}/pull/{pr}#issuecomment-{self.next_id}"}
        self.comments.setdefault(pr, []).append(comment)
        return comment

    def fail_next(self, status: int, headers: dict[str, str] | None = None,
                  message: str = "error", times: int = 1) -> None:
        for _ in range(times):
            self.forced.append((status, headers or {}, {"message": message}))

    def calls(self, method: str) -> list[Logged]:
        return [r for r in self.log if r.method == method]

    # -------------------------------------------------------------------------- serving

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _reply(self, status: int, body: object, headers: dict[str, str] | None = None):
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self):
                split = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                fake.log.append(Logged(self.command, split.path,
                                       urllib.parse.parse_qs(split.query),
                                       {k.lower(): v for k, v in self.headers.items()}, body))
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._reply(401, {"message": "Bad credentials",
                                             "documentation_url": "https://docs.github.com/rest"})
                if fake.forced:
                    status, headers, payload = fake.forced.pop(0)
                    return self._reply(status, payload, headers)
                base = f"/repos/{fake.repo}/issues"
                m = re.fullmatch(re.escape(base) + r"/(\d+)/comments", split.path)
                if m and self.command == "GET":
                    return self._list(int(m.group(1)), split)
                if m and self.command == "POST":
                    made = fake.add_comment(int(m.group(1)), body["body"], "bot")
                    if fake.lost_replies:
                        fake.lost_replies -= 1
                        return self._reply(502, {"message": "Bad Gateway"})
                    return self._reply(201, made)
                m = re.fullmatch(re.escape(base) + r"/comments/(\d+)", split.path)
                if m and self.command == "PATCH":
                    for items in fake.comments.values():
                        for c in items:
                            if c["id"] == int(m.group(1)):
                                c["body"] = body["body"]
                                return self._reply(200, c)
                return self._reply(404, {"message": "Not Found"})

            def _list(self, pr: int, split):
                q = urllib.parse.parse_qs(split.query)
                per_page = min(int(q.get("per_page", ["30"])[0]), fake.page_cap)
                page = int(q.get("page", ["1"])[0])
                items = fake.comments.get(pr, [])
                chunk = items[(page - 1) * per_page: page * per_page]
                headers = {}
                if page * per_page < len(items):
                    host = fake.link_host or self.headers["Host"]
                    nxt = f"http://{host}{split.path}?per_page={per_page}&page={page + 1}"
                    headers["Link"] = f'<{nxt}>; rel="next", <{nxt}>; rel="last"'
                return self._reply(200, chunk, headers)

            do_GET = do_POST = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
