// jetpy dashboard: reads the monitoring endpoints of the server that serves it (/varz, /jsz,
// /connz, /routez, /gatewayz, /healthz) and redraws itself every few seconds. Every name the server
// reports is put into the page as text (textContent), never as markup.
"use strict";

const REFRESH_MS = Math.max(500, Number(new URLSearchParams(location.search).get("refresh")) || 2000);
const HISTORY = 90; // samples kept for the charts and sparklines
const MAX_ROWS = 500; // rows per table: a server with 10,000 streams still renders quickly

const state = { prev: null, rates: { msgsIn: [], msgsOut: [], bytesIn: [], bytesOut: [] }, streams: new Map() };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "title") node.title = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function num(n) { return Number(n || 0).toLocaleString("en-US"); }
function bytes(n) {
  n = Number(n || 0);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}
function limit(n, fmt) { return n === undefined || n < 0 ? "∞" : fmt(n); }
function duration(ns) {
  if (!ns) return "∞";
  let s = ns / 1e9;
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s >= size) return (s / size).toFixed(s % size ? 1 : 0) + unit;
  return s + "s";
}
function rate(x) { return x >= 100 ? num(Math.round(x)) : x.toFixed(1); }

async function getJSON(path) {
  const resp = await fetch(path, { cache: "no-store" });
  if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
  return resp.json();
}

function push(arr, v) { arr.push(v); if (arr.length > HISTORY) arr.shift(); }

function fillTable(id, rows, empty) {
  const body = document.querySelector("#" + id + " tbody");
  const frag = document.createDocumentFragment();
  if (!rows.length) {
    const cols = document.querySelectorAll("#" + id + " thead th").length;
    frag.append(el("tr", { class: "empty" }, el("td", { colspan: String(cols) }, empty)));
  }
  for (const cells of rows.slice(0, MAX_ROWS)) {
    frag.append(el("tr", {}, ...cells.map((c) => (c instanceof Node && c.tagName === "TD" ? c : el("td", {}, c)))));
  }
  body.replaceChildren(frag);
}

function drawLines(canvas, series, colors) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  ctx.clearRect(0, 0, w, h);
  const max = Math.max(1, ...series.flat());
  ctx.strokeStyle = "#e3e6ee";
  ctx.fillStyle = "#6b7385";
  ctx.font = "11px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = Math.round(h - 14 - (i * (h - 24)) / 4) + 0.5;
    ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(w, y); ctx.stroke();
    ctx.fillText(rate((max * i) / 4), 4, y - 2);
  }
  series.forEach((values, k) => {
    ctx.strokeStyle = colors[k];
    ctx.lineWidth = 2;
    ctx.beginPath();
    const start = HISTORY - values.length; // the newest sample at the right edge
    values.forEach((v, i) => {
      const x = ((start + i) * w) / (HISTORY - 1);
      const y = h - 14 - (v / max) * (h - 24);
      if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    });
    ctx.stroke();
  });
}

function sparkline(values) {
  const c = el("canvas", { width: "90", height: "18", class: "spark" });
  const ctx = c.getContext("2d");
  const max = Math.max(1, ...values);
  ctx.strokeStyle = "#2f6fdf";
  ctx.beginPath();
  const start = HISTORY - values.length;
  values.forEach((v, i) => {
    const x = ((start + i) * 90) / (HISTORY - 1), y = 17 - (v / max) * 16;
    if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
  });
  ctx.stroke();
  return c;
}

function fillBar(fraction) {
  const pct = Math.max(0, Math.min(1, fraction)) * 100;
  const bar = el("div", { class: "fill" + (pct >= 90 ? " high" : ""), title: pct.toFixed(1) + "%" }, el("div"));
  bar.firstChild.style.width = pct.toFixed(1) + "%";
  return el("td", {}, bar, " " + (fraction >= 0 ? pct.toFixed(0) + "%" : "–"));
}

function gatewayLinks(gatewayz) {
  const out = Object.entries(gatewayz.outbound_gateways || {}).map(([name, g]) => [name, g, g.configured ? "outbound" : "outbound, gossiped"]);
  const inb = Object.entries(gatewayz.inbound_gateways || {}).flatMap(([name, list]) => list.map((g) => [name, g, "inbound"]));
  return out.concat(inb);
}

function overview(varz, jsz, gatewayz) {
  const js = jsz && !jsz.disabled ? jsz : null;
  const cards = [
    ["Version", varz.version],
    ["Uptime", varz.uptime],
    ["Connections", num(varz.connections) + " / " + num(varz.total_connections)],
    ["Subscriptions", num(varz.subscriptions)],
    ["Messages in", num(varz.in_msgs)],
    ["Messages out", num(varz.out_msgs)],
    ["Bytes in", bytes(varz.in_bytes)],
    ["Bytes out", bytes(varz.out_bytes)],
    ["Slow consumers", num(varz.slow_consumers)],
    ["Cluster", varz.cluster && varz.cluster.name ? varz.cluster.name + " (" + num(varz.routes) + " routes)" : "not clustered"],
    ["Gateway", gatewayz.name ? gatewayz.name + " (" + num(Object.keys(gatewayz.outbound_gateways || {}).length) + " clusters)" : "no gateway"],
    ["CPU", varz.cpu + "%"],
    ["Memory", bytes(varz.mem)],
    ["Streams", js ? num(js.streams) : "JetStream off"],
    ["Consumers", js ? num(js.consumers) : "–"],
    ["JS storage", js ? bytes(js.storage) + " / " + limit(js.config.max_storage, bytes) : "–"],
    ["JS memory", js ? bytes(js.memory) + " / " + limit(js.config.max_memory, bytes) : "–"],
    ["API requests", js ? num(js.api.total) + " (" + num(js.api.errors) + " errors)" : "–"],
  ];
  document.getElementById("overview").replaceChildren(
    ...cards.map(([label, value]) => el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value" }, value))),
  );
}

function traffic(varz) {
  const now = Date.now() / 1000;
  const prev = state.prev;
  if (prev) {
    const dt = Math.max(0.001, now - prev.t);
    push(state.rates.msgsIn, Math.max(0, (varz.in_msgs - prev.in_msgs) / dt));
    push(state.rates.msgsOut, Math.max(0, (varz.out_msgs - prev.out_msgs) / dt));
    push(state.rates.bytesIn, Math.max(0, (varz.in_bytes - prev.in_bytes) / dt));
    push(state.rates.bytesOut, Math.max(0, (varz.out_bytes - prev.out_bytes) / dt));
  }
  state.prev = { t: now, in_msgs: varz.in_msgs, out_msgs: varz.out_msgs, in_bytes: varz.in_bytes, out_bytes: varz.out_bytes };
  const colors = ["#2f6fdf", "#e8842c"];
  drawLines(document.getElementById("chart-msgs"), [state.rates.msgsIn, state.rates.msgsOut], colors);
  drawLines(document.getElementById("chart-bytes"), [state.rates.bytesIn, state.rates.bytesOut], colors);
}

function streamRate(name, lastSeq, now) {
  let s = state.streams.get(name);
  if (!s) { s = { t: now, seq: lastSeq, rates: [] }; state.streams.set(name, s); return s; }
  push(s.rates, Math.max(0, (lastSeq - s.seq) / Math.max(0.001, now - s.t)));
  s.t = now; s.seq = lastSeq;
  return s;
}

function jetstream(jsz) {
  const streams = [], consumers = [], kv = [], objects = [];
  const now = Date.now() / 1000;
  const seen = new Set();
  for (const acc of (jsz && jsz.account_details) || []) {
    for (const st of acc.stream_detail || []) {
      const cfg = st.config || {}, s = st.state || {};
      const key = acc.name + "\u0000" + st.name; // stream names repeat across accounts
      seen.add(key);
      const r = streamRate(key, s.last_seq || 0, now);
      const fractions = [];
      if (cfg.max_msgs > 0) fractions.push(s.messages / cfg.max_msgs);
      if (cfg.max_bytes > 0) fractions.push(s.bytes / cfg.max_bytes);
      const limits = "msgs " + limit(cfg.max_msgs, num) + ", bytes " + limit(cfg.max_bytes, bytes) + ", age " + duration(cfg.max_age);
      const last = r.rates.length ? r.rates[r.rates.length - 1] : 0;
      streams.push([
        el("td", { class: "name", title: acc.name }, acc.name),
        el("td", { class: "name", title: st.name }, st.name),
        el("td", { title: (cfg.subjects || []).join(", ") }, (cfg.subjects || []).join(", ")),
        cfg.storage || "", num(s.messages), bytes(s.bytes), limits,
        fractions.length ? fillBar(Math.max(...fractions)) : fillBar(-1),
        el("td", {}, sparkline(r.rates), " " + rate(last)),
        num(s.consumer_count),
      ]);
      for (const c of st.consumer_detail || []) {
        const ccfg = c.config || {};
        consumers.push([
          acc.name, st.name, el("td", { class: "name", title: c.name }, c.name), ccfg.deliver_subject ? "push" : "pull", ccfg.ack_policy || "",
          num(c.num_pending), num(c.num_ack_pending), num(c.num_redelivered), num(c.num_waiting),
          num((c.delivered || {}).stream_seq), num((c.ack_floor || {}).stream_seq),
        ]);
      }
      if (st.name.startsWith("KV_")) {
        kv.push([acc.name, st.name.slice(3), num(s.num_subjects), num(cfg.max_msgs_per_subject), duration(cfg.max_age), num(s.messages), bytes(s.bytes)]);
      } else if (st.name.startsWith("OBJ_")) {
        objects.push([acc.name, st.name.slice(4), num(s.num_subjects ? Math.ceil(s.num_subjects / 2) : 0), num(s.messages), bytes(s.bytes), cfg.sealed ? "yes" : "no", duration(cfg.max_age)]);
      }
    }
  }
  for (const name of state.streams.keys()) if (!seen.has(name)) state.streams.delete(name);
  document.getElementById("streams-count").textContent = "(" + num(streams.length) + ")";
  fillTable("streams", streams, jsz && jsz.disabled ? "JetStream is not enabled" : "no streams");
  fillTable("consumers", consumers, "no consumers");
  fillTable("kv", kv, "no buckets");
  fillTable("objects", objects, "no object stores");
}

function connections(connz) {
  document.getElementById("connections-count").textContent = "(" + num(connz.total) + ")";
  fillTable("connections", (connz.connections || []).map((c) => [
    String(c.cid), c.account || "", el("td", { class: "name", title: c.name || "" }, c.name || ""), c.ip + ":" + c.port,
    [c.lang, c.version].filter(Boolean).join(" "), num(c.subscriptions), num(c.in_msgs), num(c.out_msgs),
    bytes(c.pending_bytes), c.rtt || "", c.uptime,
  ]), "no connections");
}

function routes(routez, varz) {
  const list = routez.routes || [];
  document.getElementById("routes-count").textContent = "(" + num(list.length) + ")";
  fillTable("routes", list.map((r) => [
    String(r.rid), el("td", { class: "name", title: r.remote_id }, r.remote_name || r.remote_id),
    r.ip + ":" + r.port, r.did_solicit ? (r.is_configured ? "configured" : "gossiped") : "accepted",
    num(r.subscriptions), num(r.in_msgs), num(r.out_msgs), bytes(r.pending_size), r.rtt || "", r.uptime,
  ]), varz.cluster && varz.cluster.name ? "no routes" : "not clustered");
}

function gateways(gatewayz) {
  const list = gatewayLinks(gatewayz);
  document.getElementById("gateways-count").textContent = "(" + num(list.length) + ")";
  fillTable("gateways", list.map(([name, g, how]) => {
    const c = g.connection || {};
    return [
      String(c.cid), name, el("td", { class: "name", title: c.name || "" }, c.name || ""), c.ip + ":" + c.port, how,
      num(c.subscriptions), num(c.in_msgs), num(c.out_msgs), bytes(c.pending_bytes), c.rtt || "", c.uptime,
    ];
  }), gatewayz.name ? "no gateway connections" : "no gateway");
}

async function refresh() {
  const error = document.getElementById("error");
  try {
    const [varz, jsz, connz, routez, gatewayz, health] = await Promise.all([
      getJSON("varz"),
      getJSON("jsz?accounts=true&streams=true&consumers=true&config=true"),
      getJSON("connz?auth=true&limit=" + MAX_ROWS),
      getJSON("routez"),
      getJSON("gatewayz"),
      fetch("healthz", { cache: "no-store" }).then((r) => r.json()),
    ]);
    document.getElementById("server-name").textContent = varz.server_name;
    document.title = "jetpy " + varz.server_name;
    const badge = document.getElementById("health");
    badge.textContent = health.status === "ok" ? "healthy" : health.status + (health.error ? ": " + health.error : "");
    badge.className = "badge " + (health.status === "ok" ? "ok" : "bad");
    overview(varz, jsz, gatewayz);
    traffic(varz);
    jetstream(jsz);
    connections(connz);
    routes(routez, varz);
    gateways(gatewayz);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
    error.hidden = true;
  } catch (e) {
    error.textContent = "monitoring endpoints unreachable: " + e.message;
    error.hidden = false;
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
