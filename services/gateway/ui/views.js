// The explorer's views. Each renders into the element it is given and reports failures through
// `ctx.fail(err)`; data comes only from the gateway's /v1 routes (api.js).
import { api, qs } from "./api.js";
import { chips, fixed, h, mount, when } from "./dom.js";
import { featureChart, scoreChart, segmentBand } from "./timeline.js";

// --- Conversations and their timelines ---------------------------------------------------------

export const conversationsView = async (root, ctx) => {
  const list = h("ul", { class: "conversation-list" });
  const more = h("button", { type: "button", hidden: true }, "More conversations");
  mount(root, h("h2", {}, "Conversations"), list, more);
  let cursor;
  const load = async () => {
    const page = await api(`/v1/conversations${qs({ limit: 50, cursor })}`);
    if (page.conversations.length === 0 && cursor === undefined)
      list.append(h("li", { class: "muted" }, "No conversations with closed segments yet."));
    for (const c of page.conversations)
      list.append(
        h(
          "li",
          {},
          h(
            "button",
            {
              type: "button",
              class: "link conversation",
              "data-conversation": c.conversation,
              onclick: () => ctx.openConversation(c.conversation),
            },
            c.conversation,
          ),
          h(
            "span",
            { class: "muted" },
            ` ${c.segments} segments · ${c.turns} turns · ${when(c.firstAt)} – ${when(c.lastAt)}`,
          ),
        ),
      );
    cursor = page.nextCursor ?? undefined;
    more.hidden = cursor === undefined;
  };
  more.addEventListener("click", () => load().catch(ctx.fail));
  await load();
};

export const timelineView = async (root, ctx, conversation) => {
  const charts = h("div", { class: "charts" });
  const bandsEl = h("div", { class: "segments" });
  const more = h("button", { type: "button", hidden: true }, "More segments");
  const summary = h("p", { class: "muted" });
  mount(
    root,
    h(
      "p",
      {},
      h("button", { type: "button", class: "link", onclick: () => ctx.show("conversations") }, "← conversations"),
    ),
    h("h2", {}, `Timeline of ${conversation}`),
    summary,
    charts,
    bandsEl,
    more,
  );
  const loaded = [];
  let cursor;
  let threshold = 0;
  const load = async () => {
    const page = await api(
      `/v1/conversations/${encodeURIComponent(conversation)}/timeline${qs({ limit: 20, cursor })}`,
    );
    threshold = page.threshold;
    const offset = loaded.length;
    loaded.push(...page.segments);
    bandsEl.append(...page.segments.map((entry, i) => segmentBand(entry, offset + i, ctx.openRecord)));
    mount(charts, h("h3", {}, "Boundary decisions"), scoreChart(loaded, threshold), featureChart(loaded));
    const records = loaded.reduce((n, e) => n + e.records.length, 0);
    summary.textContent = `${loaded.length} segments · ${records} records shown · gate threshold ${threshold}`;
    cursor = page.nextCursor ?? undefined;
    more.hidden = cursor === undefined;
  };
  more.addEventListener("click", () => load().catch(ctx.fail));
  await load();
};

// --- A record's history --------------------------------------------------------------------------

export const historyView = async (root, ctx, id) => {
  mount(root, h("p", { class: "muted" }, `Loading the history of ${id}…`));
  const history = await api(`/v1/records/${encodeURIComponent(id)}/history`);
  mount(
    root,
    h("p", {}, h("button", { type: "button", class: "link", onclick: () => ctx.back() }, "← back")),
    h("h2", {}, "Record history"),
    h(
      "p",
      { class: "muted" },
      `record ${history.id}${history.current ? ` · current version ${history.current}` : " · no current version"}`,
    ),
    h(
      "table",
      { class: "versions" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["relation", "text", "valid from", "valid to", "superseded by", "current"].map((c) => h("th", {}, c)),
        ),
      ),
      h(
        "tbody",
        {},
        history.versions.map((v) =>
          h(
            "tr",
            { class: v.relation === "self" ? "self" : "" },
            h("td", {}, v.relation),
            h("td", {}, v.text),
            h("td", {}, when(v.validFrom)),
            h("td", {}, v.validTo ? when(v.validTo) : "—"),
            h("td", {}, v.supersededBy ?? "—"),
            h("td", {}, v.current ? "yes" : "no"),
          ),
        ),
      ),
    ),
    h("h3", {}, "Relations"),
    history.relations.length
      ? h(
          "ul",
          { class: "relations" },
          history.relations.map((r) =>
            h("li", {}, `${r.from} ${r.relation} ${r.to} at ${when(r.at)}${r.reason ? ` — ${r.reason}` : ""}`),
          ),
        )
      : h(
          "p",
          { class: "muted" },
          "No SUPERSEDES, DUPLICATE_OF or REFINES edges: this record was never consolidated with another.",
        ),
  );
};

// --- Query playground ----------------------------------------------------------------------------

const planView = (plan) =>
  h(
    "dl",
    { class: "facts plan" },
    h("dt", {}, "question type"),
    h("dd", {}, plan.questionType),
    h("dt", {}, "entities"),
    h("dd", {}, chips(plan.entities, "entity")),
    h("dt", {}, "topics"),
    h("dd", {}, chips(plan.topics, "topic")),
    h("dt", {}, "time window"),
    // A question asked as of a moment has a window open at the start (services/query/question-time.ts).
    h(
      "dd",
      {},
      plan.timeWindow
        ? `${plan.timeWindow.from.startsWith("0001-01-01") ? "…" : when(plan.timeWindow.from)} – ${when(plan.timeWindow.to)}`
        : "—",
    ),
    h("dt", {}, "routes"),
    h("dd", {}, chips(plan.routes, "route")),
    h("dt", {}, "rewrites"),
    h("dd", {}, plan.rewrites.length ? plan.rewrites.join(" | ") : "—"),
  );

/** Each route's hits: from the explain section when the runtime returns it, else from the packed items. */
const routeHits = (result) => {
  const text = new Map(result.items.map((i) => [i.id, i.text]));
  if (result.explain?.routes) {
    for (const f of result.explain.fused) if (f.text && !text.has(f.id)) text.set(f.id, f.text);
    return result.explain.routes.map((r) => ({
      route: r.route,
      hits: r.hits.map((x, rank) => ({ id: x.id, rank: rank + 1, score: x.score, text: text.get(x.id) })),
    }));
  }
  const byRoute = new Map();
  for (const item of result.items)
    for (const r of item.routes) {
      if (!byRoute.has(r.route)) byRoute.set(r.route, []);
      byRoute.get(r.route).push({ id: item.id, rank: r.rank, score: r.score, text: item.text });
    }
  return [...byRoute.entries()].map(([route, hits]) => ({ route, hits: hits.sort((a, b) => a.rank - b.rank) }));
};

const short = (t, n = 90) => (t && t.length > n ? `${t.slice(0, n - 1)}…` : (t ?? ""));

const resultView = (result) => {
  const routes = routeHits(result);
  const fused =
    result.explain?.fused ??
    [...result.items]
      .sort((a, b) => b.fusedScore - a.fusedScore)
      .map((i) => ({ id: i.id, score: i.fusedScore, routes: i.routes.map((r) => r.route) }));
  const text = new Map(result.items.map((i) => [i.id, i.text]));
  for (const f of result.explain?.fused ?? []) if (f.text && !text.has(f.id)) text.set(f.id, f.text);
  const packedIds = new Set(result.items.map((i) => i.id));
  const cost = result.cost;
  return h(
    "div",
    { class: "result" },
    h("h3", {}, "Plan"),
    planView(result.plan),
    h("h3", {}, "Route hits"),
    result.explain
      ? null
      : h("p", { class: "muted" }, "Hits of the packed items per route (this runtime returns no full route lists)."),
    h(
      "div",
      { class: "routes" },
      routes.map((r) =>
        h(
          "section",
          { class: "route", "data-route": r.route },
          h("h4", {}, `${r.route} (${r.hits.length})`),
          h(
            "ol",
            {},
            r.hits.map((x) => h("li", {}, h("span", { class: "score" }, fixed(x.score)), " ", short(x.text ?? x.id))),
          ),
        ),
      ),
    ),
    h("h3", {}, "Fused order (RRF)"),
    h(
      "ol",
      { class: "fused" },
      fused.map((f) =>
        h(
          "li",
          { class: packedIds.has(f.id) ? "packed" : "unpacked" },
          h("span", { class: "score" }, fixed(f.score, 4)),
          " ",
          short(text.get(f.id) ?? f.id),
          " ",
          chips(f.routes ?? [], "route"),
          packedIds.has(f.id) ? h("span", { class: "badge" }, "packed") : null,
        ),
      ),
    ),
    h("h3", {}, "Packed context"),
    h(
      "div",
      { class: "token-bar" },
      h("progress", { id: "token-progress", max: result.budget, value: result.contextTokens }),
      h("span", {}, `${result.contextTokens} / ${result.budget} tokens · ${result.items.length} items`),
    ),
    h("pre", { class: "context", id: "query-context" }, result.context),
    h("h3", {}, "Cost"),
    h(
      "dl",
      { class: "facts cost" },
      h("dt", {}, "time"),
      h("dd", {}, `${fixed(cost.ms, 1)} ms`),
      h("dt", {}, "embedding calls"),
      h("dd", {}, cost.embeddingCalls),
      h("dt", {}, "LLM calls"),
      h("dd", {}, `${cost.llmCalls} (${cost.inputTokens} in / ${cost.outputTokens} out tokens)`),
      h("dt", {}, "per route"),
      h(
        "dd",
        {},
        Object.entries(cost.routeMs ?? {})
          .map(([r, ms]) => `${r} ${fixed(ms, 1)} ms`)
          .join(" · "),
      ),
    ),
  );
};

export const queryView = async (root, ctx) => {
  const question = h("textarea", {
    id: "q-question",
    rows: 2,
    required: true,
    placeholder: "When did Ben adopt his dog?",
  });
  const conversation = h("input", { id: "q-conversation", placeholder: "all conversations" });
  const budget = h("input", { id: "q-budget", type: "number", min: 1, value: 500 });
  const asOf = h("input", { id: "q-asof", placeholder: "now (or an ISO time)" });
  const out = h("div", { id: "query-result" });
  const form = h(
    "form",
    { class: "query-form" },
    h("label", { for: "q-question" }, "Question"),
    question,
    h("label", { for: "q-conversation" }, "Conversation"),
    conversation,
    h("label", { for: "q-budget" }, "Budget (tokens)"),
    budget,
    h("label", { for: "q-asof" }, "As of"),
    asOf,
    h("button", { type: "submit", id: "q-run" }, "Run query"),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const body = { question: question.value, budget: Number(budget.value), explain: true };
    if (conversation.value.trim()) body.conversation = conversation.value.trim();
    if (asOf.value.trim()) body.asOf = asOf.value.trim();
    mount(out, h("p", { class: "muted" }, "Running…"));
    api("/v1/query", { body })
      .then((result) => mount(out, resultView(result)))
      .catch((err) => {
        mount(out);
        ctx.fail(err);
      });
  });
  mount(root, h("h2", {}, "Query playground"), form, out);
};

// --- Consolidation -------------------------------------------------------------------------------

const RUNS = "memory-explorer.consolidations";
const runs = () => JSON.parse(sessionStorage.getItem(RUNS) ?? "[]");

const reportView = (run) =>
  h(
    "li",
    { class: "run" },
    h("strong", {}, when(run.at)),
    " ",
    h(
      "dl",
      { class: "facts report" },
      ["examined", "candidates", "merged", "superseded", "linked", "unchanged", "dropped", "decider"].flatMap((k) => [
        h("dt", {}, k),
        h("dd", {}, String(run.report[k] ?? "")),
      ]),
      h("dt", {}, "time"),
      h("dd", {}, `${fixed(run.report.ms, 1)} ms`),
      h("dt", {}, "LLM cost"),
      h(
        "dd",
        {},
        run.report.cost
          ? `${run.report.cost.llmCalls} calls, ${run.report.cost.inputTokens} in / ${run.report.cost.outputTokens} out tokens`
          : "—",
      ),
    ),
  );

export const consolidationView = async (root, ctx) => {
  const list = h("ol", { class: "runs", reversed: true });
  const render = () => mount(list, runs().reverse().map(reportView));
  const button = h("button", { type: "button", id: "consolidate" }, "Consolidate now");
  button.addEventListener("click", () => {
    button.disabled = true;
    api("/v1/consolidate", { body: {} })
      .then((report) => {
        sessionStorage.setItem(RUNS, JSON.stringify([...runs(), { at: new Date().toISOString(), report }].slice(-20)));
        render();
      })
      .catch(ctx.fail)
      .finally(() => {
        button.disabled = false;
      });
  });
  mount(
    root,
    h("h2", {}, "Consolidation"),
    h(
      "p",
      { class: "muted" },
      "The service keeps no history of consolidation runs per tenant: the runs listed here were started from this tab (kept in its sessionStorage). A run decides the pending update candidates of your tenant (duplicates merged, contradictions superseded, refinements linked).",
    ),
    button,
    list,
  );
  render();
};
