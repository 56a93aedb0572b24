// Element builders: every text goes in as a text node (never as HTML), so data from the memory
// cannot inject markup; no inline style attributes (the page's Content-Security-Policy forbids them).

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * h("div", { class: "x", onclick: fn }, "text", child, [more]) -> HTMLElement.
 * Attributes whose value is null, undefined or false are left out.
 */
export const h = (tag, attrs = {}, ...children) => {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
};

/** The same for SVG elements. */
export const s = (tag, attrs = {}, ...children) => {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
};

const setAttrs = (el, attrs) => {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
};

const append = (el, children) => {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
};

/** Replaces the children of `el`. */
export const mount = (el, ...children) => {
  el.replaceChildren();
  append(el, children);
  return el;
};

/** A short ISO date-time for display (UTC). */
export const when = (iso) =>
  iso
    ? String(iso)
        .replace("T", " ")
        .replace(/:\d\d(\.\d+)?Z$/, "Z")
    : "";

/** A number with at most `digits` decimals. */
export const fixed = (x, digits = 3) => (typeof x === "number" ? Number(x.toFixed(digits)).toString() : "");

/** A list of chips (entities, topics). */
export const chips = (items, cls) =>
  h(
    "span",
    { class: "chips" },
    items.map((x) => h("span", { class: `chip ${cls}` }, x)),
  );
