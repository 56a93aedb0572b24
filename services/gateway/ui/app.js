// The explorer's entry point: the API key form, the view tabs, and navigation between views.
// No routing state goes into the URL (the key never does).
import { apiKey } from "./api.js";
import { h, mount } from "./dom.js";
import { consolidationView, conversationsView, historyView, queryView, timelineView } from "./views.js";

const main = document.getElementById("main");
const errorBox = document.getElementById("error");
const keyInput = document.getElementById("api-key");
const keyState = document.getElementById("key-state");

const fail = (err) => {
  errorBox.hidden = false;
  errorBox.textContent = err instanceof Error ? err.message : String(err);
};
const clearError = () => {
  errorBox.hidden = true;
  errorBox.textContent = "";
};

const trail = [];
const run = (render) => {
  clearError();
  if (!apiKey.get()) {
    mount(main, h("p", { class: "muted" }, "Type the API key of your tenant first."));
    return;
  }
  render().catch(fail);
};

const ctx = {
  fail,
  show: (view) => show(view),
  openConversation: (conversation) => go(() => timelineView(main, ctx, conversation)),
  openRecord: (id) => go(() => historyView(main, ctx, id)),
  back: () => {
    trail.pop();
    const previous = trail.at(-1);
    if (previous) run(previous);
    else show("conversations");
  },
};

const go = (render) => {
  trail.push(render);
  run(render);
};

const VIEWS = {
  conversations: () => conversationsView(main, ctx),
  query: () => queryView(main, ctx),
  consolidation: () => consolidationView(main, ctx),
};

const show = (view) => {
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === view);
  trail.length = 0;
  go(VIEWS[view]);
};

const renderKeyState = () => {
  keyState.textContent = apiKey.get() ? "key set for this tab" : "no key";
};

document.getElementById("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = keyInput.value.trim();
  if (!key) return fail(new Error("type an API key"));
  apiKey.set(key);
  keyInput.value = "";
  renderKeyState();
  show("conversations");
});
document.getElementById("key-forget").addEventListener("click", () => {
  apiKey.clear();
  renderKeyState();
  mount(main, h("p", { class: "muted" }, "Key forgotten."));
});
for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => show(tab.dataset.view));

renderKeyState();
if (apiKey.get()) show("conversations");
