"""API errors: RFC 9457 problem details, raised as one exception type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import requests

PROBLEM_FIELDS = ("type", "title", "status", "detail", "instance", "errors")


@dataclass(frozen=True)
class Problem:
    """An RFC 9457 problem document (`application/problem+json`)."""

    status: int
    title: str
    detail: str | None = None
    type: str = "about:blank"
    instance: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    extensions: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_response(cls, response: requests.Response) -> Problem:
        """The problem the API described, or one made up from a response that is not a problem document.

        Proxies and load balancers answer with HTML or plain text; their status and an excerpt still tell
        the caller more than a JSON decoding error would.
        """
        try:
            document = response.json()
        except ValueError:
            document = None
        if not isinstance(document, dict) or "title" not in document:
            excerpt = response.text.strip()[:200] or None
            return cls(
                status=response.status_code, title=response.reason or f"HTTP {response.status_code}", detail=excerpt
            )
        return cls(
            status=int(document.get("status") or response.status_code),
            title=str(document["title"]),
            detail=document.get("detail"),
            type=document.get("type") or "about:blank",
            instance=document.get("instance"),
            errors=list(document.get("errors") or []),
            extensions={k: v for k, v in document.items() if k not in PROBLEM_FIELDS},
        )

    def describe(self) -> str:
        """Human-readable, several lines: what the CLI prints."""
        lines = [f"{self.status} {self.title}" + (f": {self.detail}" if self.detail else "")]
        for error in self.errors:
            where = error.get("field") or error.get("pointer") or ""
            what = error.get("message") or error.get("detail") or error
            lines.append(f"  - {where}: {what}" if where else f"  - {what}")
        if self.type != "about:blank":
            lines.append(f"  see {self.type}")
        return "\n".join(lines)


class HookrelayError(Exception):
    """The API answered with an error; `problem` carries its problem details."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.describe())
        self.problem = problem

    @property
    def status(self) -> int:
        return self.problem.status
