#!/usr/bin/env python3
"""Create or update one sticky comment on a GitHub pull request (standard library only).

The comment is found again by a hidden HTML marker (``<!-- allot-impact -->`` by default)
that starts its first line (a comment that only mentions the marker is never touched), so
every run edits the same comment instead of adding a new one; a create whose answer was lost
(5xx, network) looks for the comment again before posting again. Any CI system can run this
script: it needs only Python 3.9+ and these environment variables.

Environment
-----------
``GITHUB_TOKEN``       required. Sent only in the ``Authorization`` header; never printed,
                       never logged, never written anywhere (any text echoed back by the
                       server is scrubbed of it before it is shown).
``GITHUB_REPOSITORY``  ``owner/name`` (GitHub Actions sets it); ``--repo`` overrides.
``PR_NUMBER``          the pull request number; ``--pr`` overrides. When neither is given,
                       the number is read from the event file at ``GITHUB_EVENT_PATH``
                       (``pull_request.number``), which GitHub Actions provides.
``GITHUB_API_URL``     REST API root, ``https://api.github.com`` by default (GitHub
                       Enterprise: ``https://HOST/api/v3``); ``--api-url`` overrides.
``ALLOT_POST_RETRIES``       attempts after the first for 5xx / network errors (default 3).
``ALLOT_POST_BACKOFF_S``     first retry delay, doubled each retry (default 2 s).
``ALLOT_POST_MAX_WAIT_S``    longest wait honoured for a rate limit (default 60 s); a reset
                             further away than this fails at once instead of waiting.

Exit codes
----------
0  the comment was created (or updated, or already identical)
1  the GitHub API refused or failed: 401/403/404/422, rate limit not lifted within the
   bounded wait, 5xx or network errors after every retry
2  usage error: no token (or one with characters no token has), no repository, no pull
   request number, an API root that is not an http(s) URL, a setting that is not a finite
   number, unreadable body file (bytes that are not UTF-8 are shown as U+FFFD instead)

Endpoints (GitHub REST v3): ``GET /repos/{repo}/issues/{pr}/comments`` (paginated through
the ``Link: rel="next"`` header), ``POST /repos/{repo}/issues/{pr}/comments`` and
``PATCH /repos/{repo}/issues/comments/{id}``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable, Sequence

DEFAULT_MARKER = "<!-- allot-impact -->"
DEFAULT_API = "https://api.github.com"
MAX_BODY = 65536  # GitHub's limit on a comment body, in characters
USER_AGENT = "allot-post-comment/1"

EXIT_OK, EXIT_API, EXIT_USAGE = 0, 1, 2


class ApiError(Exception):
    """A request that failed for good; the message is safe to print (token scrubbed)."""


class RetryableError(ApiError):
    """A 5xx answer or a network error, raised at once where a retry could repeat a write."""


class UsageError(Exception):
    """Missing or invalid input from the caller."""


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
                _log(f"{what}: rate limited (HTTP {status}); waiting {wait:.0f} s")
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
                    _log(f"{what}: {'HTTP ' + str(status) if status else 'network error'} "
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
            _log(f"{err}; looking for the comment before posting again")
            found = self.sticky(marker)
            if found:
                return self.upsert(body, marker, found)
            resp = self.request("POST", create, {"body": body})
        return "created", str(_field(resp.body, "html_url"))

    def sticky(self, marker: str) -> list[dict]:
        """The comments that are ours: the marker starts their first line (a comment that only
        mentions it, by anyone, is not ours and is never overwritten)."""
        return [c for c in self.comments() if str(c.get("body") or "").startswith(marker + "\n")]


def compose(text: str, marker: str) -> str:
    """The comment body: the marker on the first line, then ``text``, cut to GitHub's limit
    with a visible note when too long."""
    head = marker + "\n"
    body = head + text
    if len(body) <= MAX_BODY:
        return body
    note = "\n\n_(report truncated to fit a GitHub comment; see the workflow run for all of it)_\n"
    room = MAX_BODY - len(head) - len(note) - 200  # (200: what closing the open parts takes)
    cut = text[:room]
    close = ""
    if cut.count("```") % 2:  # an open code block
        close += "\n```"
    close += "\n</details>" * max(0, len(re.findall(r"<details\b", cut)) - cut.count("</details>"))
    return head + cut + close + note  # (the note outside any fold: always seen)


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


def _log(text: str) -> None:
    print(f"post_comment: {text}", file=sys.stderr)


def _pr_number(explicit: str | None) -> int:
    value = explicit or os.environ.get("PR_NUMBER")
    if not value and os.environ.get("GITHUB_EVENT_PATH"):
        try:
            with open(os.environ["GITHUB_EVENT_PATH"], encoding="utf-8") as fh:
                event = json.load(fh)
            if not isinstance(event, dict) or not isinstance(event.get("pull_request") or {}, dict):
                raise ValueError("not a pull_request event (a JSON object)")
            value = str((event.get("pull_request") or {}).get("number") or event.get("number")
                        or "")
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot read GITHUB_EVENT_PATH: {err}") from None
    if not value:
        raise UsageError("no pull request number: pass --pr, set PR_NUMBER, or run on a "
                         "pull_request event (GITHUB_EVENT_PATH)")
    if not str(value).isdigit() or int(value) == 0:
        raise UsageError(f"pull request number must be a positive integer, got {value!r}")
    return int(value)


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name} must be a finite number, not negative, got {raw!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Create or update the sticky Allot comment on a GitHub pull request.")
    parser.add_argument("--body-file", required=True,
                        help="Markdown file with the comment text ('-' reads stdin)")
    parser.add_argument("--repo", help="owner/name (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--pr", help="pull request number (default: $PR_NUMBER or the event)")
    parser.add_argument("--marker", default=DEFAULT_MARKER,
                        help=f"hidden HTML comment identifying the sticky comment "
                             f"(default: {DEFAULT_MARKER})")
    parser.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or "
                                          f"{DEFAULT_API})")
    args = parser.parse_args(argv)
    token = os.environ.get("GITHUB_TOKEN", "").strip()
    try:
        if not token:
            raise UsageError("GITHUB_TOKEN is not set")
        if not re.fullmatch(r"[\x21-\x7e]+", token):  # (never shown: not even in an error)
            raise UsageError("GITHUB_TOKEN holds characters no GitHub token has (spaces, line "
                             "breaks, non-ASCII); check how it is set")
        repo = args.repo or os.environ.get("GITHUB_REPOSITORY", "")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
            raise UsageError(f"repository must be owner/name (--repo or GITHUB_REPOSITORY), "
                             f"got {repo!r}")
        if not (args.marker.startswith("<!--") and args.marker.endswith("-->")):
            raise UsageError("--marker must be an HTML comment, e.g. <!-- allot-impact -->")
        api_url = args.api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API
        if urllib.parse.urlsplit(api_url).scheme not in ("http", "https") or \
                not urllib.parse.urlsplit(api_url).netloc:
            raise UsageError(f"the API root must be an http(s) URL (--api-url or "
                             f"GITHUB_API_URL), got {api_url!r}")
        settings = Settings(
            api_url=api_url,
            repo=repo, pr=_pr_number(args.pr),
            retries=int(_env_number("ALLOT_POST_RETRIES", 3)),
            backoff_s=_env_number("ALLOT_POST_BACKOFF_S", 2.0),
            max_wait_s=_env_number("ALLOT_POST_MAX_WAIT_S", 60.0))
        try:
            if args.body_file == "-":
                raw = sys.stdin.buffer.read()
            else:
                with open(args.body_file, "rb") as fh:
                    raw = fh.read()
            # (bytes that are not UTF-8, e.g. a report cut inside a character, shown as U+FFFD)
            text = raw.decode("utf-8", "replace")
        except OSError as err:
            raise UsageError(f"cannot read body file: {err}") from None
    except UsageError as err:
        _log(f"error: {err}")
        return EXIT_USAGE
    client = GitHub(settings, token)
    try:
        outcome, url = client.upsert(compose(text, args.marker), args.marker)
    except ApiError as err:
        _log(f"error: {client.scrub(str(err))}")
        return EXIT_API
    print(f"post_comment: {outcome} comment on {settings.repo}#{settings.pr}: {url}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
