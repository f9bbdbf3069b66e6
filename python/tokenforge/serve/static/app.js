// tokenforge playground: the page's whole behaviour. No dependencies, nothing fetched but this server's API.
// State lives in the URL hash (t=text, k=tokenizer (repeated), ws=1, chunk=on|off, da=/db= the compared pair,
// m=chat and c=the conversation's JSON in chat mode), so a reload or a shared link shows the same view.
"use strict";

const $ = (id) => document.getElementById(id);
const SAMPLE = "Tokenizers cut text into pieces: a naïve café, ünïcödé, 日本語 and 🙂.\n" +
  "def greet(name):\n    return f\"Hello, {name}!\"  # 12345 + 678\n";
const SAMPLE_CHAT = JSON.stringify({ messages: [
  { role: "system", content: "Answer briefly." },
  { role: "user", content: "What is 2 + 2? Reply in 日本語 too." },
  { role: "assistant", content: "4 (四)." },
] }, null, 1);
const RENDER_LIMIT = 20000;  // tokens drawn per panel; the counts cover the whole text

let TOKS = [];            // GET /api/tokenizers
let MAX_TEXT = 0;
const byName = new Map(); // name -> tokenizer description
const results = new Map();// name -> POST /api/encode answer (for the current text and chunking)
const state = { text: "", on: [], ws: false, chunk: "", da: "", db: "", mode: "text", conv: "" };
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
  state.mode = h.get("m") === "chat" ? "chat" : "text";
  state.conv = h.has("c") ? h.get("c") : SAMPLE_CHAT;
}

function writeHash() {
  const h = new URLSearchParams();
  h.set("t", state.text);
  for (const n of state.on) h.append("k", n);
  if (state.ws) h.set("ws", "1");
  if (state.chunk) h.set("chunk", state.chunk);
  if (state.da) h.set("da", state.da);
  if (state.db) h.set("db", state.db);
  if (state.mode === "chat") {
    h.set("m", "chat");
    h.set("c", state.conv);
  }
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
  $("mode").value = state.mode;
  $("conv").value = state.conv;
  $("text").hidden = state.mode === "chat";
  $("conv").hidden = state.mode !== "chat";
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
  $("conv").addEventListener("input", () => {
    state.conv = $("conv").value;
    document.body.dataset.rendered = "0";
    clearTimeout(timer);
    timer = setTimeout(() => changed(true), 150);
  });
  $("mode").addEventListener("change", () => {
    state.mode = $("mode").value;
    syncControls();
    changed(true);
  });
  $("ws").addEventListener("change", () => { state.ws = $("ws").checked; changed(false); });
  $("chunk").addEventListener("change", () => { state.chunk = $("chunk").value; changed(true); });
}

function wanted() {
  const names = [...state.on];
  for (const n of [state.da, state.db]) if (n && !names.includes(n)) names.push(n);
  return names;
}

async function encodeOne(name, conversation) {
  const t = byName.get(name);
  let body = { tokenizer: name, text: state.text, details: true };
  if (conversation !== undefined) body = { tokenizer: name, conversation, details: true };
  else if (t.chunking !== null && state.chunk) body.chunking = state.chunk === "on";
  const r = await fetch(conversation !== undefined ? "/api/chat" : "/api/encode", {
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
  let conversation;
  if (state.mode === "chat") {
    try {
      conversation = JSON.parse(state.conv);
    } catch (e) {
      $("status").textContent = "the conversation is not JSON: " + e.message;
      for (const n of missing) results.set(n, { error: "no conversation to render" });
      render();
      document.body.dataset.rendered = "1";
      return;
    }
  } else if (new TextEncoder().encode(state.text).length > MAX_TEXT) {
    $("status").textContent = `the text is over the server's limit of ${MAX_TEXT.toLocaleString()} bytes`;
  }
  const got = await Promise.all(missing.map((n) => encodeOne(n, conversation).catch((e) => ({ error: String(e) }))));
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
    if (t.chunking !== null) famText += `, chunking ${chunkingOf(t) ? "on" : "off"}`;
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
    if (res.exact === false && !res.unencoded) {
      const note = document.createElement("span");
      note.className = "note";
      note.textContent = t.encoding === "latin-1"
        ? "  (reads latin1 text: other characters were replaced)"
        : "  (the tokenizer normalised the text before cutting it)";
      stats.append(note);
    }
    if (res.unencoded) {
      const note = document.createElement("span");
      note.className = "note";
      const chars = res.unencoded.reduce((a, g) => a + [...g[1]].length, 0);
      note.textContent = res.missing && res.missing.length
        ? `  (no ${res.missing.join(" ")}: marked where they belong)`
        : `  (cannot encode ${chars.toLocaleString()} character${chars === 1 ? "" : "s"}: marked, the rest is cut)`;
      stats.append(note);
    }
    if (res.mask) {
      const trained = res.mask.reduce((a, m) => a + m, 0);
      stats.append(` · ${trained.toLocaleString()} trained (mask 1)`);
    }
    view.append(drawTokens(res, name));
    sec.append(idList(res));
  }
  renderDiff();
}

// the ids of one panel as a list to copy (JSON, as tiktoken and transformers print them)
function idList(res) {
  const box = document.createElement("div");
  box.className = "idlist";
  const head = document.createElement("div");
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy";
  copy.textContent = "copy ids";
  const area = document.createElement("textarea");
  area.className = "ids";
  area.readOnly = true;
  area.rows = 2;
  area.spellcheck = false;
  area.value = "[" + res.ids.join(", ") + "]";
  copy.addEventListener("click", async () => {
    area.select();
    try {
      await navigator.clipboard.writeText(area.value);
      copy.textContent = "copied";
    } catch (e) {  // no clipboard permission: the list is selected, Ctrl-C copies it
      copy.textContent = "selected: press Ctrl-C";
    }
  });
  head.append(copy, ` ${res.ids.length.toLocaleString()} ids`);
  box.append(head, area);
  return box;
}

// A byte piece shows the character(s) it holds bytes of; a character cut between tokens shows in each of them,
// with which of its bytes that token holds (1-based, "2–3/3"), and the tokens that share it sit in one group.
function fragLabel(f) {
  return f.from === 0 && f.to === f.of ? "" : (f.to - f.from === 1 ? `${f.to}` : `${f.from + 1}–${f.to}`) + `/${f.of}`;
}

function drawPart(span, frags) {
  span.textContent = "";
  for (const f of frags) {
    if (f.char === null) {
      span.append("⟨?⟩");
      continue;
    }
    span.append(visible(f.char));
    const label = fragLabel(f);
    if (label) {
      const sub = document.createElement("sub");
      sub.textContent = label;
      span.append(sub);
    }
  }
  span.dataset.frags = frags.map((f) => `${f.char === null ? "?" : f.char}:${f.from}-${f.to}/${f.of}`).join(" ");
}

function drawTokens(res, name) {
  const frag = document.createDocumentFragment();
  const n = res.ids.length;
  const shown = Math.min(n, RENDER_LIMIT);
  const gaps = res.unencoded || [];
  let g = 0;
  let group = null, groupAt = -1;
  const missing = (text) => {
    const m = document.createElement("span");
    m.className = "missing";
    m.textContent = visible(text);
    m.title = `${name} cannot encode this`;
    return m;
  };
  const special = new Set(Object.entries(res.details || {}).filter(([, d]) => d.special !== undefined).map(([i]) => i));
  for (let k = 0; k < shown; k++) {
    while (g < gaps.length && gaps[g][0] <= k) { group = null; frag.append(missing(gaps[g++][1])); }
    const span = document.createElement("span");
    const p = res.pieces[k];
    const frags = res.parts && res.parts[String(k)];
    span.className = "tok c" + (k % 8) + (typeof p === "string" ? "" : " hex") + (frags ? " part" : "");
    if (res.mask) span.className += res.mask[k] ? " m1" : " m0";
    if (special.has(String(res.ids[k]))) span.className += " special";
    span.dataset.id = String(res.ids[k]);
    span.dataset.k = String(k);
    if (frags) drawPart(span, frags); else span.textContent = pieceText(p);
    const first = frags && frags[0], last = frags && frags[frags.length - 1];
    if (!(first && first.from > 0 && group && first.at === groupAt)) group = null;
    const open = last && last.to < last.of;
    if (!group && open) {
      group = document.createElement("span");
      group.className = "chargroup";
      frag.append(group);
    }
    (group || frag).append(span);
    if (group && open) groupAt = last.at; else group = null;
  }
  while (shown === n && g < gaps.length) frag.append(missing(gaps[g++][1]));
  if (shown < n) frag.append(`\n… ${(n - shown).toLocaleString()} more tokens not drawn`);
  return frag;
}

function chunkingOf(t) {
  return state.chunk ? state.chunk === "on" : t.chunking;
}

// ---- differences --------------------------------------------------------------------------------------------
// Boundaries are compared as offsets into the text's UTF-8 bytes: a UTF-8 tokenizer's are its own, a latin1 one's
// characters are mapped to where they start in UTF-8. A cut inside a character is its own boundary (class
// "inside"), drawn just after the character it cuts. A tokenizer that changed the text (exact: false) has no
// positions in it to compare.
function layout(text) {
  // for every UTF-8 byte offset: the UTF-16 index of the character it starts (-1 inside one); and for every
  // character (by index in code points), its UTF-8 start
  const starts = [];
  const map = new Int32Array(new TextEncoder().encode(text).length + 1).fill(-1);
  let b = 0, u = 0;
  for (const ch of text) {
    map[b] = u;
    starts.push(b);
    const cp = ch.codePointAt(0);
    b += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    u += ch.length;
  }
  map[b] = u;
  starts.push(b);
  return { map, starts };
}

function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : (c >= 0xd800 && c < 0xdc00) ? (i++, 4) : 3;
  }
  return n;
}

function cuts(res, encoding, lay) {
  const out = new Set();
  let pos = 0;
  const last = res.pieces.length - 1;
  res.pieces.forEach((p, k) => {
    pos += typeof p === "string" ? (encoding === "latin-1" ? p.length : utf8Length(p)) : p.hex.length / 2;
    if (k !== last) out.add(encoding === "latin-1" ? lay.starts[pos] : pos);
  });
  return out;
}

function renderDiff() {
  const sec = $("diff");
  const { da, db } = state;
  if (!da || !db || da === db || state.mode === "chat") { sec.hidden = true; return; }
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
  const text = state.text;
  const lay = layout(text);
  const ca = cuts(ra, byName.get(da).encoding, lay), cb = cuts(rb, byName.get(db).encoding, lay);
  const all = [...new Set([...ca, ...cb])].sort((x, y) => x - y);
  let onlyA = 0, onlyB = 0, inside = 0, prev = 0, drawn = 0;
  const frag = document.createDocumentFragment();
  for (const byte of all) {
    const kind = ca.has(byte) && cb.has(byte) ? "both" : ca.has(byte) ? "a" : "b";
    if (kind === "a") onlyA++;
    if (kind === "b") onlyB++;
    let at = lay.map[byte], into = false;
    if (at < 0) {  // inside a character: after it, marked so
      into = true;
      inside++;
      let s = byte;
      while (lay.map[s] < 0) s--;
      at = lay.map[s];
    }
    if (drawn >= RENDER_LIMIT) continue;  // counted, not drawn
    drawn++;
    const upto = into ? at + (text.codePointAt(at) > 0xffff ? 2 : 1) : at;
    if (upto > prev) frag.append(visible(text.slice(prev, upto)));
    prev = Math.max(prev, upto);
    const mark = document.createElement("span");
    mark.className = "cut " + kind + (into ? " inside" : "");
    mark.dataset.pos = String(at);
    mark.dataset.byte = String(byte);
    const who = kind === "both" ? "both cut" : `only ${kind === "a" ? da : db} cuts`;
    mark.title = into ? `${who} inside ${JSON.stringify(text.slice(at, upto))}` : `${who} here`;
    frag.append(mark);
  }
  frag.append(drawn === all.length ? visible(text.slice(prev))
    : `… ${(all.length - drawn).toLocaleString()} more boundaries not drawn`);
  view.append(frag);
  st.textContent = `${onlyA + onlyB} boundaries differ: ${onlyA} only in ${da}, ${onlyB} only in ${db}; ` +
    `${all.length - onlyA - onlyB} shared` + (inside ? `; ${inside} inside a character (dashed)` : "");
  st.dataset.differ = String(onlyA + onlyB);
  st.dataset.inside = String(inside);
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
  for (const f of (res.parts && res.parts[String(k)]) || []) {
    if (f.char === null) continue;
    const cp = "U+" + f.char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    const which = f.from === 0 && f.to === f.of ? `all ${f.of} bytes` : `bytes ${f.from + 1}–${f.to} of ${f.of}`;
    lines.push(["", `${which} of ${JSON.stringify(f.char)} (${cp})`]);
  }
  if (res.mask) lines.push(["mask", ` ${res.mask[k]} (${res.mask[k] ? "trained on" : "context only"})`]);
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
