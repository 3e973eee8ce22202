// hookrelay consumer portal: plain JavaScript, no build step, no dependencies.
//
// The portal link carries its session token in the URL fragment (#token=…), which browsers never send to a
// server nor put in a Referer. It is read once, kept in memory (and in this tab's sessionStorage, so a reload
// keeps working), and removed from the address bar. Every call goes to the API with it as a bearer token.
//
// Everything shown that comes from the API (event data, consumer responses, URLs, descriptions) is
// attacker-controlled: the DOM is built with createElement and textContent only, never innerHTML.
"use strict";

(() => {
  const STORAGE_KEY = "hookrelay.portal.token";
  const STATUSES = ["queued", "attempting", "delivered", "retrying", "dead", "cancelled"];
  const PAGE_SIZE = 20;
  // An endpoint's url is a webhook's, or an AWS destination's ARN (the API's `kind`).
  const DESTINATION_KINDS = {
    sqs: "Amazon SQS queue",
    sns: "Amazon SNS topic",
    eventbridge: "Amazon EventBridge bus",
    poll: "Pull delivery (your code reads its messages)",
  };
  const POLL_MS = 1000;
  const CHART_HOURS = 24;
  const main = document.getElementById("main");
  const nav = document.getElementById("nav");
  let token = null;
  let generation = 0; // bumped on every view change: a stale poll or load stops drawing
  let endpointsCache = null;

  class Refused extends Error {}

  class Problem extends Error {
    constructor(status, body) {
      super((body && (body.detail || body.title || body.message)) || `HTTP ${status}`);
      this.status = status;
      this.body = body;
    }
  }

  function takeToken() {
    const fragment = new URLSearchParams(location.hash.slice(1));
    const fromLink = fragment.get("token");
    if (fromLink) {
      sessionStorage.setItem(STORAGE_KEY, fromLink);
      history.replaceState(null, "", location.pathname + location.search);
      return fromLink;
    }
    return sessionStorage.getItem(STORAGE_KEY);
  }

  // el("div", {class: "x", onclick: f}, "text", child): text children become text nodes, never markup.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else if (name.startsWith("data-") || name.startsWith("aria-") || name === "role" || name === "for")
        node.setAttribute(name, String(value));
      else if (
        ["id", "type", "value", "placeholder", "disabled", "hidden", "max", "min", "title", "name", "checked", "rows",
          "autocomplete", "spellcheck", "open"].includes(name)
      )
        node[name] = value;
      else throw new Error(`unsupported property ${name}`);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function show(...nodes) {
    main.replaceChildren(...nodes);
  }

  // svg("rect", {x: 1, class: "bar"}, child…): SVG elements, attributes set one by one (numbers and our own names;
  // text only through text nodes). Presentation comes from app.css classes: the CSP allows no inline style.
  const SVG_NS = "http://www.w3.org/2000/svg";
  function svg(tag, attributes, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== undefined && value !== null) node.setAttribute(name, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // A confirmation in the page (a modal <dialog>), for what cannot be undone from here or cuts a consumer off:
  // resolves true on the confirm button, false on Cancel or Escape.
  function confirmAction(title, text, confirmLabel) {
    return new Promise((resolve) => {
      const ok = el("button", { type: "button", class: "danger primary-danger", id: "confirm-ok" }, confirmLabel);
      const cancel = el("button", { type: "button", id: "confirm-cancel" }, "Cancel");
      const dialog = el(
        "dialog",
        { id: "confirm", class: "confirm", "aria-labelledby": "confirm-title", "aria-describedby": "confirm-text" },
        el("h2", { id: "confirm-title" }, title),
        el("p", { id: "confirm-text" }, text),
        el("div", { class: "actions" }, cancel, ok),
      );
      let answer = false;
      ok.addEventListener("click", () => {
        answer = true;
        dialog.close();
      });
      cancel.addEventListener("click", () => dialog.close());
      dialog.addEventListener("close", () => {
        dialog.remove();
        resolve(answer);
      });
      document.body.append(dialog);
      dialog.showModal();
      cancel.focus(); // the safe choice has the focus: Enter does not confirm by accident
    });
  }

  async function api(method, path, body) {
    const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
      referrerPolicy: "no-referrer",
    });
    const type = response.headers.get("content-type") || "";
    const payload = response.status === 204 ? null : await response.json().catch(() => null);
    // API Gateway's own refusal (no problem details): the token is expired, revoked or forged; or a 401 from the
    // functions, which check the link's expiry themselves while API Gateway still has the authorizer's answer.
    // A 403 with problem details is a route this link's capabilities do not reach: shown as a notice.
    const unauthorized = response.status === 401 || (response.status === 403 && !type.includes("problem+json"));
    if (unauthorized) throw new Refused();
    if (!response.ok) throw new Problem(response.status, payload);
    return payload;
  }

  function refused() {
    sessionStorage.removeItem(STORAGE_KEY);
    token = null;
    nav.hidden = true;
    show(
      el(
        "div",
        { id: "refused", class: "notice error" },
        el("h2", {}, "This portal link is not valid"),
        el("p", {}, "It has expired or is not a link we issued. Ask for a new portal link."),
      ),
    );
  }

  function failure(error) {
    if (error instanceof Refused) return refused();
    return el("div", { class: "notice error", "data-role": "error" }, error.message || String(error));
  }

  // Runs a view's loader; draws what it returns unless another view was opened meanwhile.
  async function view(name, load) {
    const mine = ++generation;
    for (const tab of nav.querySelectorAll(".tab")) tab.classList.toggle("active", tab.id === `nav-${name}`);
    show(el("p", { class: "muted" }, "Loading…"));
    try {
      const nodes = await load(() => mine === generation);
      if (mine === generation) show(...nodes);
    } catch (error) {
      if (mine === generation) {
        const shown = failure(error);
        if (shown) show(shown);
      }
    }
  }

  function when(text) {
    if (!text) return "—";
    const moment = new Date(text);
    return Number.isNaN(moment.getTime()) ? String(text) : moment.toLocaleString();
  }

  // A URL as text with a break opportunity (<wbr>) after each / . ? & = : a long one wraps between its parts, not
  // inside a word.
  function urlText(url) {
    return String(url).split(/(?<=[/.?&=])/).flatMap((part, i) => (i ? [el("wbr"), part] : [part]));
  }

  function badge(text, tone) {
    return el("span", { class: `badge ${tone}` }, text);
  }

  const STATUS_TONES = { delivered: "good", dead: "bad", retrying: "warn", cancelled: "neutral" };

  function facts(pairs) {
    return el("dl", { class: "facts" }, pairs.filter(Boolean).flatMap(([term, value]) => [el("dt", {}, term), el("dd", {}, value)]));
  }

  function json(value) {
    return JSON.stringify(value, null, 2);
  }

  // --- Endpoints ---

  async function endpoints() {
    // Every page: the list is paged (limit, next_cursor), at most max_endpoints_per_tenant in all.
    const list = [];
    let cursor = null;
    do {
      const query = cursor ? `?limit=250&cursor=${encodeURIComponent(cursor)}` : "?limit=250";
      const page = await api("GET", `/v1/endpoints${query}`);
      list.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor);
    endpointsCache = list;
    return list;
  }

  function endpointsView() {
    return view("endpoints", async (current) => {
      const list = await endpoints();
      const healths = await Promise.all(list.map((e) => api("GET", `/v1/endpoints/${encodeURIComponent(e.id)}/health`)));
      const slots = list.map((e) => el("div", { class: "chart-slot", "data-endpoint": e.id }, el("p", { class: "muted" }, "Loading the last 24 hours…")));
      const cards = list.map((endpoint, i) => endpointCard(endpoint, healths[i], slots[i]));
      fillCharts(list, slots, current);
      return [
        el("div", { class: "heading" }, el("h2", {}, "Endpoints"),
          el("button", { type: "button", class: "primary", id: "add-endpoint", onclick: () => endpointFormView(null) }, "Add endpoint")),
        cards.length ? el("div", { class: "grid" }, cards) : el("p", { class: "muted" }, "No endpoints yet."),
      ];
    });
  }

  // Custom headers and auth, read-only: the API never returns a secret header's value nor a credential.
  function headersText(headers) {
    return headers.map((h) => (h.secret ? `${h.name}: (secret)` : `${h.name}: ${h.value}`)).join(", ");
  }

  // The platform counts some things only up to a limit (parked deliveries, a redrive's window before its last page):
  // past it a count is a floor, shown "1000+", as the CLI shows it.
  function countText(count, exact) {
    return `${count}${exact ? "" : "+"}`;
  }

  function authText(auth) {
    const shown = ["username", "client_id", "token_url", "scope", "audience"].filter((name) => auth[name]);
    return [auth.kind, ...shown.map((name) => `${name} ${auth[name]}`), `set ${when(auth.set_at)}`].join(", ");
  }

  // The charts, one endpoint after the other once the cards are drawn: each is a bounded but real read of the
  // delivery log, and every request of the link counts against its opener's key's rate.
  async function fillCharts(list, slots, current) {
    for (const [i, endpoint] of list.entries()) {
      if (!current()) return;
      try {
        const stats = await api("GET", `/v1/endpoints/${encodeURIComponent(endpoint.id)}/stats?hours=${CHART_HOURS}`);
        if (current()) slots[i].replaceChildren(chartOf(stats));
      } catch (error) {
        const shown = failure(error);
        if (shown && current()) slots[i].replaceChildren(shown);
      }
    }
  }

  function endpointCard(endpoint, health, chartSlot) {
    const path = `/v1/endpoints/${encodeURIComponent(endpoint.id)}`;
    const circuit = health.circuit;
    const failing = health.failing_since;
    const result = el("div", { class: "result" });
    const card = el(
      "section",
      { class: "card endpoint", "data-endpoint": endpoint.id },
      el("h3", { class: "endpoint-url url" }, endpoint.url ? urlText(endpoint.url) : `Pull delivery: GET ${endpoint.messages_url}`),
      endpoint.description ? el("p", { class: "muted" }, endpoint.description) : null,
      el(
        "div",
        { class: "actions" },
        badge(endpoint.state, endpoint.state === "enabled" ? "good" : "neutral"),
        badge(`circuit ${circuit.state}`, circuit.state === "closed" ? "good" : "bad"),
        badge(failing ? "failing" : "healthy", failing ? "bad" : "good"),
      ),
      facts([
        ["Id", el("span", { class: "id" }, endpoint.id)],
        endpoint.kind && endpoint.kind !== "http" && ["Destination", DESTINATION_KINDS[endpoint.kind] || endpoint.kind],
        endpoint.role_arn && ["Role", endpoint.role_arn],
        endpoint.external_id && ["External ID", endpoint.external_id],
        ["Event types", endpoint.event_types.join(", ")],
        // The content filter, read-only, as the API shows it (compact JSON; text, never markup).
        ["Content filter", endpoint.filter ? JSON.stringify(endpoint.filter) : "none: every event of these types"],
        [
          "Success rate",
          health.success_rate === null ? "no attempts yet" : `${Math.round(health.success_rate * 100)}% of the last ${health.sample.size}`,
        ],
        ["Failing since", failing ? when(failing) : "not failing"],
        ["Consecutive failures", String(health.consecutive_failures)],
        ["Last delivered", when(health.last_delivered_at)],
        health.last_failure && [
          "Last failure",
          `${when(health.last_failure.at)}: ${health.last_failure.status_code ?? ""} ${health.last_failure.error ?? ""}`,
        ],
        ["Circuit", `${circuit.state}, ${countText(circuit.parked, circuit.parked_exact)} parked${circuit.next_probe_at ? `, next probe ${when(circuit.next_probe_at)}` : ""}`],
        ["Max in flight", String(endpoint.max_in_flight)],
        [
          "Rate limit",
          endpoint.rate_limit_per_second ? `${endpoint.rate_limit_per_second} deliveries a second` : "none",
        ],
        [
          "Backlog",
          `${countText(health.backlog.parked, health.backlog.parked_exact)} parked` +
            (health.backlog.paced_seconds ? `, ${health.backlog.paced_seconds} s of sends waiting for their slots` : ""),
        ],
        endpoint.disabled_reason && ["Disabled because", endpoint.disabled_reason],
        endpoint.headers && endpoint.headers.length ? ["Custom headers", headersText(endpoint.headers)] : null,
        endpoint.auth ? ["Authentication", authText(endpoint.auth)] : null,
      ]),
    );
    const act = (label, run, cls) =>
      el("button", {
        type: "button",
        class: cls,
        "data-action": label,
        onclick: async (event) => {
          event.target.disabled = true;
          try {
            await run();
          } catch (error) {
            const shown = failure(error);
            if (shown) result.replaceChildren(shown);
          } finally {
            event.target.disabled = false;
          }
        },
      }, label);
    const redriveForm = redriveFormFor(endpoint);
    card.append(
      el(
        "div",
        { class: "actions" },
        act("Send test event", async () => {
          const sent = await api("POST", `${path}/test`);
          result.replaceChildren(
            el("div", { class: "notice" }, "Test event sent. ", el("button", { type: "button", onclick: () => deliveryView(sent.delivery_id) }, "Open its delivery")),
          );
        }),
        act("Deliveries", async () => deliveriesView({ endpoint_id: endpoint.id })),
        act("Redrive…", async () => {
          redriveForm.hidden = !redriveForm.hidden;
        }),
        act("Edit", async () => endpointFormView(endpoint)),
        act("Rotate secret", async () => {
          const sure = await confirmAction(
            "Rotate the signing secret?",
            "A new secret signs from now on; the previous one keeps signing for a while, then stops. Your consumer must verify with the new one before then.",
            "Rotate secret",
          );
          if (!sure) return;
          const rotated = await api("POST", `${path}/rotate-secret`);
          result.replaceChildren(
            el(
              "div",
              { class: "notice", "data-role": "new-secret" },
              el("p", {}, "The new signing secret, shown once: copy it now. The previous one keeps signing until ", when(rotated.previous_secrets_expire_at), "."),
              el("p", { class: "secret" }, rotated.secret),
            ),
          );
        }),
        endpoint.state === "enabled"
          ? act("Disable", async () => {
              const sure = await confirmAction(
                "Disable this endpoint?",
                `Nothing is sent to ${endpoint.url ?? "it"} while it is disabled: new deliveries for it are cancelled, not kept.`,
                "Disable endpoint",
              );
              if (!sure) return;
              await api("POST", `${path}/disable`);
              endpointsView();
            }, "danger")
          : act("Enable", async () => {
              await api("POST", `${path}/enable`);
              endpointsView();
            }),
      ),
      redriveForm,
      result,
      chartSlot,
    );
    return card;
  }

  function redriveFormFor(endpoint) {
    const since = el("input", { type: "text", name: "since", value: new Date(Date.now() - 3600e3).toISOString() });
    const until = el("input", { type: "text", name: "until", placeholder: "now" });
    const status = el("select", { name: "status" }, el("option", { value: "dead" }, "dead"), el("option", { value: "cancelled" }, "cancelled"));
    const message = el("div", {});
    const form = el(
      "div",
      { class: "form redrive-form", hidden: true },
      el("label", {}, "Since (RFC 3339)", since),
      el("label", {}, "Until (empty: now)", until),
      el("label", {}, "Deliveries that are", status),
      el("button", {
        type: "button",
        class: "primary",
        "data-action": "Start redrive",
        onclick: async () => {
          const body = { since: since.value.trim(), status: status.value };
          if (until.value.trim()) body.until = until.value.trim();
          const sure = await confirmAction(
            "Start this redrive?",
            `Every ${body.status} delivery of ${endpoint.url ?? endpoint.id} created in the window is sent again, as a new delivery.`,
            "Start redrive",
          );
          if (!sure) return;
          try {
            const started = await api("POST", `/v1/endpoints/${encodeURIComponent(endpoint.id)}/redrive`, body);
            redriveView(started.redrive_id);
          } catch (error) {
            const shown = failure(error);
            if (shown) message.replaceChildren(shown);
          }
        },
      }, "Start redrive"),
      message,
    );
    return form;
  }

  // --- The 24-hour chart (GET /v1/endpoints/{id}/stats), inline SVG: no library, no network ---

  const OUTCOMES = [
    ["delivered", "delivered"],
    ["failed_attempts", "failed attempts"],
    ["dead", "dead"],
  ];
  const PERCENTILE_NAMES = ["p50", "p95", "p99"];
  const CHART = { width: 480, height: 150, left: 40, right: 8, top: 10, bottom: 22 };

  function hourLabel(text) {
    const moment = new Date(text);
    return `${String(moment.getHours()).padStart(2, "0")}:00`;
  }

  // The frame both charts share: the y axis (0 and the top value, with its unit) and every sixth hour's label.
  function axes(hours, top, unit) {
    const { width, height, left, right, top: pad, bottom } = CHART;
    const plotBottom = height - bottom;
    const step = (width - left - right) / hours.length;
    const labels = hours
      .map((hour, i) => (i % 6 === 0 ? svg("text", { x: left + i * step, y: height - 6, class: "tick" }, hourLabel(hour.start)) : null));
    return [
      svg("line", { x1: left, x2: width - right, y1: plotBottom, y2: plotBottom, class: "axis" }),
      svg("text", { x: left - 4, y: pad + 8, class: "tick end" }, `${top}${unit}`),
      svg("text", { x: left - 4, y: plotBottom, class: "tick end" }, `0${unit}`),
      labels,
    ];
  }

  function outcomeChart(hours) {
    const { width, height, left, right, top: pad, bottom } = CHART;
    const plot = height - pad - bottom;
    const top = Math.max(1, ...hours.map((h) => h.delivered + h.failed_attempts + h.dead));
    const step = (width - left - right) / hours.length;
    const bars = hours.map((hour, i) => {
      let y = height - bottom;
      const rects = OUTCOMES.map(([name, label]) => {
        const tall = (hour[name] / top) * plot;
        y -= tall;
        return hour[name]
          ? svg("rect", { x: left + i * step + 1, y, width: Math.max(step - 2, 1), height: tall, class: `bar ${name}` },
              svg("title", {}, `${hourLabel(hour.start)}: ${hour[name]} ${label}`))
          : null;
      });
      return svg(
        "g",
        { class: "hour", "data-start": hour.start, "data-delivered": hour.delivered, "data-failed-attempts": hour.failed_attempts, "data-dead": hour.dead },
        rects,
      );
    });
    const totals = OUTCOMES.map(([name, label]) => `${hours.reduce((sum, h) => sum + h[name], 0)} ${label}`).join(", ");
    return svg(
      "svg",
      { viewBox: `0 0 ${width} ${height}`, class: "chart outcomes", role: "img", "aria-label": `Deliveries per hour, last ${hours.length} hours: ${totals}` },
      axes(hours, top, ""),
      bars,
    );
  }

  // Per-hour percentiles of one of the stats' figures (`field`: latency_ms, wait_ms), a line each; an hour without
  // values breaks the lines.
  function percentileChart(hours, field, kind, label) {
    const { width, height, left, right, top: pad, bottom } = CHART;
    const plot = height - pad - bottom;
    const top = Math.max(1, ...hours.flatMap((h) => PERCENTILE_NAMES.map((p) => h[field][p] ?? 0)));
    const step = (width - left - right) / hours.length;
    const x = (i) => left + i * step + step / 2;
    const y = (value) => height - bottom - (value / top) * plot;
    const lines = PERCENTILE_NAMES.map((p) => {
      // A line through the hours that had values; an hour without any breaks it (M starts a new piece).
      let path = "";
      let drawing = false;
      hours.forEach((hour, i) => {
        const value = hour[field][p];
        if (value === null || value === undefined) {
          drawing = false;
          return;
        }
        path += `${drawing ? "L" : "M"}${x(i).toFixed(1)} ${y(value).toFixed(1)} `;
        drawing = true;
      });
      const dots = hours.map((hour, i) =>
        hour[field][p] === null || hour[field][p] === undefined
          ? null
          : svg("circle", { cx: x(i), cy: y(hour[field][p]), r: 2, class: `dot ${p}`, "data-start": hour.start, "data-value": hour[field][p] },
              svg("title", {}, `${hourLabel(hour.start)}: ${p} ${hour[field][p]} ms`)),
      );
      return svg("g", { class: `series ${p}`, "data-percentile": p }, path ? svg("path", { d: path.trim(), class: `line ${p}` }) : null, dots);
    });
    const highest = Math.max(0, ...hours.map((h) => h[field].p99 ?? 0));
    return svg(
      "svg",
      { viewBox: `0 0 ${width} ${height}`, class: `chart ${kind}`, role: "img", "aria-label": `${label} per hour, p50, p95 and p99; the highest hour's p99 ${highest} ms` },
      axes(hours, top, " ms"),
      lines,
    );
  }

  function legend(entries) {
    return el("ul", { class: "legend" }, entries.map(([name, label]) => el("li", {}, el("span", { class: `swatch ${name}`, "aria-hidden": "true" }), label)));
  }

  function chartOf(stats) {
    const partial = stats.partial
      ? el("p", { class: "notice", "data-role": "partial" }, `Partial: only the newest ${stats.max_deliveries_read} deliveries of the window are counted.`)
      : null;
    return el(
      "figure",
      { class: "stats", "data-endpoint": stats.endpoint_id, "data-deliveries-read": stats.deliveries_read },
      el("figcaption", {}, `Last ${stats.hours.length} hours`, el("span", { class: "muted" }, ` · ${stats.deliveries_read} deliveries`)),
      partial,
      outcomeChart(stats.hours),
      legend(OUTCOMES),
      percentileChart(stats.hours, "latency_ms", "latency", "Attempt latency"),
      legend(PERCENTILE_NAMES.map((p) => [p, `${p} latency`])),
      // What the deliveries waited on our side before their first attempt: an endpoint sent more than it takes.
      percentileChart(stats.hours, "wait_ms", "wait", "Wait before the first attempt"),
      legend(PERCENTILE_NAMES.map((p) => [p, `${p} wait before the first attempt`])),
    );
  }

  // --- Adding and editing an endpoint: the API's own routes and validation, its problems shown by each field ---

  async function catalogue() {
    const types = [];
    let cursor = null;
    do {
      const page = await api("GET", `/v1/event-types${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ""}`);
      types.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor);
    return types;
  }

  let fieldCount = 0;

  // A labelled input with its hint and its error line (filled from the API's problem), tied by aria-describedby.
  function field(name, label, input, hint) {
    const id = `f-${name}-${++fieldCount}`;
    input.id = id;
    const error = el("p", { class: "field-error", id: `${id}-error`, hidden: true });
    const hintNode = hint ? el("p", { class: "hint", id: `${id}-hint` }, hint) : null;
    input.setAttribute("aria-describedby", [hintNode ? `${id}-hint` : null, `${id}-error`].filter(Boolean).join(" "));
    return el("div", { class: "field", "data-field": name }, el("label", { for: id }, label), input, hintNode, error);
  }

  function headerRow(header) {
    const name = el("input", { type: "text", value: header?.name ?? "", "aria-label": "Header name", autocomplete: "off" });
    const value = el("input", {
      type: "text",
      value: header && !header.secret ? header.value ?? "" : "",
      placeholder: header?.secret ? "(unchanged)" : "value",
      "aria-label": "Header value",
      autocomplete: "off",
      spellcheck: false,
    });
    const secret = el("input", { type: "checkbox", checked: Boolean(header?.secret) });
    const row = el("div", { class: "header-row" }, name, value, el("label", { class: "check" }, secret, "secret"));
    row.append(el("button", { type: "button", class: "danger", onclick: () => row.remove() }, "Remove"));
    row.read = () => {
      const given = { name: name.value.trim(), secret: secret.checked };
      // A secret header left blank on an edit keeps its stored value: the API never shows it, so it is not sent.
      if (!(header?.secret && secret.checked && value.value === "")) given.value = value.value;
      return given;
    };
    return row;
  }

  function eventTypeChoice(type, chosen) {
    const box = el("input", { type: "checkbox", name: "event_type", value: type.name, checked: chosen });
    const details = el(
      "details",
      { class: "schema" },
      el("summary", {}, "Schema and example"),
      el("p", { class: "muted" }, "Schema"),
      el("pre", {}, type.schema ? json(type.schema) : "none registered"),
      el("p", { class: "muted" }, "Example"),
      el("pre", {}, type.example !== null && type.example !== undefined ? json(type.example) : "none registered"),
    );
    return el(
      "div",
      { class: "event-type", "data-event-type": type.name },
      el("label", { class: "check" }, box, el("strong", {}, type.name), type.deprecated ? badge("deprecated", "warn") : null),
      type.description ? el("p", { class: "muted" }, type.description) : null,
      details,
    );
  }

  function wholeNumber(text) {
    const trimmed = text.trim();
    return /^-?\d+$/.test(trimmed) ? Number(trimmed) : trimmed; // anything else goes as typed: the API says why
  }

  function endpointFormView(existing) {
    return view("endpoints", async () => {
      const types = await catalogue();
      const known = new Set(types.map((t) => t.name));
      const current = existing?.event_types ?? [];
      const poll = existing?.kind === "poll";
      const kind = el("select", { name: "kind" }, el("option", { value: "" }, "Webhook URL or AWS destination (ARN)"), el("option", { value: "poll" }, "Pull delivery: your code reads its messages"));
      const url = el("input", { type: "text", name: "url", value: existing?.url ?? "", placeholder: "https://example.com/webhooks", autocomplete: "off", spellcheck: false });
      kind.addEventListener("change", () => {
        url.disabled = kind.value === "poll";
      });
      const description = el("input", { type: "text", name: "description", value: existing?.description ?? "" });
      const choices = types.map((t) => eventTypeChoice(t, current.includes(t.name)));
      const patterns = el("input", { type: "text", name: "patterns", value: current.filter((t) => !known.has(t)).join(", "), placeholder: "order.*, *", spellcheck: false });
      const rate = el("input", { type: "text", name: "rate_limit_per_second", value: existing?.rate_limit_per_second ?? "", placeholder: "none", autocomplete: "off" });
      const inFlight = el("input", { type: "text", name: "max_in_flight", value: existing?.max_in_flight ?? "", placeholder: "default", autocomplete: "off" });
      const filter = el("textarea", { name: "filter", rows: 4, spellcheck: false, placeholder: '{"data.total": {"gte": 100}}' });
      filter.value = existing?.filter ? json(existing.filter) : "";
      const roleArn = el("input", { type: "text", name: "role_arn", value: existing?.role_arn ?? "", placeholder: "arn:aws:iam::123456789012:role/…", spellcheck: false });
      const headerRows = el("div", { class: "header-rows" }, (existing?.headers ?? []).map(headerRow));
      const general = el("div", { role: "alert" });
      const form = el(
        "section",
        { class: "card endpoint-form", id: "endpoint-form" },
        existing ? facts([["Id", el("span", { class: "id" }, existing.id)]]) : null,
        existing ? null : field("kind", "Kind", kind),
        poll ? facts([["Delivery", `Pull delivery: GET ${existing.messages_url}`]]) : field("url", "URL", url, "Where webhooks are sent: an https URL, or an SQS queue, SNS topic or EventBridge bus ARN."),
        field("description", "Description", description),
        el(
          "fieldset",
          { class: "field event-types", "data-field": "event_types" },
          el("legend", {}, "Event types"),
          choices.length ? choices : el("p", { class: "muted" }, "The catalogue has no event types yet."),
          field("patterns", "Other event types or patterns (comma-separated)", patterns, "Wildcards: order.* for every order event, * for everything."),
          el("p", { class: "field-error", hidden: true }),
        ),
        el(
          "div",
          { class: "columns" },
          field("rate_limit_per_second", "Rate limit (deliveries a second)", rate, "Empty: no limit."),
          field("max_in_flight", "Max in flight", inFlight, "Deliveries sent at once."),
        ),
        field("filter", "Content filter (JSON)", filter, "Only events whose data matches are delivered. Empty: every event of the chosen types."),
        el(
          "fieldset",
          { class: "field headers", "data-field": "headers" },
          el("legend", {}, "Custom headers"),
          headerRows,
          el("button", { type: "button", id: "add-header", onclick: () => headerRows.append(headerRow(null)) }, "Add header"),
          el("p", { class: "field-error", hidden: true }),
        ),
        field("role_arn", "Role ARN (AWS destinations)", roleArn, "The role hookrelay assumes to send to your queue, topic or bus."),
        existing ? facts([["Authentication", existing.auth ? authText(existing.auth) : "none (set it with the API or the CLI)"]]) : null,
        general,
      );
      const save = el("button", { type: "button", class: "primary", id: "save-endpoint" }, existing ? "Save changes" : "Create endpoint");
      save.addEventListener("click", async () => {
        for (const node of form.querySelectorAll(".field-error")) {
          node.hidden = true;
          node.textContent = "";
        }
        for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
        general.replaceChildren();
        let body;
        try {
          body = bodyOf();
        } catch (error) {
          return showErrors(form, general, [{ field: "filter", message: error.message }], "The content filter is not valid JSON.");
        }
        save.disabled = true;
        try {
          if (existing) {
            await api("PATCH", `/v1/endpoints/${encodeURIComponent(existing.id)}`, body);
            endpointsView();
          } else {
            created(await api("POST", "/v1/endpoints", body));
          }
        } catch (error) {
          if (error instanceof Refused) return refused();
          showErrors(form, general, (error.body && error.body.errors) || [], error.message);
        } finally {
          save.disabled = false;
        }
      });

      function bodyOf() {
        const chosen = choices.filter((c) => c.querySelector("input").checked).map((c) => c.dataset.eventType);
        const typed = patterns.value.split(",").map((p) => p.trim()).filter(Boolean);
        const body = { event_types: [...chosen, ...typed], headers: [...headerRows.children].map((row) => row.read()) };
        const text = filter.value.trim();
        const parsed = text ? JSON.parse(text) : null;
        if (!existing && kind.value === "poll") body.kind = "poll";
        else if (!poll) body.url = url.value.trim();
        if (existing) {
          // An update names every field the form shows: empty clears the optional ones.
          body.description = description.value.trim() || null;
          body.rate_limit_per_second = rate.value.trim() ? wholeNumber(rate.value) : null;
          body.filter = parsed;
          if (roleArn.value.trim() !== (existing.role_arn ?? "")) body.role_arn = roleArn.value.trim() || null;
        } else {
          if (description.value.trim()) body.description = description.value.trim();
          if (rate.value.trim()) body.rate_limit_per_second = wholeNumber(rate.value);
          if (parsed !== null) body.filter = parsed;
          if (roleArn.value.trim()) body.role_arn = roleArn.value.trim();
        }
        if (inFlight.value.trim()) body.max_in_flight = wholeNumber(inFlight.value);
        return body;
      }

      return [
        el("h2", {}, existing ? "Edit endpoint" : "Add endpoint"),
        form,
        el("div", { class: "actions" }, save, el("button", { type: "button", onclick: () => endpointsView() }, "Cancel")),
      ];
    });
  }

  // The API's problem details by the fields they name (`field`, from request validation; `pointer`, RFC 6901, from
  // the endpoint's rules): each under its own field, the rest (and the problem's detail) above the buttons.
  const FIELD_ALIASES = { content_filter: "filter", kind: "url" };
  function showErrors(form, general, errors, detail) {
    const unplaced = [];
    let first = null;
    for (const error of errors) {
      const named = String(error.field ?? error.pointer ?? "");
      const where = named.replace(/^\//, "");
      const name = FIELD_ALIASES[where.split(/[./]/)[0]] || where.split(/[./]/)[0];
      const message = error.message || error.detail || "invalid";
      const wrapper = name ? form.querySelector(`[data-field="${CSS.escape(name)}"]`) : null;
      const line = wrapper && wrapper.querySelector(":scope > .field-error");
      if (!line) {
        unplaced.push(where ? `${named}: ${message}` : message);
        continue;
      }
      line.hidden = false;
      // Deeper than the field itself (a pointer into the filter, a header's index): say where.
      const text = where.includes("/") || where.includes(".") ? `${named}: ${message}` : message;
      line.textContent = line.textContent ? `${line.textContent} ${text}` : text;
      const input = wrapper.querySelector("input, textarea, select");
      if (input) input.setAttribute("aria-invalid", "true");
      first = first || input;
    }
    general.replaceChildren(
      el("div", { class: "notice error", "data-role": "error" }, el("p", {}, detail), unplaced.length ? el("ul", {}, unplaced.map((u) => el("li", {}, u))) : null),
    );
    if (first) first.focus();
  }

  // The new endpoint's signing secret, shown this once: it is in this page's DOM only until the next view.
  function created(endpoint) {
    generation++;
    show(
      el("h2", {}, "Endpoint created"),
      el(
        "section",
        { class: "card", id: "created-endpoint", "data-endpoint": endpoint.id },
        facts([["Id", el("span", { class: "id" }, endpoint.id)], ["URL", endpoint.url ?? `Pull delivery: GET ${endpoint.messages_url}`]]),
        el(
          "div",
          { class: "notice", "data-role": "new-secret" },
          el("p", {}, "Its signing secret, shown once: copy it now. It is not shown again (rotate it to get a new one)."),
          el("p", { class: "secret" }, endpoint.secret),
        ),
        el("div", { class: "actions" }, el("button", { type: "button", class: "primary", id: "created-done", onclick: () => endpointsView() }, "Done")),
      ),
    );
  }

  // --- Redrive progress ---

  function redriveView(redriveId) {
    return view("endpoints", async (current) => {
      const bar = el("progress", { id: "redrive-progress", max: 1, value: 0 });
      const text = el("p", { id: "redrive-text" }, "Starting…");
      const state = el("span", { id: "redrive-state" });
      const details = el("div", {}, facts([["Redrive", redriveId]]));
      const poll = async () => {
        if (!current()) return;
        try {
          const redrive = await api("GET", `/v1/redrives/${encodeURIComponent(redriveId)}`);
          const done = redrive.replayed + redrive.skipped;
          bar.max = Math.max(redrive.total ?? 0, 1);
          bar.value = redrive.total === null ? 0 : done;
          state.replaceChildren(badge(redrive.state, redrive.state === "completed" ? "good" : redrive.state === "failed" ? "bad" : "warn"));
          text.textContent =
            redrive.total === null
              ? `Counting the deliveries to redrive… ${done} replayed so far`
              : `${redrive.replayed} replayed, ${redrive.skipped} skipped, of ${countText(redrive.total, redrive.total_exact)}`;
          if (redrive.error) text.textContent += ` (${redrive.error})`;
          const endpoint = (endpointsCache || []).find((e) => e.id === redrive.endpoint_id);
          details.replaceChildren(
            facts([
              ["Redrive", redrive.id],
              ["Endpoint", endpoint ? endpoint.url : redrive.endpoint_id],
              ["Deliveries", `${redrive.status_filter}${redrive.include_recovered ? " (recovered too)" : ""}, created ${when(redrive.since)} to ${when(redrive.until)}`],
              ["Started", when(redrive.created_at)],
              ["Completed", when(redrive.completed_at)],
            ]),
          );
          if (redrive.state === "running") setTimeout(poll, POLL_MS);
        } catch (error) {
          const shown = failure(error);
          if (shown && current()) text.replaceChildren(shown);
        }
      };
      setTimeout(poll, 0);
      return [
        el("h2", {}, "Redrive ", state),
        el("section", { class: "card" }, details, bar, text,
          el("div", { class: "actions" }, el("button", { type: "button", onclick: () => deliveriesView({}) }, "Deliveries"))),
      ];
    });
  }

  // --- The delivery log ---

  function deliveriesView(filters, cursors = []) {
    return view("deliveries", async () => {
      const known = endpointsCache || (await endpoints());
      const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
      for (const [name, value] of Object.entries(filters)) if (value) query.set(name, value);
      const cursor = cursors[cursors.length - 1];
      if (cursor) query.set("cursor", cursor);
      const page = await api("GET", `/v1/deliveries?${query}`);
      const urls = new Map(known.map((e) => [e.id, e.url]));
      const rows = page.data.map((d) =>
        el(
          "button",
          { type: "button", class: "row delivery", "data-delivery": d.id, onclick: () => deliveryView(d.id) },
          el("span", {}, el("strong", {}, d.event_type), el("br"), el("span", { class: "id" }, d.id)),
          el("span", {}, badge(d.status, STATUS_TONES[d.status] || "neutral"),
            // Dead, then a replay of it delivered: it stays dead, "recovered by" that replay (redrives skip it).
            d.recovered_by ? [" ", el("span", { class: "badge good recovered", title: `recovered by ${d.recovered_by}` }, "recovered")] : ""),
          urls.get(d.endpoint_id)
            ? el("span", { class: "muted url" }, urlText(urls.get(d.endpoint_id)))
            : el("span", { class: "muted id" }, d.endpoint_id),
          el("span", { class: "muted" }, when(d.created_at), ` · ${d.attempt_count} attempt${d.attempt_count === 1 ? "" : "s"}`,
            d.last_status_code ? ` · ${d.last_status_code}` : ""),
        ),
      );
      return [
        el("h2", {}, "Deliveries"),
        filterForm(filters, known),
        rows.length ? el("div", { class: "rows" }, rows) : el("p", { class: "muted", id: "no-deliveries" }, "No deliveries match."),
        el(
          "div",
          { class: "pager" },
          el("button", { type: "button", disabled: !cursors.length, onclick: () => deliveriesView(filters, cursors.slice(0, -1)) }, "Previous page"),
          el("button", { type: "button", id: "next-page", disabled: !page.next_cursor, onclick: () => deliveriesView(filters, [...cursors, page.next_cursor]) }, "Next page"),
        ),
      ];
    });
  }

  function filterForm(filters, known) {
    const option = (value, label, chosen) => {
      const node = el("option", { value }, label);
      node.selected = chosen === value;
      return node;
    };
    const status = el("select", { name: "status" }, option("", "any status", filters.status || ""), STATUSES.map((s) => option(s, s, filters.status)));
    const endpoint = el("select", { name: "endpoint_id" }, option("", "any endpoint", filters.endpoint_id || ""), known.map((e) => option(e.id, e.url, filters.endpoint_id)));
    const eventId = el("input", { type: "text", name: "event_id", value: filters.event_id || "", placeholder: "evt_…" });
    const since = el("input", { type: "text", name: "since", value: filters.since || "", placeholder: "RFC 3339" });
    const until = el("input", { type: "text", name: "until", value: filters.until || "", placeholder: "RFC 3339" });
    const apply = () =>
      deliveriesView({ status: status.value, endpoint_id: endpoint.value, event_id: eventId.value.trim(), since: since.value.trim(), until: until.value.trim() });
    return el(
      "div",
      { class: "card filters" },
      el("label", {}, "Status", status),
      el("label", {}, "Endpoint", endpoint),
      el("label", {}, "Event id", eventId),
      el("label", {}, "Since", since),
      el("label", {}, "Until", until),
      el("button", { type: "button", class: "primary", id: "apply-filters", onclick: apply }, "Apply"),
    );
  }

  // --- One delivery ---

  function deliveryView(deliveryId) {
    return view("deliveries", async () => {
      const delivery = await api("GET", `/v1/deliveries/${encodeURIComponent(deliveryId)}`);
      let event = null;
      try {
        event = await api("GET", `/v1/events/${encodeURIComponent(delivery.event_id)}`);
      } catch (error) {
        if (error instanceof Refused) throw error;
      }
      const result = el("div", {});
      const attempts = delivery.attempts.map((a) =>
        el(
          "div",
          { class: "attempt", "data-attempt": a.number },
          el("strong", {}, `Attempt ${a.number}`), " ",
          badge(a.status_code ? String(a.status_code) : a.error ? "error" : "—", a.status_code >= 200 && a.status_code < 300 ? "good" : "bad"),
          facts([
            ["Started", when(a.started_at)],
            ["Latency", a.latency_ms === null ? "—" : `${a.latency_ms} ms`],
            a.error && ["Error", a.error],
          ]),
          a.response_excerpt ? el("pre", { class: "excerpt" }, a.response_excerpt) : el("p", { class: "muted" }, "No response body."),
        ),
      );
      return [
        el("h2", {}, "Delivery ", badge(delivery.status, STATUS_TONES[delivery.status] || "neutral")),
        el(
          "section",
          { class: "card", id: "delivery", "data-delivery": delivery.id },
          facts([
            ["Id", delivery.id],
            ["Event", `${delivery.event_type} (${delivery.event_id})`],
            ["Endpoint", delivery.endpoint_id],
            ["Created", when(delivery.created_at)],
            ["Completed", when(delivery.completed_at)],
            delivery.next_attempt_at && ["Next attempt", when(delivery.next_attempt_at)],
            delivery.replay_of && ["Replay of", delivery.replay_of],
            delivery.dead_reason && ["Dead because", delivery.dead_reason],
            delivery.recovered_by && ["Recovered by", `${delivery.recovered_by} (delivered ${when(delivery.recovered_at)})`],
          ]),
          el(
            "div",
            { class: "actions" },
            el("button", {
              type: "button",
              class: "primary",
              id: "replay",
              onclick: async () => {
                try {
                  const replay = await api("POST", `/v1/deliveries/${encodeURIComponent(delivery.id)}/replay`);
                  result.replaceChildren(
                    el("div", { class: "notice", id: "replayed" }, "Replayed as ",
                      el("button", { type: "button", "data-delivery": replay.delivery_id, onclick: () => deliveryView(replay.delivery_id) }, replay.delivery_id)),
                  );
                } catch (error) {
                  const shown = failure(error);
                  if (shown) result.replaceChildren(shown);
                }
              },
            }, "Replay"),
            el("button", { type: "button", onclick: () => deliveriesView({}) }, "Back to deliveries"),
          ),
          result,
        ),
        el("section", { class: "card" }, el("h3", {}, "Event data"),
          event ? el("pre", { id: "event-data" }, json(event.data)) : el("p", { class: "muted" }, "The event is no longer kept.")),
        el("section", { class: "card", id: "attempts" }, el("h3", {}, `Attempts (${attempts.length})`),
          attempts.length ? attempts : el("p", { class: "muted" }, "No attempts yet.")),
      ];
    });
  }

  function start() {
    token = takeToken();
    endpointsCache = null;
    if (!token) return refused();
    nav.hidden = false;
    endpointsView();
  }

  document.getElementById("nav-endpoints").addEventListener("click", () => endpointsView());
  document.getElementById("nav-deliveries").addEventListener("click", () => deliveriesView({}));
  // A new link opened in this tab only changes the fragment: the page is not loaded again, so take it here.
  window.addEventListener("hashchange", () => {
    if (new URLSearchParams(location.hash.slice(1)).has("token")) start();
  });
  start();
})();
