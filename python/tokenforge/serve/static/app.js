// tokenforge playground: the page's whole behaviour. No dependencies, nothing fetched but this server's API.
// State lives in the URL hash (t=text, k=tokenizer (repeated), ws=1, chunk=on|off, da=/db= the compared pair),
// so a reload or a shared link shows the same view.
"use strict";

const $ = (id) => document.getElementById(id);
const SAMPLE = "Tokenizers cut text into pieces: a naïve café, ünïcödé, 日本語 and 🙂.\n" +
  "def greet(name):\n    return f\"Hello, {name}!\"  # 12345 + 678\n";
const RENDER_LIMIT = 20000;  // tokens drawn per panel; the counts cover the whole text

let TOKS = [];            // GET /api/tokenizers
let MAX_TEXT = 0;
const byName = new Map(); // name -> tokenizer description
const results = new Map();// name -> POST /api/encode answer (for the current text and chunking)
const state = { text: "", on: [], ws: false, chunk: "", da: "", db: "" };
let seq = 0;
let timer = 0;

function readHash() {
  const raw = location.hash.replace(/^#/, "");
  const h = new URLSearchParams(raw);
  state.text = h.has("t") ? h.get("t") : SAMPLE;
  state.on = h.has("k") ? h.getAll("k").filter((n) => byName.has(n)) : TOKS.map((t) => t.name);
  state.ws = h.get("ws") === "1";
  state.chunk = ["on", "off"].includes(h.get("chunk")) ? h.get("chunk") : "";
  state.da = byName.has(h.get("da")) ? h.get("da") : "";
  state.db = byName.has(h.get("db")) ? h.get("db") : "";
}

function writeHash() {
  const h = new URLSearchParams();
  h.set("t", state.text);
  for (const n of state.on) h.append("k", n);
  if (state.ws) h.set("ws", "1");
  if (state.chunk) h.set("chunk", state.chunk);
  if (state.da) h.set("da", state.da);
  if (state.db) h.set("db", state.db);
  try {
    history.replaceState(null, "", "#" + h.toString());
    $("status").dataset.url = "";
  } catch (e) {  // a browser's limit on the length of a URL (Chromium: 2 MB)
    $("status").dataset.url = "too long";
  }
}

function syncControls() {
  $("text").value = state.text;
  $("ws").checked = state.ws;
  $("chunk").value = state.chunk;
  for (const box of document.querySelectorAll("#tok-list input")) box.checked = state.on.includes(box.value);
  $("diff-a").value = state.da;
  $("diff-b").value = state.db;
}

function buildControls() {
  const list = $("tok-list");
  for (const t of TOKS) {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = t.name;
    box.addEventListener("change", () => {
      state.on = TOKS.map((x) => x.name).filter((n) => n === t.name ? box.checked : state.on.includes(n));
      changed(false);
    });
    label.append(box, " " + t.name);
    list.append(label);
  }
  for (const id of ["diff-a", "diff-b"]) {
    const sel = $(id);
    sel.append(new Option("—", ""));
    for (const t of TOKS) sel.append(new Option(t.name, t.name));
    sel.addEventListener("change", () => {
      state[id === "diff-a" ? "da" : "db"] = sel.value;
      changed(false);
    });
  }
  $("text").addEventListener("input", () => {
    state.text = $("text").value;
    document.body.dataset.rendered = "0";
    clearTimeout(timer);
    timer = setTimeout(() => changed(true), 150);
  });
  $("ws").addEventListener("change", () => { state.ws = $("ws").checked; changed(false); });
  $("chunk").addEventListener("change", () => { state.chunk = $("chunk").value; changed(true); });
}

function wanted() {
  const names = [...state.on];
  for (const n of [state.da, state.db]) if (n && !names.includes(n)) names.push(n);
  return names;
}

async function encodeOne(name) {
  const t = byName.get(name);
  const body = { tokenizer: name, text: state.text, details: true };
  if (t.family === "lz78" && state.chunk) body.chunking = state.chunk === "on";
  const r = await fetch("/api/encode", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const answer = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) return { error: `${r.status}: ${answer.error || r.statusText}` };
  return answer;
}

// refetch: the text or the chunking changed (otherwise only the view did)
async function changed(refetch) {
  writeHash();
  const my = ++seq;
  document.body.dataset.rendered = "0";
  if (refetch) results.clear();
  const missing = wanted().filter((n) => !results.has(n));
  $("status").textContent = $("status").dataset.url ? "this text is too long to keep in the address bar" : "";
  if (new TextEncoder().encode(state.text).length > MAX_TEXT) {
    $("status").textContent = `the text is over the server's limit of ${MAX_TEXT.toLocaleString()} bytes`;
  }
  const got = await Promise.all(missing.map((n) => encodeOne(n).catch((e) => ({ error: String(e) }))));
  if (my !== seq) return;  // a newer change is on its way
  missing.forEach((n, i) => results.set(n, got[i]));
  render();
  document.body.dataset.rendered = "1";
}

function visible(text) {
  if (!state.ws) return text;
  return text.replace(/ /g, "·").replace(/\t/g, "→\t").replace(/\r/g, "␍").replace(/\n/g, "↵\n");
}

function pieceText(p) {
  return typeof p === "string" ? visible(p) : "⟨" + p.hex.match(/../g).join(" ") + "⟩";
}

function fmt(x) { return Number.isFinite(x) ? x.toFixed(2) : "–"; }

function render() {
  const panels = $("panels");
  panels.textContent = "";
  for (const name of state.on) {
    const t = byName.get(name);
    const res = results.get(name);
    const sec = document.createElement("section");
    sec.className = "panel";
    sec.dataset.name = name;
    const h = document.createElement("h2");
    h.append(name + " ");
    const fam = document.createElement("span");
    fam.className = "fam";
    let famText = `${t.family}, ${t.vocab_size.toLocaleString()} ids`;
    if (t.family === "lz78") famText += `, chunking ${chunkingOf(t) ? "on" : "off"}`;
    fam.textContent = famText;
    h.append(fam);
    const stats = document.createElement("p");
    stats.className = "stats";
    const view = document.createElement("div");
    view.className = "tokens";
    sec.append(h, stats, view);
    panels.append(sec);
    if (!res || res.error) {
      stats.innerHTML = "";
      stats.className = "stats err";
      stats.textContent = res ? res.error : "…";
      continue;
    }
    const n = res.ids.length;
    stats.innerHTML = "";
    const parts = [[n.toLocaleString(), " tokens · "], [fmt(res.num_bytes / n), " bytes/token · "],
      [fmt(res.num_chars / n), " chars/token"]];
    for (const [v, label] of parts) {
      const b = document.createElement("b");
      b.textContent = v;
      stats.append(b, label);
    }
    stats.dataset.tokens = String(n);
    if (!res.exact) {
      const note = document.createElement("span");
      note.className = "note";
      note.textContent = t.encoding === "latin-1"
        ? "  (reads latin1 text: other characters were replaced)"
        : "  (the tokenizer normalised the text before cutting it)";
      stats.append(note);
    }
    const frag = document.createDocumentFragment();
    const shown = Math.min(n, RENDER_LIMIT);
    for (let k = 0; k < shown; k++) {
      const span = document.createElement("span");
      const p = res.pieces[k];
      span.className = "tok c" + (k % 8) + (typeof p === "string" ? "" : " hex");
      span.dataset.id = String(res.ids[k]);
      span.dataset.k = String(k);
      span.textContent = pieceText(p);
      frag.append(span);
    }
    if (shown < n) frag.append(`\n… ${(n - shown).toLocaleString()} more tokens not drawn`);
    view.append(frag);
  }
  renderDiff();
}

function chunkingOf(t) {
  return state.chunk ? state.chunk === "on" : t.chunking;
}

// ---- differences --------------------------------------------------------------------------------------------
// Boundaries are placed in the text's own UTF-16 positions: a UTF-8 tokenizer's byte offsets are mapped through
// the text's UTF-8 layout (a cut inside a character is drawn at the character's start), a latin1 one's bytes are
// its characters. A tokenizer that changed the text (exact: false) has no positions in it to compare.
function byteToIndex(text) {
  const map = new Int32Array(new TextEncoder().encode(text).length + 1).fill(-1);
  let b = 0, u = 0;
  for (const ch of text) {
    map[b] = u;
    const cp = ch.codePointAt(0);
    b += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    u += ch.length;
  }
  map[b] = u;
  return map;
}

function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : (c >= 0xd800 && c < 0xdc00) ? (i++, 4) : 3;
  }
  return n;
}

function cuts(res, encoding, map) {
  const out = new Set();
  let pos = 0;
  const last = res.pieces.length - 1;
  res.pieces.forEach((p, k) => {
    pos += typeof p === "string" ? (encoding === "latin-1" ? p.length : utf8Length(p)) : p.hex.length / 2;
    if (k === last) return;
    if (encoding === "latin-1") { out.add(pos); return; }
    let b = pos;
    while (b > 0 && map[b] < 0) b--;
    out.add(map[b]);
  });
  return out;
}

function renderDiff() {
  const sec = $("diff");
  const { da, db } = state;
  if (!da || !db || da === db) { sec.hidden = true; return; }
  sec.hidden = false;
  $("diff-title").textContent = `differences: ${da} vs ${db}`;
  $("diff-a-name").textContent = da;
  $("diff-b-name").textContent = db;
  const view = $("diff-view");
  view.textContent = "";
  const ra = results.get(da), rb = results.get(db);
  const st = $("diff-stats");
  if (!ra || !rb || ra.error || rb.error) { st.textContent = "…"; return; }
  if (!ra.exact || !rb.exact) {
    st.textContent = `cannot compare: ${!ra.exact ? da : db} changed the text before cutting it`;
    return;
  }
  const map = byteToIndex(state.text);
  const ca = cuts(ra, byName.get(da).encoding, map), cb = cuts(rb, byName.get(db).encoding, map);
  const all = [...new Set([...ca, ...cb])].sort((x, y) => x - y);
  let onlyA = 0, onlyB = 0, prev = 0, drawn = 0;
  const frag = document.createDocumentFragment();
  for (const pos of all) {
    const kind = ca.has(pos) && cb.has(pos) ? "both" : ca.has(pos) ? "a" : "b";
    if (kind === "a") onlyA++;
    if (kind === "b") onlyB++;
    if (drawn >= RENDER_LIMIT) continue;  // counted, not drawn
    drawn++;
    frag.append(visible(state.text.slice(prev, pos)));
    const mark = document.createElement("span");
    mark.className = "cut " + kind;
    mark.dataset.pos = String(pos);
    mark.title = kind === "both" ? "both cut here" : `only ${kind === "a" ? da : db} cuts here`;
    frag.append(mark);
    prev = pos;
  }
  frag.append(drawn === all.length ? visible(state.text.slice(prev))
    : `… ${(all.length - drawn).toLocaleString()} more boundaries not drawn`);
  view.append(frag);
  st.textContent = `${onlyA + onlyB} boundaries differ: ${onlyA} only in ${da}, ${onlyB} only in ${db}; ` +
    `${all.length - onlyA - onlyB} shared`;
  st.dataset.differ = String(onlyA + onlyB);
}

// ---- hover --------------------------------------------------------------------------------------------------
function describePiece(p) {
  return typeof p === "string" ? JSON.stringify(p) : `bytes ${p.hex.match(/../g).join(" ")} (not valid UTF-8 alone)`;
}

function describeDetail(d) {
  if (!d) return [];
  const lines = [];
  if (d.special !== undefined) lines.push(`special token ${d.special}`);
  if (d.byte !== undefined) lines.push(`byte 0x${d.byte.toString(16).padStart(2, "0")}`);
  if (d.left) lines.push(`merge of ${describePiece(d.left.piece)} (${d.left.id}) + ${describePiece(d.right.piece)} (${d.right.id})`);
  if (d.source !== undefined) lines.push(`added by source ${JSON.stringify(d.source)}`);
  if (d.parent && d.char !== undefined) {
    lines.push(`parent ${JSON.stringify(d.parent.pattern)} (code ${d.parent.code}) + char ${JSON.stringify(d.char)}`);
  }
  if (d.parent && d.edge !== undefined) {
    lines.push(`parent ${JSON.stringify(d.parent.pattern)} (node ${d.parent.node}) + edge ${JSON.stringify(d.edge)}`);
  }
  if (d.flat) lines.push("flat dictionary entry (no parent)");
  if (d.n !== undefined) lines.push(`${d.n}-gram` + (d.count !== undefined ? `, counted ${d.count.toLocaleString()} times` : ""));
  return lines;
}

function showTip(span, ev) {
  const sec = span.closest(".panel");
  const res = results.get(sec.dataset.name);
  const k = Number(span.dataset.k);
  const id = res.ids[k];
  const p = res.pieces[k];
  const tip = $("tip");
  tip.textContent = "";
  const lines = [[`id`, ` ${id}   token ${k + 1} of ${res.ids.length}`], ["piece", " " + describePiece(p)]];
  for (const line of describeDetail(res.details && res.details[id])) lines.push(["", line]);
  lines.forEach(([key, value], i) => {
    if (i) tip.append("\n");
    if (key) {
      const s = document.createElement("span");
      s.className = "k";
      s.textContent = key;
      tip.append(s);
    }
    tip.append(value);
  });
  tip.dataset.id = String(id);
  tip.hidden = false;
  const x = Math.min(ev.clientX + 12, window.innerWidth - tip.offsetWidth - 8);
  const y = ev.clientY + 18 + tip.offsetHeight > window.innerHeight ? ev.clientY - tip.offsetHeight - 10 : ev.clientY + 18;
  tip.style.left = Math.max(4, x) + "px";
  tip.style.top = Math.max(4, y) + "px";
}

function hookHover() {
  const panels = $("panels");
  panels.addEventListener("mouseover", (ev) => {
    const span = ev.target.closest && ev.target.closest(".tok");
    if (span) showTip(span, ev); else $("tip").hidden = true;
  });
  panels.addEventListener("mouseleave", () => { $("tip").hidden = true; });
}

async function main() {
  const r = await fetch("/api/tokenizers");
  const listing = await r.json();
  TOKS = listing.tokenizers;
  MAX_TEXT = listing.max_text;
  for (const t of TOKS) byName.set(t.name, t);
  buildControls();
  hookHover();
  readHash();
  syncControls();
  window.addEventListener("hashchange", () => { readHash(); syncControls(); changed(true); });
  await changed(true);
}

main().catch((e) => { $("status").textContent = "could not start: " + e; });
