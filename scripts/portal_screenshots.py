"""Screenshots of the consumer portal, each view at a desktop's and a phone's width: docs/portal-<view>-<width>.png.

    make screenshots

Starts the local stack (fast schedule) and two demo consumers, makes a tenant with a healthy endpoint and a
failing one whose deliveries die, fixes it and redrives them, and drives headless Chromium through the portal
as the tenant would: endpoints (each with its 24-hour chart, also shot alone: portal-chart-*), the form that adds
an endpoint (its event types from the catalogue, and the API's problems by their fields), the delivery log, one
dead delivery with its attempts, the confirmation a redrive asks for, the redrive's progress, and a refused link.
Needs Debian's chromium and chromium-driver (`make browser`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tests.e2e import browser as chromium
from tests.e2e.harness import REPO, Consumer, LocalStack, eventually, stack_and_consumers

DOCS = REPO / "docs"
WIDTHS = {"desktop": chromium.DESKTOP, "phone": chromium.PHONE}
DEATH_WAIT = 60.0


def shoot(browser: chromium.Browser, view: str, out: Path, ready: Callable[[], object]) -> list[Path]:
    """The current view at each width, once `ready` has seen it drawn."""
    written = []
    for width_name, size in WIDTHS.items():
        browser.size(size)
        ready()
        path = out / f"portal-{view}-{width_name}.png"
        browser.screenshot(path, size)
        written.append(path)
    browser.size(chromium.DESKTOP)
    return written


def shoot_element(browser: chromium.Browser, view: str, out: Path, css: str) -> list[Path]:
    """One element (a chart) at each width, cropped to it."""
    written = []
    for width_name, size in WIDTHS.items():
        browser.size(size)
        path = out / f"portal-{view}-{width_name}.png"
        element = browser.wait(css)
        browser.driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
        element.screenshot(str(path))
        written.append(path)
    browser.size(chromium.DESKTOP)
    return written


# The catalogue the form offers: each type with its schema and example.
CATALOGUE = {
    "order.created": (
        "A customer placed an order",
        {"type": "object", "properties": {"order_id": {"type": "integer"}, "total": {"type": "string"}}},
        {"order_id": 1000, "total": "49.90", "currency": "EUR"},
    ),
    "invoice.paid": (
        "An invoice was paid in full",
        {"type": "object", "properties": {"invoice_id": {"type": "string"}, "amount": {"type": "number"}}},
        {"invoice_id": "INV-200", "amount": 120},
    ),
}


def scene(stack: LocalStack, consumer: Callable[..., Consumer]) -> tuple[str, str, str]:
    """A tenant with a healthy endpoint and a failing one: its link, the failing endpoint and a dead delivery."""
    for name, (description, schema, example) in CATALOGUE.items():
        body = {"description": description, "schema": schema, "example": example}
        stack.call("PUT", f"/v1/event-types/{name}", stack.admin_key, body).raise_for_status()
    tenant_id, key = stack.new_tenant("Acme")
    orders, billing = consumer("orders"), consumer("billing", mode="fail")
    for name, demo, types in ((orders, orders, ["order.*"]), (billing, billing, ["invoice.*"])):
        created = stack.created(
            "/v1/endpoints", key, {"url": name.url, "event_types": types, "description": f"{name.name} service"}
        )
        demo.control(secret=created["secret"])
        if demo is billing:
            billing_id = created["id"]
    for n in range(4):
        stack.publish(tenant_id, "order.created", {"order_id": 1000 + n, "total": "49.90", "currency": "EUR"})
    for n in range(3):
        stack.publish(tenant_id, "invoice.paid", {"invoice_id": f"INV-{200 + n}", "amount": 120 + n})
    dead = eventually(
        lambda: stack.deliveries(key, f"endpoint_id={billing_id}&status=dead"),
        "the billing deliveries die",
        timeout=DEATH_WAIT,
        predicate=lambda found: len(found) == 3,
    )
    billing.control(mode="ok")  # the fix is deployed: the redrive below succeeds
    link = stack.portal_link(key, ttl_seconds=600, capabilities=["recover", "manage"])
    return link, billing_id, dead[-1]["id"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DOCS, help="where the PNGs go (default docs/)")
    args = parser.parse_args(argv)
    reason = chromium.missing()
    if reason:
        print(f"no screenshots: {reason}", file=sys.stderr)
        return 1
    written: list[Path] = []
    with stack_and_consumers("hookrelay-screenshots-") as (stack, consumer), chromium.chromium() as browser:
        link, billing_id, dead_id = scene(stack, consumer)
        browser.open(link)
        card = f'.endpoint[data-endpoint="{billing_id}"]'
        charts = lambda: eventually(lambda: len(browser.all("figure.stats")), "both charts", predicate=lambda n: n == 2)  # noqa: E731
        written += shoot(browser, "endpoints", args.out, lambda: (browser.wait(card), charts()))
        written += shoot_element(browser, "chart", args.out, f'figure.stats[data-endpoint="{billing_id}"]')

        browser.click("#add-endpoint")
        form = browser.wait("#endpoint-form")
        browser.wait('.event-type[data-event-type="order.created"] summary').click()
        browser.wait('.event-type[data-event-type="order.created"] input').click()
        browser.wait('[data-field="url"] input').send_keys("https://shop.example.com/hooks/orders")
        browser.wait('[data-field="description"] input').send_keys("orders, EU shop")
        browser.wait('[data-field="rate_limit_per_second"] input').send_keys("0")
        browser.wait('[data-field="filter"] textarea').send_keys('{"data.total": {"above": 100}}')
        browser.click("#add-header")
        browser.wait(".header-row input").send_keys("X-Shop")
        browser.click("#save-endpoint")
        browser.wait('[data-field="rate_limit_per_second"] .field-error')
        assert form.is_displayed()
        top = "window.scrollTo(0, 0)"  # the first field in error has the focus, below the fold
        ready = lambda: (browser.wait("#endpoint-form .notice.error"), browser.driver.execute_script(top))  # noqa: E731
        written += shoot(browser, "endpoint-form", args.out, ready)
        browser.click("#nav-endpoints")

        browser.click("#nav-deliveries")
        written += shoot(browser, "deliveries", args.out, lambda: browser.wait(".row.delivery"))

        browser.click(f'.row.delivery[data-delivery="{dead_id}"]')
        written += shoot(browser, "delivery", args.out, lambda: browser.wait("#attempts .attempt"))

        browser.click("#nav-endpoints")
        browser.button("Redrive…", browser.wait(card)).click()
        written += shoot(browser, "redrive-form", args.out, lambda: browser.wait(".redrive-form"))
        browser.button("Start redrive", browser.wait(card)).click()
        written += shoot(browser, "confirm", args.out, lambda: browser.wait("#confirm"))
        browser.click("#confirm-ok")
        written += shoot(browser, "redrive", args.out, lambda: browser.wait_text("#redrive-state", "completed", 60))

        browser.open(f"{stack.api_url}/portal/favicon.svg")
        browser.driver.execute_script("window.sessionStorage.clear()")
        browser.open(f"{stack.api_url}/portal#token=hrp_forged")
        written += shoot(browser, "refused", args.out, lambda: browser.wait("#refused"))
    for path in written:
        print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
