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
``PATCH /repos/{repo}/issues/comments/{id}``, called by the client in ``github_client.py``
beside this script (copy the two files together).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import urllib.parse
from typing import Sequence

# (a sibling module: ``python ci/post_comment.py`` puts this file's folder first on sys.path)
from github_client import ApiError, GitHub, Settings, log

DEFAULT_MARKER = "<!-- allot-impact -->"
DEFAULT_API = "https://api.github.com"
MAX_BODY = 65536  # GitHub's limit on a comment body, in characters

EXIT_OK, EXIT_API, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Missing or invalid input from the caller."""


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
        log(f"error: {err}")
        return EXIT_USAGE
    client = GitHub(settings, token)
    try:
        outcome, url = client.upsert(compose(text, args.marker), args.marker)
    except ApiError as err:
        log(f"error: {client.scrub(str(err))}")
        return EXIT_API
    print(f"post_comment: {outcome} comment on {settings.repo}#{settings.pr}: {url}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
