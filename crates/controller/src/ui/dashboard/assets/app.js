// MMS dashboard (issue #19): reads the REST API of the ssc that served this page with the
// operator's bearer token and draws it. Plain JavaScript and SVG, no library, no network
// besides this origin. The token lives in sessionStorage (this tab only) and leaves the
// browser only in the Authorization header of fetch() calls to this origin.
"use strict";

const TOKEN_KEY = "mms-dashboard-token";
const REFRESH_MS = 3000;
const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

const $ = (id) => document.getElementById(id);
let timer = null;
let updates = 0;

// ---------------------------------------------------------------------------------------------
// Auth and API
// ---------------------------------------------------------------------------------------------

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

class AuthError extends Error {}

async function api(path) {
  const resp = await fetch(path, {
    headers: { Authorization: "Bearer " + token(), Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  if (resp.status === 401 || resp.status === 403) {
    let why = resp.status === 401 ? "token refused" : "token not allowed";
    try { why = (await resp.json()).error || why; } catch (_) { /* keep */ }
    throw new AuthError(why);
  }
  if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
  return resp.json();
}

function showLogin(message) {
  if (timer) clearTimeout(timer);
  timer = null;
  $("dash").hidden = true;
  $("login").hidden = false;
  $("logout").hidden = true;
  $("login-error").textContent = message || "";
  setStatus("not logged in", false);
  document.body.dataset.state = "login";
}

function showDash() {
  $("login").hidden = true;
  $("dash").hidden = false;
  $("logout").hidden = false;
  document.body.dataset.state = "dashboard";
}

function setStatus(text, bad) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("bad", !!bad);
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function mbps(bps) {
  const m = (bps || 0) / 1e6;
  return m >= 100 ? m.toFixed(0) : m >= 10 ? m.toFixed(1) : m.toFixed(2);
}

function ago(ms) {
  if (ms === null || ms === undefined) return "never";
  const s = ms / 1000;
  return s < 90 ? s.toFixed(0) + " s ago" : (s / 60).toFixed(0) + " min ago";
}

function clock(unixMs) {
  return new Date(unixMs).toLocaleTimeString([], { hour12: false });
}

function row(tbody, cells, attrs) {
  const tr = el("tr", attrs);
  for (const c of cells) {
    const td = el("td", c.cls ? { class: c.cls } : {});
    if (c.node) td.appendChild(c.node); else td.textContent = c.text;
    tr.appendChild(td);
  }
  tbody.appendChild(tr);
  return tr;
}

// ---------------------------------------------------------------------------------------------
// Topology: branches on an ellipse, WAN ports on their boxes, member paths as curves through
// the transit branches' ports, width by forward rate.
// ---------------------------------------------------------------------------------------------

function layout(branches) {
  const W = 560, H = 330, cx = W / 2, cy = H / 2 + 6, rx = 200, ry = 118;
  const pos = new Map();
  const n = branches.length;
  branches.forEach((b, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(n, 1);
    const x = cx + rx * Math.cos(a), y = cy + ry * Math.sin(a);
    const ports = new Map();
    const k = b.wan.length;
    b.wan.forEach((p, j) => {
      ports.set(p.port, { x: x - 36 + (72 * (j + 0.5)) / Math.max(k, 1), y: y + (y < cy ? 16 : -16) });
    });
    pos.set(b.id, { x, y, ports });
  });
  return pos;
}

// "1b>3b>3a>2a" → ports [[1,"b"],[3,"b"],[3,"a"],[2,"a"]].
function hops(notation) {
  return notation.split(">").map((s) => [parseInt(s, 10), s.replace(/^[0-9]+/, "")]);
}

function drawTopology(inv, groups, memberRates) {
  const root = $("topology");
  clear(root);
  const branches = inv.branches || [];
  const pos = layout(branches);
  const maxRate = Math.max(1, ...[...memberRates.values()].map((r) => r.forward_bits_per_s || 0));
  const links = svg("g", {});
  root.appendChild(links);
  let idx = 0;
  for (const g of groups) {
    for (const m of g.members) {
      const h = hops(m.path);
      const rate = (memberRates.get(m.code) || {}).forward_bits_per_s || 0;
      const width = 1 + 5 * Math.sqrt(rate / maxRate);
      const color = COLORS[(g.id - 1 + COLORS.length) % COLORS.length];
      const bend = ((idx % 8) - 3.5) * 7;
      idx++;
      let d = "";
      for (let i = 0; i + 1 < h.length; i += 2) {
        const a = pos.get(h[i][0]), b = pos.get(h[i + 1][0]);
        if (!a || !b) continue;
        const p = a.ports.get(h[i][1]) || a, q = b.ports.get(h[i + 1][1]) || b;
        const mx = (p.x + q.x) / 2, my = (p.y + q.y) / 2;
        const len = Math.hypot(q.x - p.x, q.y - p.y) || 1;
        const nx = -(q.y - p.y) / len, ny = (q.x - p.x) / len;
        d += (d ? " L" : "M") + p.x.toFixed(1) + " " + p.y.toFixed(1) +
          " Q" + (mx + nx * bend).toFixed(1) + " " + (my + ny * bend).toFixed(1) +
          " " + q.x.toFixed(1) + " " + q.y.toFixed(1);
      }
      const path = svg("path", {
        d, class: "member", stroke: color, "stroke-width": width.toFixed(1),
        "data-code": m.code,
      });
      path.appendChild(svg("title", {}, m.code + " " + m.path + " (" + g.source + "→" +
        g.destination + " G" + g.id + "): " + mbps(rate) + " Mbit/s"));
      links.appendChild(path);
    }
  }
  for (const b of branches) {
    const p = pos.get(b.id);
    const gb = svg("g", { "data-branch": b.id });
    gb.appendChild(svg("rect", { x: p.x - 42, y: p.y - 24, width: 84, height: 48, rx: 6, class: "branch-box" }));
    gb.appendChild(svg("text", { x: p.x, y: p.y + 4, "text-anchor": "middle", class: "branch-name" },
      b.id + " " + b.name));
    for (const w of b.wan) {
      const q = p.ports.get(w.port);
      gb.appendChild(svg("circle", { cx: q.x, cy: q.y, r: 6, class: "port" }));
      gb.appendChild(svg("text", { x: q.x, y: q.y + 3, "text-anchor": "middle", class: "port-label" },
        b.id + w.port));
    }
    gb.appendChild(svg("title", {}, b.name + ": " + b.wan.map((w) => b.id + w.port + " " + w.address +
      " (" + w.kind + ", " + w.capacity_mbps + " Mbit/s)").join(", ")));
    root.appendChild(gb);
  }
}

// ---------------------------------------------------------------------------------------------
// Time series: forward rate per pair (and per group when there are few pairs).
// ---------------------------------------------------------------------------------------------

function drawChart(history) {
  const root = $("chart");
  clear(root);
  const W = 560, H = 250, L = 46, R = 96, T = 8, B = 22;
  const pairs = history.series.filter((s) => s.kind === "pair");
  let shown = pairs;
  if (pairs.length <= 2) shown = pairs.concat(history.series.filter((s) => s.kind === "group"));
  shown = shown.slice(0, 10);
  $("chart-hint").textContent = "forward Mbit/s, one point per " + (history.period_ms / 1000) +
    " s, " + history.capacity + " points kept";
  // The x axis spans the points kept, at least a minute, at most the whole window.
  const now = history.last_ms || Date.now();
  let first = now;
  for (const s of shown) if (s.points.length) first = Math.min(first, s.points[0][0]);
  const span = Math.min(history.period_ms * history.capacity, Math.max(60000, now - first));
  const t0 = now - span;
  let max = 1e5;
  for (const s of shown) for (const p of s.points) max = Math.max(max, p[1]);
  const x = (t) => L + ((t - t0) / span) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    root.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    root.appendChild(svg("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end", class: "tick" }, mbps(v)));
  }
  for (let i = 0; i <= 5; i++) {
    const t = t0 + (span * i) / 5;
    root.appendChild(svg("text", { x: x(t), y: H - 6, "text-anchor": "middle", class: "tick" }, clock(t)));
  }
  root.appendChild(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  root.appendChild(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  shown.forEach((s, i) => {
    const name = s.kind === "pair" ? s.source + "→" + s.destination : s.source + "→" + s.destination + " G" + s.group;
    const color = s.kind === "pair" ? "#1d2b3a" : COLORS[i % COLORS.length];
    const pts = s.points.filter((p) => p[0] >= t0).map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1));
    if (pts.length > 0) {
      root.appendChild(svg("polyline", {
        points: pts.join(" "), fill: "none", stroke: color,
        "stroke-width": s.kind === "pair" ? 2 : 1.2, "data-series": name,
      }));
    }
    const last = s.points.length ? s.points[s.points.length - 1][1] : 0;
    root.appendChild(svg("text", { x: W - R + 6, y: T + 10 + 13 * i, fill: color, class: "legend" },
      name + " " + mbps(last)));
  });
  if (shown.length === 0) {
    root.appendChild(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "tick" },
      history.available ? "no samples yet" : "no history (the OpenFlow server does not run)"));
  }
}

// ---------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------

function bar(value, max) {
  const s = svg("svg", { viewBox: "0 0 90 8" });
  s.appendChild(svg("rect", { x: 0, y: 0, width: 90, height: 8, fill: "#eef0f3" }));
  s.appendChild(svg("rect", { x: 0, y: 0, width: (90 * Math.min(1, value / max)).toFixed(1), height: 8, fill: "#1f77b4" }));
  return s;
}

function drawMembers(groups, memberRates) {
  const tbody = $("members-table").tBodies[0];
  clear(tbody);
  const max = Math.max(1, ...[...memberRates.values()].map((r) => r.forward_bits_per_s || 0));
  for (const g of groups) {
    for (const m of g.members) {
      const r = memberRates.get(m.code) || {};
      row(tbody, [
        { text: m.code, cls: "code" },
        { text: g.source + "→" + g.destination + " G" + g.id },
        { text: m.path, cls: "code" },
        { text: mbps(r.forward_bits_per_s), cls: "num fwd" },
        { text: mbps(r.reverse_bits_per_s), cls: "num rev" },
        { node: bar(r.forward_bits_per_s || 0, max), cls: "bar" },
      ], { "data-code": m.code, "data-fwd-bps": String(Math.round(r.forward_bits_per_s || 0)) });
    }
  }
}

function drawGroups(weights, stats) {
  const tbody = $("groups-table").tBodies[0];
  clear(tbody);
  const rates = new Map((stats.groups || []).map((g) => [g.source + ">" + g.destination + ">" + g.group, g]));
  for (const p of weights.pairs) {
    for (const g of p.groups) {
      const r = rates.get(p.source + ">" + p.destination + ">" + g.group) || {};
      row(tbody, [
        { text: p.source + "→" + p.destination },
        { text: String(g.group) },
        { text: mbps(r.forward_bits_per_s), cls: "num" },
        { text: g.weight + "/" + p.scale, cls: "num" },
        { text: p.basis },
      ], { "data-group": p.source + "-" + p.destination + "-" + g.group });
    }
  }
}

function drawGateways(inv, gws, certs) {
  const tbody = $("gateways-table").tBodies[0];
  clear(tbody);
  const byBranch = new Map((gws.gateways || []).map((g) => [g.branch, g]));
  const now = Date.now() / 1000;
  for (const b of inv.branches || []) {
    const g = byBranch.get(b.id);
    const cert = (certs.certificates || [])
      .filter((c) => c.branch === b.id && !c.revoked)
      .sort((a, c) => c.serial - a.serial)[0];
    let state = { text: "never seen", cls: "bad" };
    if (g && g.connected) {
      const rep = g.last_report;
      if (rep && rep.healthy) state = { text: "up", cls: "ok" };
      // A branch without path groups of its own (a pure transit) has nothing to be up.
      else if (rep && rep.connections_total === 0) state = { text: "up (transit only)", cls: "ok" };
      else state = { text: "up, degraded", cls: "warn" };
    } else if (g) {
      state = { text: "down", cls: "bad" };
    }
    const rep = g && g.last_report;
    let cfg = { text: "-" };
    if (g && g.config_version_acked === g.config_version) cfg = { text: "current", cls: "ok" };
    else if (g) cfg = { text: g.config_version_acked ? "old" : "not acked", cls: "warn" };
    const days = cert ? (cert.not_after - now) / 86400 : null;
    const tr = row(tbody, [
      { text: String(b.id) },
      state,
      { text: g ? ago(g.last_report_age_ms) : "-" },
      cfg,
      { text: rep ? rep.connections_up + "/" + rep.connections_total : "-", cls: "num" },
      // Only certificates this ssc issued (enrolment, renewal) are known here; a gateway whose
      // files were provisioned another way (another CA, or ssc's CA files used by hand) has none.
      cert ? { text: "#" + cert.serial + ", " + days.toFixed(0) + " d", cls: days < 14 ? "warn" : "" }
        : { text: "not enrolled" },
    ], { "data-branch": String(b.id) });
    if (g) {
      tr.cells[3].title = "config version " + g.config_version + ", sent " + g.config_version_sent +
        ", acked " + g.config_version_acked;
    }
  }
}

function drawEvents(history, adaptive) {
  const ul = $("events");
  clear(ul);
  const head = adaptive.enabled ? "on" : "off (settings.adaptive.enabled)";
  ul.appendChild(el("li", {}, "adaptive: " + head + "; " + adaptive.pairs.map((p) =>
    p.source + "→" + p.destination + " " + p.status + " ξ " + mbps(p.xi_bps) + " Mbit/s, groups " +
    p.groups.join(",")).join("; ")));
  const events = history.events.slice().reverse();
  if (events.length === 0) ul.appendChild(el("li", { class: "note" }, "no path group added or retired yet"));
  for (const e of events) {
    const li = el("li", {});
    li.appendChild(el("span", { class: "when" }, clock(e.at_ms)));
    li.appendChild(document.createTextNode(e.source + "→" + e.destination + " " + e.kind + ": " + e.text));
    ul.appendChild(li);
  }
}

// ---------------------------------------------------------------------------------------------
// The refresh loop
// ---------------------------------------------------------------------------------------------

async function refresh() {
  timer = null;
  try {
    const [inv, groups, stats, weights, gws, adaptive, history, certs] = await Promise.all([
      api("/api/v1/inventory"), api("/api/v1/path-groups"), api("/api/v1/stats"),
      api("/api/v1/weights"), api("/api/v1/gateways"), api("/api/v1/adaptive"),
      api("/api/v1/history"), api("/api/v1/certificates").catch(() => ({ certificates: [] })),
    ]);
    const memberRates = new Map((stats.members || []).map((m) => [m.code, m]));
    drawTopology(inv, groups, memberRates);
    drawMembers(groups, memberRates);
    drawGroups(weights, stats);
    drawGateways(inv, gws, certs);
    drawEvents(history, adaptive);
    drawChart(history);
    updates++;
    document.body.dataset.updates = String(updates);
    setStatus("updated " + clock(Date.now()) + (stats.available ? "" : " (no OpenFlow statistics)"), false);
  } catch (e) {
    if (e instanceof AuthError) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(e.message);
      return;
    }
    setStatus("update failed: " + e.message, true);
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

function start() {
  showDash();
  if (!timer) refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("token");
    const t = input.value.trim();
    input.value = "";
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    start();
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin("");
  });
  if (token()) start(); else showLogin("");
});
