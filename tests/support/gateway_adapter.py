"""A requests transport that hands each request to `local.gateway` in process: the real client, no sockets.

Mount it on a session (`session.mount(GATEWAY_URL, GatewayAdapter())`) and the client's requests reach
the real authorizer and handlers on moto exactly as the local stack's HTTP server would pass them on.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

from local import gateway

GATEWAY_URL = "http://hookrelay.gateway"


class GatewayAdapter(BaseAdapter):
    def send(self, request: requests.PreparedRequest, **_: Any) -> requests.Response:
        url = urlsplit(request.url or "")
        body = request.body or b""
        raw = body.encode() if isinstance(body, str) else bytes(body)
        answer = gateway.handle(request.method or "GET", url.path, url.query, dict(request.headers), raw)
        response = requests.Response()
        response.status_code = answer.status
        response.reason = HTTPStatus(answer.status).phrase
        response.headers = CaseInsensitiveDict(answer.headers)
        response._content = answer.body
        response.url = request.url or ""
        response.request = request
        response.encoding = "utf-8"
        return response

    def close(self) -> None:
        pass


def gateway_session() -> requests.Session:
    session = requests.Session()
    session.mount(GATEWAY_URL, GatewayAdapter())
    return session
