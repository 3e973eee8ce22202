"""The consumer portal in a real browser (headless Chromium) against the local stack, as a tenant uses it.

Open the link; see the endpoint, its health and a delivery with its attempts; replay it; start a redrive over a
window and watch its progress bar complete; an expired or forged link is refused; and what events and consumer
responses hold (attacker-controlled) is shown as text, never run.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from hookrelay_client import HookrelayClient
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from hookrelay.adapters import schema
from hookrelay.domain import portal
from hookrelay.domain.clock import epoch_seconds, to_rfc3339, utcnow
from hookrelay.domain.schedule import FAST_SCHEDULE
from local.provision import resource_name
from tests.e2e import browser as chromium
from tests.e2e.harness import REPO, SUMMARY, Consumer, LocalStack, eventually

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
    browser.click("#confirm-ok")  # the redrive asks first, in the page
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
    # The edit form holds them as input values, never markup.
    browser.click("#nav-endpoints")
    browser.button("Edit", browser.wait(f'.endpoint[data-endpoint="{endpoint.id}"]')).click()
    shown = browser.wait('#endpoint-form [data-field="description"] input').get_attribute("value")
    filter_text = browser.wait('#endpoint-form [data-field="filter"] textarea').get_attribute("value")
    assert shown == ATTRIBUTE_BREAKOUT and filter_text and SCRIPT in filter_text
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
    browser.click("#confirm-ok")
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
    browser.click("#confirm-ok")
    secret = browser.wait(f'{card_css} [data-role="new-secret"] .secret').text
    assert secret.startswith("whsec_") and secret != endpoint.secret
    browser.click("#nav-endpoints")
    assert secret not in browser.wait(card_css).text

    # Disable asks first: cancelled, nothing changes; confirmed, the endpoint is disabled. Then enable again.
    browser.button("Disable", browser.wait(card_css)).click()
    assert "Disable this endpoint?" in browser.wait("#confirm").text
    browser.click("#confirm-cancel")
    WebDriverWait(browser.driver, chromium.WAIT_SECONDS).until(lambda d: not d.find_elements(By.ID, "confirm"))
    assert stack.call("GET", f"/v1/endpoints/{endpoint.id}", tenant_key).json()["state"] == "enabled"
    browser.button("Disable", browser.wait(card_css)).click()
    browser.click("#confirm-ok")
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


SHIPMENT = "shipment.sent"
SHIPMENT_SCHEMA = {"type": "object", "properties": {"shipment_id": {"type": "string"}}, "required": ["shipment_id"]}
SHIPMENT_EXAMPLE = {"shipment_id": "SHP-1042"}


def register_shipment_type(stack: LocalStack) -> None:
    body = {"description": "A parcel left the warehouse", "schema": SHIPMENT_SCHEMA, "example": SHIPMENT_EXAMPLE}
    assert stack.call("PUT", f"/v1/event-types/{SHIPMENT}", stack.admin_key, body).status_code in (200, 201)


def test_a_consumer_adds_an_endpoint_in_the_portal_and_receives_a_webhook_on_it(
    stack: LocalStack, consumers: Callable[..., Consumer], browser: chromium.Browser
) -> None:
    register_shipment_type(stack)
    tenant_id, tenant_key = stack.new_tenant("portal-add")
    consumer = consumers("portal-added")
    browser.open(stack.portal_link(tenant_key, capabilities=["manage"]))
    browser.click("#add-endpoint")
    form = browser.wait("#endpoint-form")

    # The catalogue's type, with its schema and example, chosen by a checkbox.
    choice = browser.wait(f'.event-type[data-event-type="{SHIPMENT}"]')
    assert "A parcel left the warehouse" in choice.text
    choice.find_element(By.CSS_SELECTOR, "summary").click()
    assert "SHP-1042" in choice.text and '"required"' in choice.text
    choice.find_element(By.CSS_SELECTOR, 'input[type="checkbox"]').click()
    form.find_element(By.CSS_SELECTOR, '[data-field="url"] input').send_keys(consumer.url)
    form.find_element(By.CSS_SELECTOR, '[data-field="description"] input').send_keys("shipments")

    # What the API refuses is shown by the field it names: a rate limit of 0 (request validation, `field`) and a
    # content filter with an unknown operator (the endpoint's rules, `pointer`).
    form.find_element(By.CSS_SELECTOR, '[data-field="rate_limit_per_second"] input').send_keys("0")
    form.find_element(By.CSS_SELECTOR, '[data-field="filter"] textarea').send_keys('{"data.shipment_id": {"near": 1}}')
    browser.click("#save-endpoint")
    rate_error = browser.wait('[data-field="rate_limit_per_second"] .field-error')
    assert "greater than or equal to 1" in rate_error.text
    assert not stack.call("GET", "/v1/endpoints", tenant_key).json()["data"]  # nothing was created
    form.find_element(By.CSS_SELECTOR, '[data-field="rate_limit_per_second"] input').clear()
    browser.click("#save-endpoint")
    filter_error = browser.wait('[data-field="filter"] .field-error')
    assert filter_error.text.startswith("/filter/data.shipment_id/near: ")  # the pointer into the filter, and why
    assert not [e for e in browser.all('[data-field="rate_limit_per_second"] .field-error') if e.is_displayed()]
    assert form.find_element(By.CSS_SELECTOR, '[data-field="filter"] textarea').get_attribute("aria-invalid") == "true"
    form.find_element(By.CSS_SELECTOR, '[data-field="filter"] textarea').clear()
    browser.click("#save-endpoint")

    # Created: its secret is shown this once.
    created = browser.wait("#created-endpoint")
    endpoint_id = created.get_attribute("data-endpoint")
    secret = browser.wait('#created-endpoint [data-role="new-secret"] .secret').text
    assert endpoint_id and secret.startswith("whsec_")
    stored = stack.call("GET", f"/v1/endpoints/{endpoint_id}", tenant_key).json()
    assert (stored["url"], stored["event_types"], stored["description"]) == (consumer.url, [SHIPMENT], "shipments")
    browser.click("#created-done")
    card = browser.wait(f'.endpoint[data-endpoint="{endpoint_id}"]')
    assert secret not in browser.driver.page_source and secret not in card.text  # never again

    # The consumer verifies with it: a shipment event reaches it, signed.
    consumer.control(secret=secret)
    published = stack.publish(tenant_id, SHIPMENT, {"shipment_id": "SHP-7"})
    eventually(
        lambda: published["event_id"] in {e["webhook_id"] for e in consumer.received()["events"]},
        "the consumer accepts the signed webhook",
    )

    # Edit: the form opens with the endpoint's settings, and saves through PATCH.
    browser.button("Edit", card).click()
    description = browser.wait('#endpoint-form [data-field="description"] input')
    assert description.get_attribute("value") == "shipments"
    description.clear()
    description.send_keys("shipments, EU")
    browser.wait('#endpoint-form [data-field="rate_limit_per_second"] input').send_keys("5")
    browser.click("#save-endpoint")
    browser.wait_text(f'.endpoint[data-endpoint="{endpoint_id}"]', "shipments, EU")
    edited = stack.call("GET", f"/v1/endpoints/{endpoint_id}", tenant_key).json()
    assert (edited["description"], edited["rate_limit_per_second"], edited["url"]) == ("shipments, EU", 5, consumer.url)


def chart_numbers(browser: chromium.Browser, endpoint_id: str) -> dict[str, dict[str, Any]]:
    """What the endpoint's chart drew, by hour: the bars' counts and the latency and wait dots' values."""
    numbers: dict[str, dict[str, Any]] = json.loads(
        browser.driver.execute_script(
            """
            const figure = document.querySelector(`figure.stats[data-endpoint="${arguments[0]}"]`);
            const hours = {};
            for (const g of figure.querySelectorAll("svg.outcomes g.hour")) {
              hours[g.dataset.start] = {delivered: +g.dataset.delivered, failed_attempts: +g.dataset.failedAttempts,
                dead: +g.dataset.dead, latency_ms: {p50: null, p95: null, p99: null},
                wait_ms: {p50: null, p95: null, p99: null}};
            }
            for (const [chart, field] of [["latency", "latency_ms"], ["wait", "wait_ms"]]) {
              for (const dot of figure.querySelectorAll(`svg.${chart} circle.dot`)) {
                hours[dot.dataset.start][field][dot.parentNode.dataset.percentile] = +dot.dataset.value;
              }
            }
            return JSON.stringify(hours);
            """,
            endpoint_id,
        )
    )
    return numbers


def test_the_chart_draws_the_stats_route_s_numbers(
    stack: LocalStack, consumers: Callable[..., Consumer], browser: chromium.Browser
) -> None:
    tenant_id, tenant_key = stack.new_tenant("portal-chart")
    consumer = consumers("portal-chart", mode="fail")
    endpoint = HookrelayClient(stack.api_url, tenant_key).create_endpoint(consumer.url, ["order.*"])
    consumer.control(secret=endpoint.secret)
    published = [stack.publish(tenant_id, "order.created", {"order": n}) for n in range(2)]
    eventually(
        lambda: len(stack.deliveries(tenant_key, f"endpoint_id={endpoint.id}&status=dead")) == 2,
        "both deliveries are dead",
        timeout=SCHEDULE_WAIT,
    )
    consumer.control(mode="ok")
    stack.publish(tenant_id, "order.created", {"order": 3})
    eventually(
        lambda: len(stack.deliveries(tenant_key, f"endpoint_id={endpoint.id}&status=delivered")) == 1,
        "the third is delivered",
    )
    assert published
    browser.open(stack.portal_link(tenant_key))
    browser.wait(f'figure.stats[data-endpoint="{endpoint.id}"] svg.outcomes')
    drawn = chart_numbers(browser, endpoint.id)
    stats = stack.call("GET", f"/v1/endpoints/{endpoint.id}/stats?hours=24", tenant_key).json()
    api = {
        hour["start"]: {k: hour[k] for k in ("delivered", "failed_attempts", "dead", "latency_ms", "wait_ms")}
        for hour in stats["hours"]
    }
    shared = set(drawn) & set(api)  # both read in the same hour, unless an hour turned between them
    assert len(shared) >= len(api) - 1
    assert {h: drawn[h] for h in shared} == {h: api[h] for h in shared}
    totals = {k: sum(api[h][k] for h in shared) for k in ("delivered", "dead")}
    assert totals == {"delivered": 1, "dead": 2}  # the chart has something to show, and it is this
    assert sum(api[h]["failed_attempts"] for h in shared) >= 2
    assert any(api[h]["wait_ms"]["p50"] is not None for h in shared)  # the wait chart has dots to compare too
    SUMMARY.append(f"portal chart: {len(shared)} hours drawn equal the stats route's; totals {totals}")


AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING_IMPACTS = {"serious", "critical"}


def axe_violations(browser: chromium.Browser) -> list[dict[str, Any]]:
    """axe-core's violations on the page as it is drawn (injected through the driver: the page's CSP allows no
    script but its own, and the driver's is not the page's)."""
    browser.driver.execute_script(AXE.read_text())
    browser.driver.set_script_timeout(60)
    result = browser.driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        axe.run(document).then(
          (r) => done(r.violations.map((v) => ({id: v.id, impact: v.impact, nodes: v.nodes.length,
            targets: v.nodes.slice(0, 3).map((n) => n.target.join(" "))}))),
          (e) => done([{id: "axe-error", impact: "critical", nodes: 0, targets: [String(e)]}]),
        );
        """
    )
    violations: list[dict[str, Any]] = result
    return violations


def test_axe_finds_no_serious_or_critical_violations(
    stack: LocalStack, consumers: Callable[..., Consumer], browser: chromium.Browser
) -> None:
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: npm ci (axe-core is a devDependency)")
    register_shipment_type(stack)
    tenant_id, tenant_key = stack.new_tenant("portal-axe")
    consumer = consumers("portal-axe")
    endpoint = HookrelayClient(stack.api_url, tenant_key).create_endpoint(consumer.url, ["*"], description="axe")
    consumer.control(secret=endpoint.secret)
    [delivery_id] = stack.publish(tenant_id, SHIPMENT, SHIPMENT_EXAMPLE)["delivery_ids"]
    eventually(lambda: stack.delivery(tenant_key, delivery_id)["status"] == "delivered", "delivered")

    views: dict[str, Callable[[], object]] = {
        "endpoints": lambda: browser.wait(f'figure.stats[data-endpoint="{endpoint.id}"]'),
        "endpoint form": lambda: (browser.click("#add-endpoint"), browser.wait("#endpoint-form")),
        "deliveries": lambda: (browser.click("#nav-deliveries"), browser.wait(".row.delivery")),
        "delivery": lambda: (browser.click(".row.delivery"), browser.wait("#attempts .attempt")),
        "confirm dialog": lambda: (
            browser.click("#nav-endpoints"),
            browser.button("Disable", browser.wait(f'.endpoint[data-endpoint="{endpoint.id}"]')).click(),
            browser.wait("#confirm"),
        ),
    }
    browser.open(stack.portal_link(tenant_key, capabilities=["recover", "manage"]))
    blocking = []
    for name, ready in views.items():
        ready()
        found = axe_violations(browser)
        by_impact = Counter(v["impact"] for v in found)
        SUMMARY.append(
            f"axe, {name}: {len(found)} violations by impact {dict(by_impact) or '{}'}: {[v['id'] for v in found]}"
        )
        blocking += [(name, v) for v in found if v["impact"] in BLOCKING_IMPACTS]
    browser.click("#confirm-cancel")
    assert not blocking, blocking
    # The check can fail: a page without its language is a serious violation axe reports.
    browser.driver.execute_script("document.documentElement.removeAttribute('lang')")
    assert "html-has-lang" in {v["id"] for v in axe_violations(browser) if v["impact"] in BLOCKING_IMPACTS}


def test_delivery_rows_break_no_word_in_the_middle_at_1280_px(
    stack: LocalStack, consumers: Callable[..., Consumer], browser: chromium.Browser
) -> None:
    """Every word (a run of letters and digits) of a delivery row sits on one line, ids apart (they may break
    anywhere): the "12/1/2026 · 2 a / ttempts" and ".../webh / ook" of the old rows at 1280 px."""
    _, tenant_key = stack.new_tenant("portal-words")
    consumer = consumers("portal-words-webhook-endpoint", mode="fail")  # "· 1 attempt · 500": the longest rows
    endpoint = HookrelayClient(stack.api_url, tenant_key).create_endpoint(consumer.url, ["*"])
    sent = [stack.call("POST", f"/v1/endpoints/{endpoint.id}/test", tenant_key).json() for _ in range(2)]
    for test in sent:
        eventually(lambda t=test: stack.delivery(tenant_key, t["delivery_id"])["attempts"], "an attempt is recorded")
    browser.open(stack.portal_link(tenant_key))
    browser.size(chromium.DESKTOP)
    browser.click("#nav-deliveries")
    browser.wait(".row.delivery")
    assert len(browser.all(".row.delivery")) == 2
    checked, broken = browser.driver.execute_script(
        """
        let checked = 0;
        const broken = [];
        for (const row of document.querySelectorAll(".row.delivery")) {
          const walker = document.createTreeWalker(row, NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (node.parentElement.closest(".id")) continue;
            for (const match of node.textContent.matchAll(/[\\p{L}\\p{N}]+/gu)) {
              const range = document.createRange();
              range.setStart(node, match.index);
              range.setEnd(node, match.index + match[0].length);
              const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
              checked += 1;
              if (lines.size > 1) broken.push(match[0]);
            }
          }
        }
        return [checked, broken];
        """
    )
    SUMMARY.append(
        f"portal words in delivery rows at {chromium.DESKTOP[0]} px: {checked} checked, {len(broken)} broken"
    )
    assert checked > 20 and broken == [], broken
