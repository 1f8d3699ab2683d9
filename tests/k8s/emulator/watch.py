"""Watch streams: ``?watch=true`` as the API server's watch cache serves it.

- Without ``resourceVersion`` (or with ``"0"``) the stream starts with a synthetic ADDED per
  matching object, then live changes. With ``resourceVersion=N`` it replays every change after
  N from the per-resource log, then goes live; if N is older than the log still holds, the stream
  answers HTTP 200 with one ``ERROR`` event whose Status has code 410 (``Expired``, "too old
  resource version"), which ``kubernetes.watch.Watch`` turns into ``ApiException(410)``.
- Selectors apply to both sides of a change: an object that stops matching is sent as DELETED,
  one that starts matching as ADDED (as the real watch cache does).
- ``timeoutSeconds`` ends the stream cleanly; ``allowWatchBookmarks=true`` adds BOOKMARK events
  every ``bookmark_interval`` seconds carrying a resourceVersion safe to resume from.
- A live watcher that falls behind the log (the window trimmed changes it had not received) gets
  the 410 ERROR event too; ``emu.compact`` alone does not break a live watch, only resumes.
- ``emu.drop_watches()`` ends every open stream (the client sees a clean end of stream).
"""
from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp.web

from . import errors
from .faults import CURRENT_RECORD
from .resources import ResourceType
from .selectors import Requirement, match_requirements
from .store import Change

if TYPE_CHECKING:
    from .server import KubeEmulator

Matcher = Callable[[Mapping[str, Any]], bool]


def make_matcher(ns: str | None, name: str | None, labels: list[Requirement],
                 fields: Matcher | None) -> Matcher:
    def matches(obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        return ((ns is None or meta.get("namespace") == ns)
                and (name is None or meta.get("name") == name)
                and (not labels or match_requirements(labels, meta.get("labels")))
                and (fields is None or fields(obj)))
    return matches


def project(change: Change, matches: Matcher) -> dict[str, Any] | None:
    """The event a watcher with this filter sees for ``change`` (None: nothing)."""
    new_ok = matches(change.obj)
    if change.type == "ADDED":
        return {"type": "ADDED", "object": change.obj} if new_ok else None
    if change.type == "DELETED":
        return {"type": "DELETED", "object": change.obj} if new_ok else None
    old_ok = change.old is not None and matches(change.old)
    if new_ok and old_ok:
        return {"type": "MODIFIED", "object": change.obj}
    if new_ok:
        return {"type": "ADDED", "object": change.obj}
    if old_ok:
        return {"type": "DELETED", "object": change.obj}
    return None


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


async def serve_watch(emu: "KubeEmulator", raw: aiohttp.web.BaseRequest, r: ResourceType,
                      matches: Matcher, params: Mapping[str, str]) -> aiohttp.web.StreamResponse:
    loop = asyncio.get_running_loop()
    store = emu.store
    timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else math.inf
    deadline = loop.time() + timeout
    bookmarks = params.get("allowWatchBookmarks") in ("true", "1")
    next_bookmark = loop.time() + emu.bookmark_interval
    rv_param = params.get("resourceVersion") or "0"
    if not rv_param.isdigit():
        raise errors.bad_request(f'invalid resource version: "{rv_param}"')
    generation = emu._drop_generation

    response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await response.prepare(raw)
    if (record := CURRENT_RECORD.get(None)) is not None:
        record.status = 200
    emu._open_watches += 1
    try:
        with store.lock:
            too_old = None
            if rv_param == "0":
                cursor = store.rv
                initial = [o for o in store.list(r) if matches(o)]
            else:
                cursor, initial = int(rv_param), []
                if cursor < store.compacted(r):
                    too_old = errors.gone(f"too old resource version: {cursor} ({store.compacted(r) + 1})")
        if too_old is not None:
            await response.write(_line({"type": "ERROR", "object": too_old.status_body()}))
            await response.write_eof()
            return response
        for obj in initial:
            await response.write(_line({"type": "ADDED", "object": obj}))
        while generation == emu._drop_generation:
            changed = emu._changed
            try:
                changes, seen = store.changes_after(r, cursor)
            except errors.ApiError as exc:
                await response.write(_line({"type": "ERROR", "object": exc.status_body()}))
                return response
            for change in changes:
                event = project(change, matches)
                if event is not None:
                    await response.write(_line(event))
            cursor = max(cursor, seen)
            now = loop.time()
            if bookmarks and now >= next_bookmark:
                await response.write(_line({"type": "BOOKMARK", "object": {
                    "kind": r.kind, "apiVersion": r.api_version,
                    "metadata": {"resourceVersion": str(cursor)}}}))
                next_bookmark = now + emu.bookmark_interval
            if now >= deadline or raw.transport is None or raw.transport.is_closing():
                break
            wait = min(deadline - now, 1.0, (next_bookmark - now) if bookmarks else 1.0)
            try:
                await asyncio.wait_for(changed.wait(), timeout=max(wait, 0.0))
            except asyncio.TimeoutError:
                pass
    except ConnectionError:
        return response
    finally:
        emu._open_watches -= 1
    try:
        await response.write_eof()
    except ConnectionError:
        pass
    return response
