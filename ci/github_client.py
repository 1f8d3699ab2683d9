"""The GitHub REST client of ``ci/post_comment.py`` (standard library only, Python 3.9+).

One call at a time, JSON in and out (:meth:`GitHub.request`): 5xx answers and network errors
retried with exponential backoff (a create is not repeated blindly: :class:`RetryableError`
at once), a rate limit waited for once within a bounded wait, the token sent only in the
``Authorization`` header and scrubbed from any text the server echoes. On it, the pull
request's comments: listed through the ``Link: rel="next"`` pages (on the API's own host
only), and the sticky one, whose first line is the marker, created or updated
(:meth:`GitHub.upsert`). The script reads the settings and the body, and maps these errors to
its exit codes.
"""

from __future__ import annotations

import http.client
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable

USER_AGENT = "allot-post-comment/1"


class ApiError(Exception):
    """A request that failed for good; the message is safe to print (token scrubbed)."""


class RetryableError(ApiError):
    """A 5xx answer or a network error, raised at once where a retry could repeat a write."""


@dataclass(frozen=True)
class Settings:
    api_url: str
    repo: str
    pr: int
    retries: int = 3
    backoff_s: float = 2.0
    max_wait_s: float = 60.0


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: object


class GitHub:
    """A tiny GitHub REST client: JSON in and out, retries 5xx with exponential backoff,
    honours rate limits within a bounded wait, and never lets the token out."""

    def __init__(self, settings: Settings, token: str,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time):
        self._s = settings
        self._token = token
        self._sleep = sleep
        self._clock = clock

    def scrub(self, text: str) -> str:
        """``text`` with every occurrence of the token replaced by ``***``."""
        return text.replace(self._token, "***") if self._token else text

    def request(self, method: str, url: str, payload: object | None = None,
                retry: bool = True) -> Response:
        """The answer to one API call; 5xx and network errors are retried (with ``retry``;
        else :class:`RetryableError` at the first), rate limits waited for once."""
        if not url.startswith("http"):
            url = self._s.api_url.rstrip("/") + url
        data = json.dumps(payload).encode() if payload is not None else None
        attempt = 0
        rate_waited = False
        while True:
            req = urllib.request.Request(url, data=data, method=method)
            req.add_header("Authorization", f"Bearer {self._token}")
            req.add_header("Accept", "application/vnd.github+json")
            req.add_header("X-GitHub-Api-Version", "2022-11-28")
            req.add_header("User-Agent", USER_AGENT)
            if data is not None:
                req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return Response(resp.status, _lower(resp.headers), _json(resp.read()))
            except urllib.error.HTTPError as err:
                headers = _lower(err.headers)
                try:
                    body = _json(err.read())
                except (http.client.HTTPException, OSError):
                    body = None
                status = err.code
            except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
                # (a refused connection, a reset, a garbled or cut-short answer: a network error)
                reason = getattr(err, "reason", None) or f"{type(err).__name__}: {err}"
                status, headers, body = 0, {}, {"message": str(reason)}
            what = f"{method} {_path(url)}"
            message = self.scrub(_message(body))
            if status in (403, 429) and _is_rate_limit(status, headers, body):
                wait = _rate_limit_wait(headers, self._clock())
                if rate_waited:
                    raise ApiError(f"{what}: still rate limited after one bounded wait "
                                   f"(HTTP {status}: {message}); try again later")
                if wait > self._s.max_wait_s:
                    raise ApiError(f"{what}: rate limited by GitHub (HTTP {status}: "
                                   f"{message}); the limit resets in {wait:.0f} s, more than "
                                   f"the {self._s.max_wait_s:.0f} s this script waits")
                log(f"{what}: rate limited (HTTP {status}); waiting {wait:.0f} s")
                self._sleep(wait)
                rate_waited = True
                continue
            if status == 0 or status >= 500:
                if not retry:
                    raise RetryableError(f"{what}: {'HTTP ' + str(status) if status else 'network error'} "
                                         f"({message})")
                if attempt < self._s.retries:
                    delay = self._s.backoff_s * (2 ** attempt)
                    attempt += 1
                    log(f"{what}: {'HTTP ' + str(status) if status else 'network error'} "
                         f"({message}); retry {attempt}/{self._s.retries} in {delay:g} s")
                    self._sleep(delay)
                    continue
                raise ApiError(f"{what}: failed after {attempt + 1} attempts; last error "
                               f"{'HTTP ' + str(status) if status else 'network'}: {message}")
            raise ApiError(f"{what}: HTTP {status}: {message}{_hint(status)}")

    def comments(self) -> list[dict]:
        """Every comment on the pull request, following ``Link: rel="next"`` pages."""
        url: str | None = (f"/repos/{self._s.repo}/issues/{self._s.pr}/comments"
                           "?per_page=100")
        out: list[dict] = []
        while url:
            resp = self.request("GET", url)
            if not isinstance(resp.body, list):
                raise ApiError(f"GET {_path(url)}: expected a list of comments")
            out.extend(resp.body)
            url = _next_link(resp.headers.get("link", ""))
            if url and not _same_origin(url, self._s.api_url):
                # the token goes wherever we send requests: only ever to the API's own host
                raise ApiError(f"GET {_path(url)}: pagination link leaves {self._s.api_url}")
        return out

    def upsert(self, body: str, marker: str, existing: list[dict] | None = None) -> tuple[str, str]:
        """Create the sticky comment or update it; returns (``created``|``updated``|
        ``unchanged``, html_url). ``existing``: our comments, when just listed."""
        if existing is None:
            existing = self.sticky(marker)
        if existing:
            comment = existing[0]
            if comment.get("body") == body:
                return "unchanged", str(comment.get("html_url", ""))
            resp = self.request("PATCH", f"/repos/{self._s.repo}/issues/comments/{comment['id']}",
                                {"body": body})
            return "updated", str(_field(resp.body, "html_url"))
        create = f"/repos/{self._s.repo}/issues/{self._s.pr}/comments"
        try:
            resp = self.request("POST", create, {"body": body}, retry=False)
        except RetryableError as err:
            # a POST that failed on the way back may have made the comment: look again rather
            # than post a second one
            log(f"{err}; looking for the comment before posting again")
            found = self.sticky(marker)
            if found:
                return self.upsert(body, marker, found)
            resp = self.request("POST", create, {"body": body})
        return "created", str(_field(resp.body, "html_url"))

    def sticky(self, marker: str) -> list[dict]:
        """The comments that are ours: the marker starts their first line (a comment that only
        mentions it, by anyone, is not ours and is never overwritten)."""
        return [c for c in self.comments() if str(c.get("body") or "").startswith(marker + "\n")]

# ------------------------------------------------------------------------------ helpers

def _lower(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in (headers.items() if headers else [])}


def _json(raw: bytes) -> object:
    try:
        return json.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, UnicodeDecodeError):
        return {"message": raw[:200].decode("utf-8", "replace")}


def _message(body: object) -> str:
    """GitHub's message, with the reasons of a validation failure (``errors[].message``)."""
    if isinstance(body, dict) and body.get("message"):
        reasons = [str(e.get("message") or e.get("code") or "") for e in body.get("errors") or []
                   if isinstance(e, dict)]
        reasons = [r for r in reasons if r]
        return str(body["message"]) + (f" ({'; '.join(reasons)})" if reasons else "")
    return "no message"


def _field(body: object, key: str) -> object:
    return body.get(key, "") if isinstance(body, dict) else ""


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path


def _hint(status: int) -> str:
    return {
        401: " (the token is invalid or expired: check GITHUB_TOKEN)",
        403: (" (the token may not write to pull requests: grant `pull-requests: write`; "
              "pull requests from forks get a read-only token)"),
        404: " (check the repository and pull request number, and the token's access)",
        422: " (GitHub refused the comment as sent: see the reason above)",
    }.get(status, "")


def _is_rate_limit(status: int, headers: dict[str, str], body: object) -> bool:
    if status == 429 or "retry-after" in headers:
        return True
    if headers.get("x-ratelimit-remaining") == "0":
        return True
    return "rate limit" in _message(body).lower()


def _rate_limit_wait(headers: dict[str, str], now: float) -> float:
    """Seconds to wait: ``Retry-After`` when present, else until ``x-ratelimit-reset``
    (epoch seconds), else 60 s as GitHub's documentation advises for secondary limits."""
    if headers.get("retry-after", "").strip().isdigit():
        return float(headers["retry-after"])
    reset = headers.get("x-ratelimit-reset", "").strip()
    if reset.isdigit():
        return max(0.0, float(reset) - now) + 1.0
    return 60.0


_LINK_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


def _next_link(link: str) -> str | None:
    match = _LINK_NEXT.search(link)
    return match.group(1) if match else None


def _same_origin(url: str, api_url: str) -> bool:
    a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(api_url)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


def log(text: str) -> None:
    """A line on stderr, in the name of the script."""
    print(f"post_comment: {text}", file=sys.stderr)
