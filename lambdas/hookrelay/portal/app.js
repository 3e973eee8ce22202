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
      else if (name.startsWith("data-")) node.setAttribute(name, String(value));
      else if (["id", "type", "value", "placeholder", "disabled", "hidden", "max", "title", "name"].includes(name))
        node[name] = value;
      else throw new Error(`unsupported property ${name}`);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function show(...nodes) {
    main.replaceChildren(...nodes);
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
    return view("endpoints", async () => {
      const list = await endpoints();
      const healths = await Promise.all(list.map((e) => api("GET", `/v1/endpoints/${encodeURIComponent(e.id)}/health`)));
      const cards = list.map((endpoint, i) => endpointCard(endpoint, healths[i]));
      return [
        el("h2", {}, "Endpoints"),
        cards.length ? el("div", { class: "grid" }, cards) : el("p", { class: "muted" }, "No endpoints yet."),
      ];
    });
  }

  // Custom headers and auth, read-only: the API never returns a secret header's value nor a credential.
  function headersText(headers) {
    return headers.map((h) => (h.secret ? `${h.name}: (secret)` : `${h.name}: ${h.value}`)).join(", ");
  }

  function authText(auth) {
    const shown = ["username", "client_id", "token_url", "scope", "audience"].filter((name) => auth[name]);
    return [auth.kind, ...shown.map((name) => `${name} ${auth[name]}`), `set ${when(auth.set_at)}`].join(", ");
  }

  function endpointCard(endpoint, health) {
    const path = `/v1/endpoints/${encodeURIComponent(endpoint.id)}`;
    const circuit = health.circuit;
    const failing = health.failing_since;
    const result = el("div", { class: "result" });
    const card = el(
      "section",
      { class: "card endpoint", "data-endpoint": endpoint.id },
      el("h3", { class: "endpoint-url" }, endpoint.url ?? `Pull delivery: GET ${endpoint.messages_url}`),
      endpoint.description ? el("p", { class: "muted" }, endpoint.description) : null,
      el(
        "div",
        { class: "actions" },
        badge(endpoint.state, endpoint.state === "enabled" ? "good" : "neutral"),
        badge(`circuit ${circuit.state}`, circuit.state === "closed" ? "good" : "bad"),
        badge(failing ? "failing" : "healthy", failing ? "bad" : "good"),
      ),
      facts([
        ["Id", endpoint.id],
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
        ["Circuit", `${circuit.state}, ${circuit.parked} parked${circuit.next_probe_at ? `, next probe ${when(circuit.next_probe_at)}` : ""}`],
        ["Max in flight", String(endpoint.max_in_flight)],
        [
          "Rate limit",
          endpoint.rate_limit_per_second ? `${endpoint.rate_limit_per_second} deliveries a second` : "none",
        ],
        [
          "Backlog",
          `${health.backlog.parked} parked` +
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
        act("Rotate secret", async () => {
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
              : `${redrive.replayed} replayed, ${redrive.skipped} skipped, of ${redrive.total}`;
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
          el("span", { class: "muted" }, urls.get(d.endpoint_id) || d.endpoint_id),
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
