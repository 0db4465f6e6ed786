// dealtrail console: step-through replay of a round or a time window (no third party, no inline script).
// Steps come from GET /api/v1/tables/{table}/replay a page at a time; every value is set as text.
"use strict";
(function () {
  const root = document.getElementById("replay");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const slider = $("rp-slider"), pos = $("rp-pos"), status = $("rp-status");
  const pages = new Map();
  let total = 0, size = 150, at = 0, want = 0, loading = null, removedBefore = 0;
  const seen = new Map();  // finding_id + revision -> {step, finding}

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  const SUITS = { H: ["♥", true], D: ["♦", true], C: ["♣", false], S: ["♠", false] };
  function card(code, up, marked) {
    const s = SUITS[code && code[1]];
    const rank = code === "JK" ? "Joker" : s ? (code[0] === "T" ? "10" : code[0]) : "?";
    const suit = s ? s[0] : "";
    const red = s ? s[1] : false;
    const c = el("span", "pc" + (red && up ? " red" : "") + (up ? "" : " back") + (marked ? " mark-cited" : ""));
    c.title = rank + suit + (up ? " (face up)" : " (face down)");
    if (up) { c.append(el("b", "", rank), el("i", "", suit)); }
    else { c.append(el("span", "peek" + (red ? " red" : ""), rank + suit)); }
    return c;
  }
  function params(page) {
    const q = new URLSearchParams();
    if (root.dataset.round) q.set("round", root.dataset.round);
    else { q.set("from", root.dataset.from); q.set("to", root.dataset.to); }
    q.set("page", String(page));
    return q.toString();
  }
  async function fetchPage(page) {
    if (pages.has(page)) return pages.get(page);
    const res = await fetch(root.dataset.api + "?" + params(page), { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (res.status === 401) { window.location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search)); return null; }
    if (!res.ok) { status.textContent = "The replay could not be loaded (" + res.status + ")."; return null; }
    const body = await res.json();
    total = body.total; size = body.page_size; removedBefore = body.decks_removed_before || 0;
    pages.set(page, body.steps);
    if (!seen.size && body.findings.length) {
      // every finding of the window, with its step: listed as the replay passes it, and ticked on the slider
      const ticks = el("datalist");
      ticks.id = "rp-ticks";
      for (const f of body.findings) {
        seen.set(f.finding_id + "/" + f.revision, { step: f.i, f: f });
        const o = el("option"); o.value = String(f.i); ticks.append(o);
      }
      root.append(ticks);
      slider.setAttribute("list", "rp-ticks");
    }
    slider.max = String(Math.max(0, total - 1));
    return body.steps;
  }
  async function step(i) {
    want = Math.max(0, Math.min(i, Math.max(0, total - 1)));
    if (loading) return;
    while (true) {
      const target = want;
      loading = fetchPage(Math.floor(target / size) + 1);
      const list = await loading;
      loading = null;
      if (!list) return;
      const s = list[target - (Math.floor(target / size)) * size];
      if (s) draw(s);
      if (want === target) return;
    }
  }
  function fact(dl, k, v) { dl.append(el("dt", "", k), el("dd", "", v)); }
  function draw(s) {
    at = s.i;
    slider.value = String(at);
    pos.textContent = "step " + (at + 1) + " of " + total;
    const evBox = $("rp-event");
    const dl = el("dl", "facts");
    fact(dl, "Seq", s.seq); fact(dl, "Time", s.shown || s.time.replace("T", " ")); fact(dl, "By", s.actor);
    fact(dl, "Round", s.round_id || "between rounds");
    evBox.replaceChildren(el("div", "etype", s.type), dl, el("div", "edet", s.details));
    if (s.card) {
      const shown = el("div", "big-cards");
      const c = card(s.card[0], s.card[1], false);
      if (s.type !== "CardDealt") c.classList.add("mark-" + (s.type === "CardExposed" ? "exposed" : "found"));
      shown.append(c);
      evBox.append(shown);
    }
    const nf = $("rp-new-findings");
    nf.replaceChildren(...s.findings.map((f) => {
      const d = el("div", "rp-new finding-at-step");
      const a = el("a", "", f.rule_id); a.href = "/findings/" + f.finding_id;
      d.append(el("b", "sev " + f.severity, f.severity + " "), a, el("div", "", f.message), el("div", "small muted", "status " + f.status + (f.revision ? ", revision " + f.revision : "")));
      return d;
    }));
    const marked = new Set(); for (const f of s.findings) for (const e of f.evidence) marked.add(e);
    const r = s.round;
    $("rp-round").replaceChildren(r ? el("span", "", "Round " + r.round_id + " · dealer " + r.dealer_id + " · deck " + (r.deck_id || "-") + " · " + r.method.toLowerCase().replace("_", " ") + " · " + r.cards_dealt + " cards dealt" + (r.voided ? " · void: " + r.voided : "")) : el("span", "muted", "No round in progress."));
    $("rp-layout").replaceChildren(...s.layout.map((a) => {
      const box = el("div", "area" + (a.area === "BURN" ? " burn" : ""));
      box.append(el("div", "name", a.name));
      for (const c of a.cards) box.append(card(c[0], c[1], marked.has(c[2]) || (c[3] && marked.has(c[3]))));
      return box;
    }));
    const ex = el("div", "rp-extras");
    if (r) {
      if (r.found_face_up) ex.append(el("span", "chip bad", r.found_face_up + " found face up"));
      if (r.stub_count !== null) ex.append(el("span", "chip " + (r.stub_correct === false ? "bad" : "good"), "stub counted " + r.stub_count + " · deck " + r.deck_total));
      if (r.stub_discarded) ex.append(el("span", "chip", "stub in the discard rack"));
      if (r.dice) ex.append(el("span", "chip", "dice " + r.dice.join(" + ") + " = " + r.dice.reduce((a, b) => a + b, 0) + (r.total_announced !== null ? " (announced " + r.total_announced + ")" : "")));
      for (const [p, st] of Object.entries(r.stacks)) ex.append(el("span", "chip", "stack " + st.stack + " → " + p + " (" + st.cards + ")"));
    }
    ex.append(el("span", "chip", "rounds since a stub count: " + s.stub_run + " of " + s.stub_window));
    $("rp-extras").replaceChildren(ex);
    const decks = el("div");
    for (const d of s.decks) decks.append(el("div", "small", "Deck " + d.deck_id + (d.deck_id === s.current_deck ? " (current)" : "") + ": " + d.status));
    for (const d of s.devices) decks.append(el("div", "small", d.type.toLowerCase().replace("_", " ") + " " + d.device_id + ": " + d.status));
    if (!s.decks.length && !s.devices.length) decks.append(el("div", "muted small", removedBefore ? "none at the table" : "none recorded yet"));
    if (removedBefore) decks.append(el("div", "muted small", removedBefore + (removedBefore === 1 ? " deck" : " decks") + " removed from the table before this window: not listed while removed"));
    $("rp-decks").replaceChildren(decks);
    $("rp-remedies").replaceChildren(...(s.remedies.length ? s.remedies.map((o) => el("div", "small" + (o.overdue ? " st-overdue" : ""), o.rule_id + " (round " + (o.round_id || "-") + "): " + (o.pending.join("; ") || "done") + (o.overdue ? " — OVERDUE" : ""))) : [el("div", "muted small", "none owed")]));
    const list = [...seen.values()].filter((x) => x.step <= at).sort((a, b) => a.step - b.step);
    $("rp-findings").replaceChildren(...(list.length ? list.map((x) => {
      const li = el("li", x.step === at ? "rp-here" : "");
      const a = el("a", "", x.f.rule_id); a.href = "/findings/" + x.f.finding_id;
      li.append(a, el("span", "muted small", " " + x.f.status + " at step " + (x.step + 1)));
      return li;
    }) : [el("li", "muted", "none yet")]));
  }
  $("rp-first").addEventListener("click", () => step(0));
  $("rp-prev").addEventListener("click", () => step(at - 1));
  $("rp-next").addEventListener("click", () => step(at + 1));
  $("rp-last").addEventListener("click", () => step(total - 1));
  slider.addEventListener("input", () => step(parseInt(slider.value, 10)));
  document.addEventListener("keydown", (e) => {
    if (e.target && ["INPUT", "TEXTAREA", "SELECT"].includes(e.target.tagName)) return;  // the slider moves itself
    const moves = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: total - 1 };
    if (e.key in moves) { e.preventDefault(); step(moves[e.key]); }
  });
  fetchPage(1).then((list) => {
    if (!list) return;
    status.textContent = total + " events" + (total > size ? ", loaded " + size + " at a time" : "") + ".";
    draw(list[0]);
    root.focus();
  });
})();
