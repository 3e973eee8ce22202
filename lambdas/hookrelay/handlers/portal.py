"""The consumer portal's static page, GET /portal and its files: the one route without the authorizer.

It serves files packaged with the code and nothing else: no data, no token (the token travels in the link's
fragment, which browsers never send). Each answer carries a strict Content-Security-Policy: scripts, styles
and API calls from this origin only, no inline code, no frames, no forms, no base URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay.functions import PORTAL

logger = Logger(service=PORTAL.name)

PAGE_DIRECTORY = Path(__file__).resolve().parent.parent / "portal"
PAGE = "index.html"
# The files the page is made of, by name, with their types: nothing else in the directory is ever served.
ASSETS = {
    PAGE: "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _answer(status: int, content_type: str, body: str) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": content_type, **SECURITY_HEADERS}, "body": body}


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    asset = (event.get("pathParameters") or {}).get("asset") or PAGE
    content_type = ASSETS.get(asset)
    if content_type is None:
        return _answer(404, "text/plain; charset=utf-8", "not found\n")
    return _answer(200, content_type, (PAGE_DIRECTORY / asset).read_text(encoding="utf-8"))
