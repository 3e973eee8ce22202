"""The consumer portal in a real browser (headless Chromium) against the local stack, as a tenant uses it.

Open the link; see the endpoint, its health and a delivery with its attempts; replay it; start a redrive over a
window and watch its progress bar complete; an expired or forged link is refused; and what events and consumer
responses hold (attacker-controlled) is shown as text, never run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from hookrelay_client import HookrelayClient
from selenium.webdriver.support.ui import Select

from hookrelay.adapters import schema
from hookrelay.domain import portal
from hookrelay.domain.clock import epoch_seconds, to_rfc3339, utcnow
from hookrelay.domain.schedule import FAST_SCHEDULE
from local.provision import resource_name
from tests.e2e import browser as chromium
from tests.e2e.harness import Consumer, LocalStack, eventually

pytestmark = pytest.mark.e2e

SCHEDULE_WAIT = FAST_SCHEDULE.horizon + 30  # the whole fast schedule, plus the local pollers
SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE_BREAKOUT = '"><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def browser() -> Iterator[chromium.Browser]:
    reason = chromium.missing()
    if reason:
        print(f"\nskipping the browser tests: {reason}")
        pytest.skip(reason)
    with chromium.chromium() as running:
        yield running


@pytest.fixture(autouse=True)
def desktop(browser: chromium.Browser) -> None:
    browser.size(chromium.DESKTOP)


def test_the_portal_shows_replays_and_redrives(
    stack: LocalStack, consumers: Callable[..., Consumer], browser: chromium.Browser
) -> None:
    tenant_id, tenant_key = stack.new_tenant("portal")
    tenant = HookrelayClient(stack.api_url, tenant_key)
    consumer = consumers("portal-consumer", mode="fail")
    endpoint = tenant.create_endpoint(consumer.url, ["order.*"], description="orders")
    consumer.control(secret=endpoint.secret)
    stack.publish(tenant_id, "order.created", {"order": 1})
    stack.publish(tenant_id, "order.created", {"order": 2})
    eventually(
        lambda: len(stack.deliveries(tenant_key, f"endpoint_id={endpoint.id}&status=dead")) == 2,
        "both deliveries are dead",
        timeout=SCHEDULE_WAIT,
    )
    consumer.control(mode="ok")  # fixed: now replays and redrives succeed
    link = stack.portal_link(tenant_key)
    token = link.split("#token=", 1)[1]

    # Open the link: the token leaves the address bar at once, and the endpoint is shown with its health.
    browser.open(link)
    card = browser.wait(f'.endpoint[data-endpoint="{endpoint.id}"]')
    assert "#token" not in browser.driver.current_url and token not in browser.driver.current_url
    assert endpoint.url in card.text and "failing" in card.text and "Consecutive failures" in card.text
    assert "circuit" in card.text

    # The delivery log, then one delivery with its attempts (status, latency, response excerpt).
    browser.click("#nav-deliveries")
    browser.wait(".row.delivery")
    dead = stack.deliveries(tenant_key, f"endpoint_id={endpoint.id}&status=dead")
    browser.click(f'.row.delivery[data-delivery="{dead[0]["id"]}"]')
    browser.wait_text("#delivery", dead[0]["id"])
    attempts = browser.all("#attempts .attempt")
    assert attempts and "500" in attempts[0].text and " ms" in attempts[0].text
    assert '"ok": false' in browser.wait("#attempts .excerpt").text  # what the failing consumer answered

    # Replay it: a new delivery, which the consumer now accepts.
    browser.click("#replay")
    replayed = browser.wait("#replayed button")
    replay_id = replayed.get_attribute("data-delivery")
    assert replay_id and replay_id != dead[0]["id"]
    eventually(lambda: stack.delivery(tenant_key, replay_id)["status"] == "delivered", "the replay is delivered")
    replayed.click()
    browser.wait_text("#delivery", replay_id)
    browser.wait_text("h2 .badge", "delivered")

    # A redrive over the window (the form's default: the last hour), followed until its bar is full.
    browser.click("#nav-endpoints")
    card = browser.wait(f'.endpoint[data-endpoint="{endpoint.id}"]')
    browser.button("Redrive…", card).click()
    browser.button("Start redrive", card).click()
    browser.wait_text("#redrive-state", "completed", timeout=60)
    bar = browser.wait("#redrive-progress")
    assert bar.get_attribute("value") == bar.get_attribute("max") == "2"
    assert "of 2" in browser.wait("#redrive-text").text

    # The token never reached the server: not in the stack's log of requests.
    assert token not in stack.process.log_path.read_text()


def forget_session(stack: LocalStack, browser: chromium.Browser) -> None:
    """This tab keeps the last good token (sessionStorage, so a reload works): start as a fresh tab would."""
    browser.open(f"{stack.api_url}/portal/favicon.svg")
    browser.driver.execute_script("window.sessionStorage.clear()")


def test_an_expired_link_is_refused(stack: LocalStack, browser: chromium.Browser) -> None:
    """Expired a second ago, still in the table (TTL removes it later). Written straight into the local stack's
    table: the shortest session the API opens lasts a minute, and the test does not wait for it to pass."""
    minted = portal.mint_session()
    now = utcnow()
    sessions = boto3.resource(
        "dynamodb",
        endpoint_url=stack.dynamodb_endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    ).Table(resource_name(schema.PORTAL_SESSIONS.logical_name))
    sessions.put_item(
        Item={
            "id": minted.session_id,
            "tenant_id": stack.tenant_id,
            "secret_hash": minted.secret_hash,
            "created_at": to_rfc3339(now - timedelta(minutes=16)),
            "expires_at": epoch_seconds(now) - 1,
            "opened_by": "key_test",
        }
    )
    forget_session(stack, browser)
    browser.open(portal.portal_link(stack.api_url, minted.token))
    assert "not valid" in browser.wait("#refused").text
    assert not browser.all(".endpoint") and not browser.all("#nav")[0].is_displayed()


@pytest.mark.parametrize(
    "forge",
    [
        lambda token: token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"),  # another secret
        lambda token: "hrp_ps_00000000000000000000000000_" + "x" * 43,  # no such session
        lambda token: "",  # no token at all
    ],
    ids=["wrong-secret", "unknown-session", "no-token"],
)
def test_a_forged_link_is_refused(stack: LocalStack, browser: chromium.Browser, forge: Callable[[str], str]) -> None:
    token = stack.portal_link(stack.tenant_key).split("#token=", 1)[1]
    forget_session(stack, browser)
    browser.open(portal.portal_link(stack.api_url, forge(token)))
    assert "not valid" in browser.wait("#refused").text
    assert not browser.all(".endpoint")


class _HostileConsumer(BaseHTTPRequestHandler):
    """Answers every webhook 400 with a body made to break out of HTML if it were ever parsed as such."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = f"{SCRIPT}{ATTRIBUTE_BREAKOUT}".encode()
        self.send_response(400)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def hostile_consumer() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HostileConsumer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def test_event_data_and_responses_render_as_text(
    stack: LocalStack, browser: chromium.Browser, hostile_consumer: str
) -> None:
    tenant_id, tenant_key = stack.new_tenant("hostile")
    tenant = HookrelayClient(stack.api_url, tenant_key)
    # A content filter holding markup, which this event passes: the card shows the filter as text too.
    endpoint = tenant.create_endpoint(
        hostile_consumer, ["*"], description=ATTRIBUTE_BREAKOUT, filter={"data.note": SCRIPT}
    )
    published = stack.publish(tenant_id, "order.created", {"note": SCRIPT, "name": ATTRIBUTE_BREAKOUT})
    [delivery_id] = published["delivery_ids"]
    eventually(lambda: stack.delivery(tenant_key, delivery_id)["attempts"], "the first attempt is recorded")

    browser.open(stack.portal_link(tenant_key))
    card = browser.wait(f'.endpoint[data-endpoint="{endpoint.id}"]')
    assert ATTRIBUTE_BREAKOUT in card.text  # the description, as text
    assert SCRIPT in card.text  # the content filter, as text
    browser.click("#nav-deliveries")
    browser.click(f'.row.delivery[data-delivery="{delivery_id}"]')
    data = browser.wait("#event-data").text
    excerpt = browser.wait("#attempts .excerpt").text
    for shown in (data, excerpt):
        assert SCRIPT in shown and "<img src=x onerror=alert(1)>" in shown
    assert browser.all("img") == [] and browser.all("main script") == []
    assert not browser.alert_open()
    assert not [line for line in browser.console() if "alert" in line or "Content Security Policy" in line]


def test_test_event_rotation_disable_enable_and_filters(
    stack: LocalStack, consumers: Callable[..., Consumer], browser: chromium.Browser
) -> None:
    _, tenant_key = stack.new_tenant("portal-actions")
    consumer = consumers("portal-actions")
    endpoint = HookrelayClient(stack.api_url, tenant_key).create_endpoint(consumer.url, ["*"])
    consumer.control(secret=endpoint.secret)
    card_css = f'.endpoint[data-endpoint="{endpoint.id}"]'

    # A link with the default capabilities (view, recover) is refused the secret's rotation, and says why.
    browser.open(stack.portal_link(tenant_key))
    browser.button("Rotate secret", browser.wait(card_css)).click()
    assert "capability" in browser.wait(f'{card_css} [data-role="error"]').text
    unchanged = stack.call("GET", f"/v1/endpoints/{endpoint.id}", tenant_key).json()["signing_secrets"]
    assert len(unchanged) == len(endpoint.signing_secrets) == 1

    browser.open("about:blank")  # a page load of its own: nothing of the refused link's page is left to click
    browser.open(stack.portal_link(tenant_key, capabilities=["recover", "manage"]))

    # A test event: its delivery opens from the notice, and reaches the consumer.
    browser.button("Send test event", browser.wait(card_css)).click()
    browser.click(f"{card_css} .result .notice button")
    test_delivery = browser.wait("#delivery").get_attribute("data-delivery")
    assert test_delivery
    eventually(lambda: stack.delivery(tenant_key, test_delivery)["status"] == "delivered", "the test is delivered")

    # Rotating the secret shows the new one once; the endpoint's record never holds it afterwards.
    browser.click("#nav-endpoints")
    browser.button("Rotate secret", browser.wait(card_css)).click()
    secret = browser.wait(f'{card_css} [data-role="new-secret"] .secret').text
    assert secret.startswith("whsec_") and secret != endpoint.secret
    browser.click("#nav-endpoints")
    assert secret not in browser.wait(card_css).text

    # Disable, then enable again.
    browser.button("Disable", browser.wait(card_css)).click()
    browser.wait_text(f"{card_css} .badge", "disabled")
    assert stack.call("GET", f"/v1/endpoints/{endpoint.id}", tenant_key).json()["state"] == "disabled"
    browser.button("Enable", browser.wait(card_css)).click()
    browser.wait_text(f"{card_css} .badge", "enabled")

    # The log's filters: a status with no deliveries shows none; back to any status shows the test delivery.
    browser.click("#nav-deliveries")
    browser.wait(f'.row.delivery[data-delivery="{test_delivery}"]')
    Select(browser.wait('select[name="status"]')).select_by_value("dead")
    browser.click("#apply-filters")
    browser.wait("#no-deliveries")
    Select(browser.wait('select[name="status"]')).select_by_value("")
    browser.click("#apply-filters")
    browser.wait(f'.row.delivery[data-delivery="{test_delivery}"]')
    assert len(browser.all(".row.delivery")) == 1


def test_the_link_make_run_prints_opens_the_demo_tenant_s_portal(stack: LocalStack, browser: chromium.Browser) -> None:
    forget_session(stack, browser)
    browser.open(stack.portal_url)  # the ready document's portal_url: what `make run` prints
    browser.wait_text("main h2", "Endpoints")
    assert browser.all("#nav")[0].is_displayed() and not browser.all("#refused")
