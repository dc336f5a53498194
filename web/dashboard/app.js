// crescent's dashboard: polls crescentd's HTTP API (docs/http-api.md) and shows
// the store, the event plane and the indexer, with uPlot charts of the last
// minutes.  Served by crescentd itself; nothing is fetched from elsewhere.
// The admin token (crescentd --admin-token-file), when one is set, comes from
// the page's #token=... fragment or the token box and goes in every request
// as "Authorization: Bearer".
"use strict";

const PERIOD_MS = 2000;
const HISTORY_POINTS = 300; // 10 minutes at one point per 2 s

let token = sessionStorage.getItem("crescent-token") || "";
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) {
  token = fragment.get("token");
  sessionStorage.setItem("crescent-token", token);
  history.replaceState(null, "", location.pathname);
}

async function api(path, optional) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const resp = await fetch(path, { headers, cache: "no-store" });
  if (resp.status === 401 || resp.status === 403) {
    document.getElementById("token-form").hidden = false;
    throw new Error(path + ": the admin token is missing or wrong (HTTP " + resp.status + ")");
  }
  if (optional && resp.status === 404) return null;
  if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
  return resp.json();
}

// ---- formatting -------------------------------------------------------------

function formatBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
  return u === 0 ? n + " B" : n.toFixed(n < 10 ? 2 : 1) + " " + units[u];
}

function format(value, kind) {
  if (value === null || value === undefined) return "–";
  switch (kind) {
    case "bytes": return formatBytes(value);
    case "percent": return (value * 100).toFixed(value > 0 && value < 0.001 ? 4 : 1) + " %";
    case "rate": return value.toFixed(1);
    // A bucket bound of crescentd's histograms (10 us .. 10 s): "≤ 250 µs".
    case "seconds": return "≤ " + (value < 1e-3 ? (value * 1e6).toFixed(0) + " µs"
      : value < 1 ? (value * 1e3).toFixed(value < 1e-2 ? 1 : 0) + " ms" : value.toFixed(1) + " s");
    default: return Number.isInteger(value) ? value.toLocaleString("en-US") : String(value);
  }
}

function lookup(model, path) {
  return path.split(".").reduce((o, k) => (o === null || o === undefined ? o : o[k]), model);
}

// Every [data-field] shows one number of the model; data-value keeps it raw
// (the browser test compares it with the API's answer).
// data-unless="a.b,c.d": the value means nothing while any of those is 0 (a
// hit rate with no route asked, or no block indexed): shown as "–", not 0 % or 100 %.
function renderFields(model) {
  for (const el of document.querySelectorAll("[data-field]")) {
    const value = lookup(model, el.dataset.field);
    const moot = (el.dataset.unless || "").split(",").some((p) => p && !lookup(model, p));
    el.textContent = moot ? "–" : format(value, el.dataset.format);
    el.dataset.value = value === undefined || value === null ? "" : String(value);
  }
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function fillTable(id, rows, columns, emptyText) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  if (rows.length === 0) {
    const td = cell(body.insertRow(), emptyText, "empty");
    td.colSpan = columns;
  }
  return body;
}

function renderSegments(list) {
  const body = fillTable("segments", list, 6, "no segment mounted");
  for (const s of list) {
    const row = body.insertRow();
    row.dataset.name = s.name;
    cell(row, s.name);
    cell(row, s.endpoint);
    cell(row, s.protocol === "none" ? "none (metadata only, not capacity)" : s.protocol,
         s.protocol === "none" ? "fake" : "").dataset.fake = s.protocol === "none";
    cell(row, formatBytes(s.size), "num").dataset.value = s.size;
    cell(row, formatBytes(s.used_bytes), "num").dataset.value = s.used_bytes;
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.title = format(s.usage_ratio, "percent");
    const fill = document.createElement("span");
    fill.style.width = Math.min(100, s.usage_ratio * 100).toFixed(2) + "%";
    bar.append(fill);
    row.insertCell().append(bar);
  }
}

function renderPublishers(services) {
  const body = fillTable("publishers", services, 9, "no publisher registered (POST /register)");
  for (const p of services) {
    const row = body.insertRow();
    row.dataset.key = p.key;
    cell(row, p.instance_id + (p.dp_rank ? " dp" + p.dp_rank : ""));
    cell(row, p.tenant_id);
    cell(row, p.modelname);
    cell(row, p.type);
    // The SUB's link (connected, disconnected, never connected), then why
    // the index may miss blocks of this publisher, if it may.
    const link = p.link || "unknown";
    let health = link;
    if (p.possibly_stale) health += ", possibly stale" + (p.stale_reason ? ": " + p.stale_reason : "");
    else if (p.replaying === true) health += ", replaying";
    const healthCell = cell(row, health,
                            link === "connected" && !p.possibly_stale ? "health-ok" : "health-stale");
    healthCell.dataset.link = link;
    cell(row, p.last_seq === null ? "–" : String(p.last_seq), "num");
    cell(row, format(p.counters.events), "num").dataset.value = p.counters.events;
    cell(row, format(p.counters.gaps), "num");
    // No route asked of it yet: no rate to show (not 0.0 %).
    cell(row, p.route.request_tokens ? format(p.route.hit_rate, "percent") : "–",
         "num").dataset.value = p.route.hit_rate;
  }
}

// The store master's role (GET /health's "ha", docs/ha.md); the section
// shows only with replication or HA.  [data-ha] elements show one value
// (data-value keeps it raw, for the browser test).
function renderHa(ha) {
  const section = document.getElementById("ha-section");
  section.hidden = !ha || ha.role === "none";
  if (section.hidden) return;
  const view = Object.assign({}, ha, {
    lag_records: ha.lag_records, lag_ms: ha.lag_ms,
    connected: ha.connected === undefined ? undefined : (ha.connected ? "up" : "down"),
    snapshot_lsn: ha.snapshot_lsn || undefined,
    snapshot_age: ha.snapshot_unix_ms
      ? "taken " + Math.max(0, Math.round((Date.now() - ha.snapshot_unix_ms) / 1000)) + " s ago"
      : "none yet",
  });
  for (const el of section.querySelectorAll("[data-ha]")) {
    const value = view[el.dataset.ha];
    el.textContent = typeof value === "string" ? value : format(value, el.dataset.format);
    el.dataset.value = value === undefined || value === null ? "" : String(value);
  }
  for (const el of section.querySelectorAll("[data-ha-when]"))
    el.hidden = !ha[el.dataset.haWhen];
  for (const el of section.querySelectorAll("[data-ha-role]"))
    el.hidden = el.dataset.haRole !== ha.role;
  const body = fillTable("standbys", ha.standbys || [], 4, "no standby connected");
  for (const s of ha.standbys || []) {
    const row = body.insertRow();
    row.dataset.address = s.address;
    cell(row, s.address);
    for (const v of [s.acked_lsn, s.lag_records, s.lag_ms]) {
      const td = cell(row, format(v), "num");
      td.dataset.value = String(v);
    }
  }
}

function renderObjects(list) {
  const body = fillTable("objects", list, 6, "no object stored");
  for (const o of list) {
    const row = body.insertRow();
    cell(row, o.tenant);
    cell(row, o.key);
    cell(row, formatBytes(o.size_bytes), "num").dataset.value = o.size_bytes;
    cell(row, o.complete ? "complete" : "being written");
    cell(row, o.put_start ? new Date(o.put_start).toLocaleTimeString() : "–");
    cell(row, o.leased ? "expires in " + o.lease_expires_in_s.toFixed(1) + " s" : "–");
  }
}

function renderTasks(answer) {
  document.getElementById("tasks-section").hidden = answer === null;
  if (answer === null) return;
  const list = answer.tasks || [];
  const body = fillTable("tasks", list, 5, "no copy or move task");
  for (const t of list) {
    const row = body.insertRow();
    cell(row, String(t.id));
    cell(row, String(t.type));
    cell(row, String(t.status));
    cell(row, t.key === undefined ? "–" : String(t.key));
    cell(row, String(t.message || ""));
  }
}

// ---- charts -------------------------------------------------------------------

function makeChart(id, series, yFormat) {
  const el = document.getElementById(id);
  const opts = {
    width: el.clientWidth || 420, height: 180,
    series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2,
                                        value: (u, v) => (v === null ? "–" : yFormat(v)) }))],
    axes: [{}, { values: (u, vals) => vals.map(yFormat), size: 86 }],
    scales: { x: { time: true } },
  };
  const data = [[], ...series.map(() => [])];
  return { plot: new uPlot(opts, data, el), data };
}

function push(chart, t, values) {
  if (chart === noChart) return;
  chart.data[0].push(t);
  values.forEach((v, i) => chart.data[i + 1].push(v));
  if (chart.data[0].length > HISTORY_POINTS) chart.data.forEach((col) => col.shift());
  chart.plot.setData(chart.data);
}

// A build without uPlot (npm ci not run) still shows every number.
const chartsMissing = typeof uPlot === "undefined";
const noChart = { plot: { setData() {} }, data: [[]] };
const charts = chartsMissing ? { ops: noChart, usage: noChart, events: noChart } : {
  ops: makeChart("chart-ops", [{ label: "puts/s", color: "#3b5bdb" },
                               { label: "gets/s", color: "#1f8a4c" },
                               { label: "exists/s", color: "#e67700" },
                               { label: "removes/s", color: "#862e9c" },
                               { label: "evictions/s", color: "#c53030" }], (v) => v.toFixed(1)),
  usage: makeChart("chart-usage", [{ label: "used", color: "#3b5bdb" }], formatBytes),
  events: makeChart("chart-events", [{ label: "events/s", color: "#7048e8" }], (v) => v.toFixed(1)),
};

// ---- polling --------------------------------------------------------------------

let previous = null; // the last sample: counters and its time, for rates

function counters(actors) {
  const byName = {};
  for (const a of actors) byName[a.name] = a.counters || {};
  return byName;
}

// null on the first poll: one sample makes no rate (shown as "–", not a 0).
function rate(now, before, pick) {
  if (before === null) return null;
  const seconds = (now.t - before.t) / 1000;
  return seconds > 0 ? Math.max(0, (pick(now) - pick(before)) / seconds) : 0;
}

async function poll() {
  const [health, stats, segments, events, actors, index, services, objects, tasks] =
    await Promise.all([
      api("/health"), api("/api/v1/stats"), api("/api/v1/segments"), api("/api/v1/events"),
      api("/api/v1/actors"), api("/global_view"), api("/services"),
      api("/api/v1/objects?limit=20&order=recent"), api("/api/v1/tasks", true)]);
  const c = counters(actors.actors);
  const rpc = c.rpc || {};
  // Requests over every RPC endpoint: ZMQ (rpc), native (rpc_tcp), shm (rpc_shm).
  const requests = (...names) => ["rpc", "rpc_tcp", "rpc_shm"].reduce(
    (sum, actor) => sum + names.reduce((s, n) => s + ((c[actor] || {})["requests_" + n + "_total"] || 0), 0), 0);
  const sample = {
    t: Date.now(),
    puts: requests("put_start", "batch_put_start"),
    gets: requests("get_replica_list", "batch_get_replica_list"),
    exists: requests("exist_key", "batch_exist_key"),
    removes: requests("remove", "batch_remove", "remove_by_regex", "remove_all"),
    evictions: stats.evictions, events: events.events_sent,
  };
  const model = {
    stats, events, index, rpc, tasks,
    rate: {
      puts: rate(sample, previous, (s) => s.puts), gets: rate(sample, previous, (s) => s.gets),
      exists: rate(sample, previous, (s) => s.exists),
      removes: rate(sample, previous, (s) => s.removes),
      evictions: rate(sample, previous, (s) => s.evictions),
      events: rate(sample, previous, (s) => s.events),
    },
  };
  // Segments mounted for metadata only (protocol "none", e.g. crescent-bench
  // --mount-fake) hold no memory: marked, and not counted as capacity.
  const fake = segments.segments.filter((s) => s.protocol === "none");
  const fakeBytes = fake.reduce((sum, s) => sum + s.size, 0);
  const fakeUsed = fake.reduce((sum, s) => sum + s.used_bytes, 0);
  const memory = stats.capacity_bytes - fakeBytes;
  model.capacity = { memory, metadata_only: fakeBytes, used: stats.used_bytes - fakeUsed,
                     ratio: memory > 0 ? (stats.used_bytes - fakeUsed) / memory : 0 };
  document.getElementById("metadata-only").hidden = fake.length === 0;
  const first = previous === null;
  previous = sample;
  renderFields(model);
  renderSegments(segments.segments);
  renderPublishers(services.services);
  renderObjects(objects.objects);
  renderTasks(tasks);
  renderHa(health.ha);
  const t = sample.t / 1000;
  // From the second poll: one point alone draws an axis years wide and zeros
  // that were never measured.
  if (!first) {
    push(charts.ops, t, [model.rate.puts, model.rate.gets, model.rate.exists,
                         model.rate.removes, model.rate.evictions]);
    push(charts.usage, t, [stats.used_bytes]);
    push(charts.events, t, [model.rate.events]);
  }
  const pill = document.getElementById("health");
  pill.textContent = health.status === "ok" ? "healthy" : "degraded: " + health.unresponsive.join(", ");
  pill.className = "pill " + (health.status === "ok" ? "ok" : "bad");
  document.getElementById("version").textContent =
    "v" + health.version + ", up " + health.uptime_seconds + " s";
  document.getElementById("updated").textContent =
    "updated " + new Date(sample.t).toLocaleTimeString();
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
}

async function loop() {
  const error = document.getElementById("error");
  try {
    await poll();
    error.hidden = !chartsMissing;
    if (chartsMissing)
      error.textContent = "This crescentd was built without uPlot: no charts (run " +
        "scripts/setup.sh, which installs it with npm ci, and rebuild).";
  } catch (e) {
    error.textContent = String(e.message || e);
    error.hidden = false;
  }
  setTimeout(loop, PERIOD_MS);
}

document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = document.getElementById("token").value;
  sessionStorage.setItem("crescent-token", token);
  document.getElementById("token-form").hidden = true;
});
document.getElementById("period").textContent = String(PERIOD_MS / 1000);
loop();
