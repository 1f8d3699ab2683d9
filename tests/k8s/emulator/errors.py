"""API errors rendered as the real API server renders them: a ``v1 Status`` with reason and code.

The messages copy the API server's wording (``jobs.batch "x" not found``, ``Operation cannot be
fulfilled on ...``) because clients and humans match on them.
"""
from __future__ import annotations

from typing import Any

# HTTP status -> the Status.reason the API server uses for it.
REASONS: dict[int, str] = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
    503: "ServiceUnavailable", 504: "Timeout",
}


class ApiError(Exception):
    """An API-level failure; ``status_body()`` is what goes on the wire."""

    def __init__(self, code: int, message: str, reason: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status_body(self) -> dict[str, Any]:
        return status_body(self.code, self.message, self.reason, self.details)


def status_body(code: int, message: str, reason: str | None = None,
                details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message, "reason": reason or REASONS.get(code, "Unknown"), "code": code,
    }
    if details:
        body["details"] = details
    return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, f'{_qualified(plural, group)} "{name}" not found',
                    details={"name": name, "group": group, "kind": plural})


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, f'{_qualified(plural, group)} "{name}" already exists', "AlreadyExists",
                    details={"name": name, "group": group, "kind": plural})


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        "Conflict", details={"name": name, "group": group, "kind": plural})


def invalid(kind: str, group: str, name: str, field: str, message: str) -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422, f'{qualified} "{name}" is invalid: {field}: {message}', "Invalid",
        details={"name": name, "group": group, "kind": kind,
                 "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]})


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, "BadRequest")


def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def too_many_requests(message: str) -> ApiError:
    return ApiError(429, message, "TooManyRequests")
