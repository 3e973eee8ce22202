"""The sender against a real server on 127.0.0.1: what it refuses, what it reads, how it fails."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from hookrelay.adapters.http_sender import RequestsSender
from hookrelay.domain.classification import FailureKind
from tests.support.consumer import Reply, ScriptedConsumer


@pytest.fixture
def consumer() -> Iterator[ScriptedConsumer]:
    server = ScriptedConsumer()
    yield server
    server.close()


def port_of(consumer: ScriptedConsumer) -> int:
    return consumer.server.server_address[1]


def test_posts_the_exact_bytes_with_the_given_headers(consumer: ScriptedConsumer) -> None:
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {"webhook-id": "evt_1"}, b'{"a":1}')
    assert (result.status_code, result.error) == (200, None)
    [request] = consumer.received
    assert request.body == b'{"a":1}' and request.headers["webhook-id"] == "evt_1"


@pytest.mark.parametrize("host", ["127.0.0.1", "169.254.169.254", "10.1.2.3", "[::1]", "192.168.0.1"])
def test_non_public_addresses_are_refused_outside_local_mode(consumer: ScriptedConsumer, host: str) -> None:
    result = RequestsSender(timeout_seconds=1).send(f"http://{host}:{port_of(consumer)}/hook", {}, b"{}")
    assert result.error is FailureKind.BLOCKED and result.status_code is None
    assert consumer.received == []


def test_a_name_that_resolves_to_any_private_address_is_refused(consumer: ScriptedConsumer) -> None:
    sender = RequestsSender(resolver=lambda host, port: ["93.184.216.34", "127.0.0.1"])
    result = sender.send(f"http://hooks.example.test:{port_of(consumer)}/hook", {}, b"{}")
    assert result.error is FailureKind.BLOCKED
    assert consumer.received == []


def test_the_connection_goes_to_the_vetted_address_with_the_original_host(consumer: ScriptedConsumer) -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    sender = RequestsSender(allow_private_destinations=True, resolver=resolver)
    result = sender.send(f"http://hooks.example.test:{port_of(consumer)}/hook", {}, b"{}")
    assert result.status_code == 200
    assert lookups == ["hooks.example.test"]  # resolved once, and that answer was used
    assert consumer.received[0].headers["host"] == f"hooks.example.test:{port_of(consumer)}"


def test_dns_failure_is_a_dns_error() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    result = RequestsSender(resolver=resolver).send("https://nowhere.example.test/hook", {}, b"{}")
    assert result.error is FailureKind.DNS


def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    result = RequestsSender(allow_private_destinations=True).send(f"http://127.0.0.1:{closed_port}/", {}, b"{}")
    assert result.error is FailureKind.CONNECTION


def test_redirects_are_not_followed(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(301, headers=(("location", consumer.url + "/elsewhere"),))])
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert result.status_code == 301
    assert [r.path for r in consumer.received] == ["/hook"]


def test_a_hang_past_the_timeout_is_a_timeout(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(200, delay=2.0)])
    result = RequestsSender(timeout_seconds=0.5, allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert result.error is FailureKind.TIMEOUT and result.status_code is None


def test_the_response_excerpt_is_capped_at_1_kib(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(500, body=b"x" + "é".encode() * 4000)])  # the cap falls inside a character
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert result.status_code == 500
    assert 1000 < len(result.response_excerpt.encode()) <= 1024
    assert result.response_excerpt.startswith("xé")


def test_retry_after_is_passed_on(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(429, headers=(("retry-after", "120"),))])
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert (result.status_code, result.retry_after) == (429, "120")
