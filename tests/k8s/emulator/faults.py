"""Fault injection and the request log, expressed as kmock reactions.

A :class:`Fault` is a kmock payload: registered with ``emu[criteria] << fault`` it answers the
next ``times`` matching requests with an error (or delays them), then returns ``NotImplemented``
so kmock disables the reaction. Because the emulator's own API handling is a kmock *fallback*
reaction, a faulted request never reaches the store: an injected 409 or 503 changes nothing,
exactly like a request the real API server rejected.
"""
from __future__ import annotations

import asyncio
import contextvars
import re
import threading
from dataclasses import dataclass
from typing import Any

import kmock

from .errors import status_body


@dataclass
class RequestRecord:
    """One request as the server saw it (logged on arrival), with the status it answered.

    ``status`` is 0 while the request is in flight; a watch gets its 200 when its stream opens.
    """
    method: str
    path: str
    params: dict[str, str]
    body: Any
    status: int
    at: float

    @property
    def watch(self) -> bool:
        return self.params.get("watch") in ("true", "1")


# The record of the request being served by the current task (watch streams update its status).
CURRENT_RECORD: contextvars.ContextVar[RequestRecord] = contextvars.ContextVar("current_record")


class Fault:
    """Answers the next ``times`` matching requests with ``status`` (or delays them)."""

    def __init__(self, method: str, path_regex: str, status: int | None, times: int | None,
                 body: Any = None, delay: float = 0.0) -> None:
        self.method = method.upper()
        self.path = re.compile(path_regex)
        self.status = status
        self.remaining = times
        self.body = body
        self.delay = delay
        self.hits = 0
        self._lock = threading.Lock()

    def matches(self, request: kmock.Request) -> bool:
        method = str(getattr(request.method, "value", request.method)).upper()
        return (self.method in ("*", method)) and bool(self.path.search(request.url.path))

    def _take(self) -> bool:
        with self._lock:
            if self.remaining is not None and self.remaining <= 0:
                return False
            if self.remaining is not None:
                self.remaining -= 1
            self.hits += 1
            return True

    async def __call__(self, request: kmock.Request) -> Any:
        if not self._take():
            return NotImplemented  # depleted: kmock disables this reaction for good
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.status is None:
            raise NotImplementedError  # latency only: let the next reaction serve the request
        body = self.body if self.body is not None else status_body(
            self.status, f"injected fault: {self.status} for {request.method} {request.url.path}")
        headers = {"Retry-After": "1"} if self.status == 429 else None
        return kmock.Response(status=self.status, payload=body, headers=headers)

    def __repr__(self) -> str:
        return (f"Fault({self.method} {self.path.pattern!r} -> {self.status}, "
                f"remaining={self.remaining}, hits={self.hits})")
