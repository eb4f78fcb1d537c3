// The dashboard's one script: a page per URL hash (#cluster, #actors, #actor/ID, #groups,
// #jobs, #job/ID), each drawn from the head's JSON API and redrawn every POLL_MS. No libraries:
// clusters are often offline.
"use strict";

const POLL_MS = 2000;
const PHASES = [["generate_s", "generate", "#2f6fde"], ["reward_s", "reward", "#8e44ad"],
                ["train_s", "train", "#1d8a4e"], ["sync_s", "weight sync", "#d35400"],
                ["wait_s", "wait", "#95a5a6"]];

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function short(id) { return id ? esc(id.length > 16 ? id.slice(0, 16) + "…" : id) : "-"; }
function state(s) { return `<span class="state ${esc(s)}">${esc(s)}</span>`; }
function ago(ms) { return ms ? `${Math.max(0, (Date.now() - ms) / 1000).toFixed(1)}s ago` : "-"; }
function num(v, digits = 2) { return Number(v).toFixed(digits).replace(/\.?0+$/, "") || "0"; }

async function api(path) {
  const r = await fetch(path, {credentials: "same-origin", cache: "no-store"});
  if (r.status === 401) { location.href = "/login"; throw new Error("signed out"); }
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${await r.text()}`);
  return (r.headers.get("content-type") || "").startsWith("application/json") ? r.json() : r.text();
}

function humanAmount(kind, v) {
  if (kind === "memory") return v >= 2 ** 30 ? `${num(v / 2 ** 30, 1)} GiB` : `${num(v / 2 ** 20, 0)} MiB`;
  return num(v);
}

// ---- Cluster -------------------------------------------------------------------------

async function cluster() {
  const nodes = await api("/api/nodes");
  const alive = nodes.filter(n => n.state === "ALIVE");
  const rows = nodes.map(n => {
    const kinds = Object.keys(n.resources).sort();
    const res = kinds.map(k => {
      const total = n.resources[k], used = (n.used || {})[k] || 0;
      const pct = total > 0 ? Math.min(100, 100 * used / total) : 0;
      return `<div><span class="bar"><span style="width:${pct}%"></span></span>` +
             `${esc(k)} ${humanAmount(k, used)} / ${humanAmount(k, total)}</div>`;
    }).join("");
    const labels = Object.entries(n.labels || {}).map(([k, v]) => `${esc(k)}=${esc(v)}`).join(", ") || "-";
    const gpus = (n.gpu_ids || []).map(g => `<span class="gpu">${esc(g)}</span>`).join("") || "-";
    return `<tr data-node="${esc(n.node_id)}" data-state="${esc(n.state)}"><td class="mono">${esc(n.node_id)}</td>` +
           `<td>${state(n.state)}</td><td>${esc(n.hostname)}<div class="muted mono">${esc(n.address)}</div></td>` +
           `<td>${res}</td><td>${gpus}</td><td>${labels}</td>` +
           `<td>${n.state === "ALIVE" ? ago(n.last_heartbeat_unix_ms) : `<span class="reason">${esc(n.death_reason)}</span>`}</td></tr>`;
  }).join("");
  return `<h2>Nodes <span class="muted">${alive.length} alive, ${nodes.length - alive.length} dead</span></h2>` +
         `<table id="nodes"><tr><th>Node</th><th>State</th><th>Host</th><th>Resources (used / total)</th>` +
         `<th>GPU ids</th><th>Labels</th><th>Heartbeat</th></tr>${rows}</table>`;
}

// ---- Actors --------------------------------------------------------------------------

async function actors() {
  const list = await api("/api/actors");
  const counts = {};
  list.forEach(a => { counts[a.state] = (counts[a.state] || 0) + 1; });
  const rows = list.map(a => `<tr data-actor="${esc(a.actor_id)}" data-state="${esc(a.state)}">` +
    `<td class="mono"><a href="#actor/${esc(a.actor_id)}">${esc(a.actor_id)}</a></td><td>${esc(a.class)}</td>` +
    `<td>${a.name ? esc(a.namespace + "/" + a.name) : "-"}</td><td>${state(a.state)}</td>` +
    `<td class="mono">${short(a.node_id)}</td><td>${(a.gpu_ids || []).join(",") || "-"}</td>` +
    `<td>${esc(a.restarts)}</td><td class="reason">${esc(a.death_reason)}</td></tr>`).join("");
  const summary = Object.entries(counts).map(([s, n]) => `${n} ${esc(s)}`).join(", ") || "none";
  return `<h2>Actors <span class="muted">${summary}</span></h2><table id="actors"><tr><th>Actor</th><th>Class</th>` +
         `<th>Name</th><th>State</th><th>Node</th><th>GPU ids</th><th>Restarts</th><th>Death reason and last log lines</th></tr>` +
         `${rows}</table>`;
}

// One actor: what the head knows of it, and the end of its log from its worker, redrawn live.
async function actor(id) {
  const list = await api("/api/actors");
  const a = list.find(x => x.actor_id === id);
  if (!a) return `<h2>Actor <span class="mono">${esc(id)}</span></h2><p class="error">The head has no such actor.</p>`;
  let log;
  try {
    log = await api(`/api/actors/${encodeURIComponent(id)}/log?tail=200`);
  } catch (e) {
    log = `(no log: ${e.message})`;
  }
  const fields = [["Class", esc(a.class)], ["Name", a.name ? esc(a.namespace + "/" + a.name) : "-"],
                  ["State", state(a.state)], ["Node", `<span class="mono">${esc(a.node_id || "-")}</span>`],
                  ["GPU ids", (a.gpu_ids || []).join(",") || "-"], ["Restarts", esc(a.restarts)],
                  ["Death reason", `<span class="reason">${esc(a.death_reason || "-")}</span>`]];
  return `<h2>Actor <span class="mono">${esc(a.actor_id)}</span> ${state(a.state)}</h2>` +
         `<table id="actor">${fields.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("")}</table>` +
         `<h2>Log <span class="muted">(last 200 lines, live; <code>skyrl logs ${esc(a.actor_id)} --follow</code>)</span></h2>` +
         `<pre id="actor-log">${esc(log)}</pre>`;
}

// ---- Placement groups ----------------------------------------------------------------

async function groups() {
  const [list, nodes] = await Promise.all([api("/api/placement-groups"), api("/api/nodes")]);
  const live = list.filter(g => g.state !== "REMOVED");
  if (live.length === 0) return `<h2>Placement groups</h2><p class="muted">None.</p>`;
  return `<h2>Placement groups</h2>` + live.map(g => {
    // Bundles drawn onto the nodes and GPUs they hold, in bundle order.
    const byNode = {};
    g.bundles.forEach((b, i) => { (byNode[b.node_id || ""] ||= []).push([i, b]); });
    const cells = Object.entries(byNode).map(([node, bs]) => {
      const n = nodes.find(x => x.node_id === node);
      const gpus = n ? (n.gpu_ids || []).map(id => {
        const holder = bs.find(([, b]) => (b.gpu_ids || []).includes(id));
        return `<span class="gpu ${holder ? "used" : ""}" title="GPU ${id}">${holder ? "b" + holder[0] : id}</span>`;
      }).join("") : "";
      const list = bs.map(([i, b]) => `<div>bundle ${i}: ${Object.entries(b.resources).map(([k, v]) =>
        `${esc(k)}=${humanAmount(k, v)}`).join(" ")}${b.gpu_ids && b.gpu_ids.length ? ` → GPU ${b.gpu_ids.join(",")}` : ""}</div>`).join("");
      return `<td><div class="mono">${node ? short(node) : "<i>not placed</i>"}</div>${gpus}${list}</td>`;
    }).join("");
    return `<table class="group" data-group="${esc(g.placement_group_id)}"><tr><th colspan="9">` +
           `<span class="mono">${esc(g.placement_group_id)}</span> ${g.name ? esc(g.namespace + "/" + g.name) : ""} ` +
           `${state(g.state)} ${esc(g.strategy)}${g.pending_reason ? ` <span class="reason">${esc(g.pending_reason)}</span>` : ""}` +
           `</th></tr><tr>${cells}</tr></table><br>`;
  }).join("");
}

// ---- Jobs ----------------------------------------------------------------------------

async function jobs() {
  const list = await api("/api/jobs");
  const rows = list.map(j => `<tr data-job="${esc(j.job_id)}"><td><a class="mono" href="#job/${esc(j.job_id)}">` +
    `${esc(j.job_id)}</a></td><td>${state(j.state)}</td><td class="mono">${esc(j.entrypoint.join(" "))}</td>` +
    `<td>${esc(j.message)}</td><td>${j.submitted_unix_ms ? new Date(j.submitted_unix_ms).toLocaleString() : "-"}</td></tr>`).join("");
  return `<h2>Jobs</h2><table id="jobs"><tr><th>Job</th><th>State</th><th>Entrypoint</th><th>Message</th>` +
         `<th>Submitted</th></tr>${rows}</table>`;
}

// An SVG line chart of `series` ([{name, color, points: [[x, y]...]}]), one circle per point.
function lineChart(id, title, series, yLabel) {
  const W = 520, H = 240, L = 48, R = 12, T = 12, B = 30;
  const all = series.flatMap(s => s.points);
  if (all.length === 0) return `<div class="plot"><h3>${esc(title)}</h3><p class="muted">No steps yet.</p></div>`;
  const xmax = Math.max(1, ...all.map(p => p[0]));
  let ymin = Math.min(0, ...all.map(p => p[1])), ymax = Math.max(...all.map(p => p[1]));
  if (ymax <= ymin) ymax = ymin + 1;
  const x = v => L + (W - L - R) * v / xmax, y = v => T + (H - T - B) * (1 - (v - ymin) / (ymax - ymin));
  const ticks = [0, 0.25, 0.5, 0.75, 1].map(f => ymin + f * (ymax - ymin));
  let svg = `<svg id="${id}" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${esc(title)}">`;
  svg += ticks.map(t => `<line x1="${L}" x2="${W - R}" y1="${y(t)}" y2="${y(t)}" stroke="#eee"/>` +
    `<text x="${L - 6}" y="${y(t) + 4}" text-anchor="end" font-size="10" fill="#6a7380">${num(t, 3)}</text>`).join("");
  svg += `<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle" font-size="11" fill="#6a7380">step</text>`;
  svg += `<text x="${W - R}" y="${H - 18}" text-anchor="end" font-size="10" fill="#6a7380">${xmax}</text>`;
  for (const s of series) {
    svg += `<polyline fill="none" stroke="${s.color}" stroke-width="1.6" points="${s.points.map(p => `${x(p[0])},${y(p[1])}`).join(" ")}"/>`;
    svg += s.points.map(p => `<circle class="point" data-series="${esc(s.name)}" cx="${x(p[0])}" cy="${y(p[1])}" r="2.2" fill="${s.color}"><title>step ${p[0]}: ${num(p[1], 4)}</title></circle>`).join("");
  }
  svg += `</svg>`;
  const legend = series.map(s => `<span><i style="background:${s.color}"></i>${esc(s.name)}</span>`).join("");
  return `<div class="plot"><h3>${esc(title)}${yLabel ? ` <span class="muted">(${esc(yLabel)})</span>` : ""}</h3>` +
         `<div class="legend">${legend}</div>${svg}</div>`;
}

// Step time stacked by phase: one bar per step.
function phaseChart(steps) {
  const W = 520, H = 240, L = 48, R = 12, T = 12, B = 30;
  if (steps.length === 0) return `<div class="plot"><h3>Step time by phase</h3><p class="muted">No steps yet.</p></div>`;
  const total = m => PHASES.reduce((a, [k]) => a + (m[k] || 0), 0);
  const ymax = Math.max(1e-6, ...steps.map(m => Math.max(total(m), m.step_s || 0)));
  const bw = (W - L - R) / steps.length;
  let svg = `<svg id="phase-plot" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="step time by phase">`;
  [0, 0.5, 1].forEach(f => {
    const yy = T + (H - T - B) * (1 - f);
    svg += `<line x1="${L}" x2="${W - R}" y1="${yy}" y2="${yy}" stroke="#eee"/><text x="${L - 6}" y="${yy + 4}" text-anchor="end" font-size="10" fill="#6a7380">${num(f * ymax, 3)}s</text>`;
  });
  steps.forEach((m, i) => {
    let base = 0;
    for (const [k, name, color] of PHASES) {
      const v = m[k] || 0;
      if (v <= 0) continue;
      const y0 = T + (H - T - B) * (1 - (base + v) / ymax), h = (H - T - B) * v / ymax;
      svg += `<rect class="phase" data-phase="${name}" x="${L + i * bw + 0.5}" y="${y0}" width="${Math.max(0.5, bw - 1)}" height="${h}" fill="${color}"><title>step ${m.step} ${name}: ${num(v, 3)}s</title></rect>`;
      base += v;
    }
  });
  svg += `<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle" font-size="11" fill="#6a7380">step</text></svg>`;
  const legend = PHASES.map(([, n, c]) => `<span><i style="background:${c}"></i>${n}</span>`).join("");
  return `<div class="plot"><h3>Step time by phase <span class="muted">(seconds)</span></h3><div class="legend">${legend}</div>${svg}</div>`;
}

async function job(id) {
  const enc = encodeURIComponent(id);
  const [info, steps, log] = await Promise.all([api(`/api/jobs/${enc}`), api(`/api/jobs/${enc}/metrics`),
                                                api(`/api/jobs/${enc}/log?tail=65536`)]);
  const pts = k => steps.filter(m => typeof m[k] === "number").map(m => [m.step, m[k]]);
  const syncRate = steps.filter(m => m.sync_bytes && m.sync_s > 0).map(m => [m.step, m.sync_bytes / m.sync_s / 1e9]);
  const last = steps[steps.length - 1];
  return `<h2>Job <span class="mono">${esc(info.job_id)}</span> ${state(info.state)}</h2>` +
    `<p><span class="mono">${esc(info.entrypoint.join(" "))}</span><br>${esc(info.message)}` +
    `${last ? `<br><span id="job-summary">step ${last.step}: reward ${num(last.mean_reward, 3)}, ` +
              `KL ${num(last.kl, 4)}, ${num(last.tokens_per_s, 0)} tokens/s</span>` : ""}` +
    `<br><a id="timeline-link" href="/api/jobs/${enc}/timeline" download="timeline-${esc(info.job_id)}.json">` +
    `Timeline</a> <span class="muted">(every call of the job's actors, per step: open it in ` +
    `ui.perfetto.dev or chrome://tracing)</span></p>` +
    `<div class="plots">` +
    lineChart("reward-plot", "Reward", [{name: "mean reward", color: "#2f6fde", points: pts("mean_reward")},
                                        {name: "exact", color: "#1d8a4e", points: pts("exact_fraction")}]) +
    lineChart("kl-plot", "KL to the reference", [{name: "kl", color: "#8e44ad", points: pts("kl")}]) +
    phaseChart(steps) +
    (syncRate.length ? lineChart("sync-plot", "Weight sync", [{name: "GB/s", color: "#d35400", points: syncRate}], "GB/s")
                     : lineChart("sync-plot", "Weight sync time", [{name: "seconds", color: "#d35400", points: pts("sync_s")}], "s")) +
    `</div><h2>Log <span class="muted">(last 64 KiB, live)</span></h2><pre id="job-log">${esc(log)}</pre>`;
}

// ---- Router --------------------------------------------------------------------------

const PAGES = {cluster, actors, groups, jobs};
let drawing = false;
let drawn = "";  // the page's last HTML: redrawn only when it changes (selections and links stay)

async function draw() {
  if (drawing) return;
  drawing = true;
  const hash = location.hash.replace(/^#/, "") || "cluster";
  const [name, ...rest] = hash.split("/");
  document.querySelectorAll("nav a").forEach(a =>
    a.classList.toggle("active", a.dataset.page === ({job: "jobs", actor: "actors"}[name] || name)));
  const main = document.getElementById("page");
  try {
    const arg = decodeURIComponent(rest.join("/"));
    const html = name === "job" ? await job(arg) : name === "actor" ? await actor(arg) : await (PAGES[name] || cluster)();
    const log = document.getElementById("job-log") || document.getElementById("actor-log");
    const atBottom = !log || log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    if (html !== drawn) main.innerHTML = drawn = html;
    const newLog = document.getElementById("job-log") || document.getElementById("actor-log");
    if (newLog && atBottom) newLog.scrollTop = newLog.scrollHeight;
    document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    main.dataset.ready = hash;
  } catch (e) {
    document.getElementById("poll-error")?.remove();
    main.insertAdjacentHTML("afterbegin", `<p class="error" id="poll-error">${esc(e.message)}</p>`);
  } finally {
    drawing = false;
  }
}

window.addEventListener("hashchange", () => { document.getElementById("page").dataset.ready = ""; drawn = ""; draw(); });
draw();
setInterval(draw, POLL_MS);
