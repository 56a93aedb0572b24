// A conversation's timeline: the boundary gate's score and features plotted along the turns
// against the threshold (inline SVG), then each segment as a band with its turns (original text
// with the tokens the compressor kept highlighted, and the compressed text) and the records it
// yielded (entities, topics, dates, source turns, validity).
import { chips, fixed, h, s, when } from "./dom.js";

const WIDTH = 960;
const FEATURES = [
  ["z", "surprise z"],
  ["phi", "phi"],
  ["cohesionDrop", "cohesion drop"],
  ["lengthPressure", "length pressure"],
  ["turnPressure", "turn pressure"],
];

const words = (text) => text.split(/(\s+)/);
const norm = (w) => w.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "");

/**
 * The original text with the words the compressor kept marked: the compressed text keeps words of
 * the original in order, so one in-order pass pairs them (a word it altered stays unmarked).
 */
export const keptHighlight = (original, compressed) => {
  const kept = compressed.split(/\s+/).map(norm).filter(Boolean);
  let j = 0;
  return words(original).map((w) => {
    const n = norm(w);
    if (n && j < kept.length && n === kept[j]) {
      j++;
      return h("mark", { class: "kept" }, w);
    }
    return w;
  });
};

/** Decisions of every segment in turn order, with the index of their segment. */
const decisionsOf = (segments) => segments.flatMap((t, si) => t.segment.decisions.map((d) => ({ ...d, segment: si })));

const bands = (decisions, x, height) => {
  const out = [];
  let start = 0;
  for (let i = 1; i <= decisions.length; i++) {
    if (i === decisions.length || decisions[i].segment !== decisions[start].segment) {
      const seg = decisions[start].segment;
      out.push(
        s("rect", {
          class: `band band-${seg % 2}`,
          x: x(start) - 0.5 * x.step,
          y: 0,
          width: (i - start) * x.step,
          height,
          "data-segment": seg,
        }),
      );
      start = i;
    }
  }
  return out;
};

const polyline = (points, cls) => s("polyline", { class: cls, points: points.map((p) => p.join(",")).join(" ") });

/** The gate's probability per decision against the threshold, with the cuts marked. */
export const scoreChart = (segments, threshold) => {
  const decisions = decisionsOf(segments);
  if (decisions.length === 0) return h("p", { class: "muted" }, "No boundary decisions recorded.");
  const height = 160;
  const pad = 24;
  const step = (WIDTH - 2 * pad) / Math.max(1, decisions.length);
  const x = Object.assign((i) => pad + (i + 0.5) * step, { step });
  const y = (p) => height - pad - p * (height - 2 * pad);
  return s(
    "svg",
    {
      class: "chart score-chart",
      viewBox: `0 0 ${WIDTH} ${height}`,
      role: "img",
      "aria-label": "boundary score per turn",
    },
    s("title", {}, `Boundary probability per turn; threshold ${threshold}`),
    bands(decisions, x, height),
    s("line", { class: "threshold", x1: pad, x2: WIDTH - pad, y1: y(threshold), y2: y(threshold) }),
    s("text", { class: "axis", x: WIDTH - pad, y: y(threshold) - 4, "text-anchor": "end" }, `threshold ${threshold}`),
    s("text", { class: "axis", x: 2, y: y(1) + 4 }, "1"),
    s("text", { class: "axis", x: 2, y: y(0) + 4 }, "0"),
    polyline(
      decisions.map((d, i) => [x(i), y(d.p)]),
      "score",
    ),
    decisions.map((d, i) =>
      s(
        "circle",
        { class: d.cut ? "cut" : "no-cut", cx: x(i), cy: y(d.p), r: d.cut ? 4 : 2.5 },
        s("title", {}, `${d.turnId}: p=${fixed(d.p)}${d.cut ? ` cut (${d.reason ?? "gate"})` : ""}`),
      ),
    ),
  );
};

/** The gate's input features per decision, on one shared scale. */
export const featureChart = (segments) => {
  const decisions = decisionsOf(segments);
  if (decisions.length === 0) return null;
  const height = 140;
  const pad = 24;
  const values = decisions.flatMap((d) => FEATURES.map(([k]) => d[k]));
  const lo = Math.min(0, ...values);
  const hi = Math.max(1, ...values);
  const step = (WIDTH - 2 * pad) / Math.max(1, decisions.length);
  const x = Object.assign((i) => pad + (i + 0.5) * step, { step });
  const y = (v) => height - pad - ((v - lo) / (hi - lo)) * (height - 2 * pad);
  return h(
    "figure",
    { class: "features" },
    s(
      "svg",
      {
        class: "chart feature-chart",
        viewBox: `0 0 ${WIDTH} ${height}`,
        role: "img",
        "aria-label": "gate features per turn",
      },
      bands(decisions, x, height),
      s("line", { class: "zero", x1: pad, x2: WIDTH - pad, y1: y(0), y2: y(0) }),
      s("text", { class: "axis", x: 2, y: y(hi) + 4 }, fixed(hi, 1)),
      s("text", { class: "axis", x: 2, y: y(lo) + 4 }, fixed(lo, 1)),
      FEATURES.map(([k], fi) =>
        polyline(
          decisions.map((d, i) => [x(i), y(d[k])]),
          `feature feature-${fi}`,
        ),
      ),
    ),
    h(
      "figcaption",
      { class: "legend" },
      FEATURES.map(([, label], fi) => h("span", { class: `legend-item feature-${fi}` }, label)),
    ),
  );
};

const recordCard = (r, onRecord) =>
  h(
    "li",
    { class: `record${r.valid.to ? " superseded" : ""}`, "data-record": r.id },
    h(
      "div",
      { class: "record-head" },
      h("span", { class: "type" }, r.type),
      h("button", { type: "button", class: "link", onclick: () => onRecord(r.id) }, "history"),
      r.valid.to ? h("span", { class: "badge" }, `superseded ${when(r.valid.to)}`) : null,
    ),
    h("p", { class: "record-text" }, r.text),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "entities"),
      h(
        "dd",
        {},
        chips(
          r.entities.map((e) => `${e.name} (${e.kind})`),
          "entity",
        ),
      ),
      h("dt", {}, "topics"),
      h("dd", {}, chips(r.topics, "topic")),
      h("dt", {}, "dates"),
      h(
        "dd",
        {},
        [
          r.time.at ? `at ${when(r.time.at)}` : "",
          r.time.from ? `from ${when(r.time.from)}` : "",
          r.time.to ? `to ${when(r.time.to)}` : "",
          `said ${when(r.source.saidAt)}`,
        ]
          .filter(Boolean)
          .join(" · "),
      ),
      h("dt", {}, "source turns"),
      h("dd", {}, chips(r.source.turnIds, "turn-ref")),
      h("dt", {}, "valid"),
      h("dd", {}, `${when(r.valid.from)} → ${r.valid.to ? when(r.valid.to) : "now"}`),
    ),
  );

const turnRow = (t, decision) =>
  h(
    "li",
    { class: "turn", "data-turn": t.turnId },
    h(
      "div",
      { class: "turn-head" },
      h("span", { class: "turn-id" }, t.turnId),
      h("strong", {}, t.speaker),
      h("span", { class: "muted" }, when(t.timestamp)),
      decision
        ? h(
            "span",
            { class: `decision${decision.cut ? " decision-cut" : ""}` },
            `p=${fixed(decision.p)}${decision.cut ? ` cut: ${decision.reason ?? "gate"}` : ""}`,
          )
        : null,
    ),
    h("p", { class: "original" }, keptHighlight(t.text, t.compressed)),
    h("p", { class: "compressed" }, h("span", { class: "label" }, "compressed "), t.compressed),
  );

/** One segment as a band: its span, why it closed, its turns and the records it yielded. */
export const segmentBand = (entry, index, onRecord) => {
  const { segment, records } = entry;
  const decisionByTurn = new Map(segment.decisions.map((d) => [d.turnId, d]));
  return h(
    "section",
    { class: `segment band-${index % 2}`, "data-segment": segment.id },
    h(
      "header",
      { class: "segment-head" },
      h("h3", {}, `Segment ${index + 1}`),
      h("span", { class: "muted" }, `${when(segment.start)} – ${when(segment.end)}`),
      h("span", { class: "badge" }, `closed by ${segment.closedBy}`),
      h(
        "span",
        { class: "muted" },
        `${segment.turns.length} turns · ${segment.tokens} tokens · session ${segment.sessionId}`,
      ),
    ),
    h(
      "div",
      { class: "segment-body" },
      h(
        "ol",
        { class: "turns" },
        segment.turns.map((t) => turnRow(t, decisionByTurn.get(t.turnId))),
      ),
      h(
        "div",
        { class: "records" },
        h("h4", {}, `Records (${records.length})`),
        records.length
          ? h(
              "ul",
              { class: "record-list" },
              records.map((r) => recordCard(r, onRecord)),
            )
          : h("p", { class: "muted" }, "No records from this segment."),
      ),
    ),
  );
};
