// The dashboard draws what kubectl strata dashboard serves: the views are
// computed in Go (the same as clusters, topology, queue and explain -o
// json print); this file only draws them and reads them again when the
// server says something changed.
"use strict";

const state = { worker: "", selected: null, highlight: null };

// A sequential scale readable with colour-blind vision (viridis, 6 steps):
// free fraction 0 (full) to 1 (empty).
const SCALE = ["#440154", "#414487", "#2a788e", "#22a884", "#7ad151", "#fde725"];
const DARK = 3; // the first steps need white text

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c);
  }
  return e;
}

async function getJSON(path) {
  const r = await fetch(path);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function showError(id, err) {
  const p = document.getElementById(id);
  p.hidden = !err;
  p.textContent = err ? String(err.message || err) : "";
}

function cond(c) {
  if (!c) return "-";
  return c.status === "True" ? "True" : c.status + (c.reason ? " (" + c.reason + ")" : "");
}

function resources(list) {
  return Object.entries(list || {}).map(([k, v]) => k + " " + v).join(", ") || "-";
}

// ofCapacity is "nvidia.com/gpu 8 of 16, cpu 90 of 96": free amounts
// against the capacity they are out of.
function ofCapacity(free, capacity) {
  return Object.entries(free || {}).map(([k, v]) => k + " " + v + (capacity && capacity[k] !== undefined ? " of " + capacity[k] : "")).join(", ") || "-";
}

function ageOf(t) {
  if (!t) return "-";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(t)) / 1000));
  return s < 120 ? s + "s" : Math.round(s / 60) + "m";
}

// ---- Fleet

function drawFleet(v) {
  const body = document.querySelector("#fleet tbody");
  body.replaceChildren();
  const select = document.getElementById("worker-select");
  const names = [];
  for (const c of v.clusters) {
    names.push(c.name);
    const sums = (c.summaries || []).map((s) => s.flavor + " (" + ageOf(s.observedTime) + ")").join(", ");
    const free = (c.summaries || []).map((s) => s.flavor + ": " + ofCapacity(s.free, s.capacity)).join("; ");
    const largest = (c.summaries || []).flatMap((s) => (s.largestFree || []).map((d) => d.domain + " " + d.resource + " " + d.free)).join("; ");
    const connected = el("td", { class: c.connected.status === "True" ? "" : "bad" }, cond(c.connected));
    body.append(el("tr", { "data-worker": c.name },
      el("th", { scope: "row" }, c.name + (c.cordoned ? " (cordoned)" : "")),
      connected,
      el("td", {}, cond(c.fencing)),
      el("td", {}, sums || "-"),
      el("td", {}, String(c.copies)),
      el("td", {}, c.admitted + " / " + c.waiting),
      el("td", {}, free || "-"),
      el("td", {}, largest || "-")));
  }
  const nd = v.notDispatched || { total: 0 };
  const by = Object.entries(nd.byReason || {}).map(([k, n]) => k + " " + n).join(", ");
  document.getElementById("not-dispatched").textContent = nd.total + " workload(s) on no worker" + (by ? ": " + by : "");
  if (names.join() !== Array.from(select.options).map((o) => o.value).join()) {
    select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  }
  if (!state.worker || !names.includes(state.worker)) state.worker = names[0] || "";
  select.value = state.worker;
}

// ---- Topology heatmap: per flavor, one row per top-level domain, one
// cell per leaf domain, coloured by its free share of the drawn resource.

function amount(q) {
  if (q === undefined || q === null) return 0;
  const m = String(q).match(/^([0-9.]+)([a-zA-Z]*)$/);
  if (!m) return 0;
  const units = { m: 1e-3, k: 1e3, Ki: 1024, M: 1e6, Mi: 1048576, G: 1e9, Gi: 1073741824 };
  return parseFloat(m[1]) * (units[m[2]] || 1);
}

function leaves(d, path, out, pairs) {
  const here = d.level ? path.concat([d.name]) : path;
  const chain = d.level ? (pairs || []).concat([d.level + "=" + d.name]) : (pairs || []);
  if (!d.children || d.children.length === 0) {
    out.push({ path: here, d, chain });
  } else {
    for (const c of d.children) leaves(c, here, out, chain);
  }
  return out;
}

// holds says whether a leaf domain holds one of the placed domains: each
// is "level=value,..." for one or more levels in a row (the hub's hint
// names every level down to the rack; an admission may name fewer), so
// any run of the leaf's chain from its block down may match.
function holds(chain, placed) {
  if (!placed) return false;
  for (let i = 0; i < chain.length; i++) {
    for (let j = i + 1; j <= chain.length; j++) {
      if (placed.has(chain.slice(i, j).join(","))) return true;
    }
  }
  return false;
}

function drawLegend() {
  const lg = document.getElementById("legend");
  lg.replaceChildren(el("span", {}, "full"), ...SCALE.map((c) => el("span", { class: "swatch", style: "background:" + c })), el("span", {}, "empty"),
    el("span", {}, "  small squares: the domain's hosts; dashed: tainted nodes; hatched: unschedulable nodes; +N: pods the hub dispatched that the summary does not count yet; red outline: the selected workload"));
}

// maxHostTiles bounds the hosts drawn in one cell; a larger domain shows
// its totals only.
const maxHostTiles = 64;

// hostTiles draws a leaf domain's nodes as small squares, each coloured
// by its free share of the drawn resource (against the domain's capacity
// per node: summaries do not name hosts); unschedulable ones hatched.
function hostTiles(d, res, cap) {
  if (!d.hosts || d.nodes === 0 || d.nodes > maxHostTiles) return null;
  const perNode = cap / d.nodes;
  const box = el("span", { class: "hosts", "aria-hidden": "true" });
  for (const h of d.hosts) {
    for (let i = 0; i < h.nodes; i++) {
      if (h.unschedulable) {
        box.append(el("i", { class: "host unschedulable" }));
        continue;
      }
      const share = perNode > 0 ? amount((h.free || {})[res]) / perNode : 0;
      const step = Math.min(SCALE.length - 1, Math.floor(share * SCALE.length));
      box.append(el("i", { class: "host" + (h.tainted ? " tainted" : ""), style: "background:" + SCALE[step] }));
    }
  }
  return box;
}

function drawTopology(v) {
  const root = document.getElementById("heatmaps");
  root.replaceChildren();
  if (v.problem) root.append(el("p", { class: "note" }, v.problem));
  for (const f of v.flavors) {
    const box = el("div", { class: "flavor", "data-flavor": f.flavor });
    box.append(el("h3", {}, f.flavor + " — " + (f.resource || "") + " free of capacity, summary " + ageOf(f.observedTime) + " old" +
      (f.inFlight ? "; " + f.inFlight + " pod(s) the hub dispatched are in flight (marked +N)" : "")));
    if (f.problem) {
      box.append(el("p", { class: "error" }, f.problem));
      root.append(box);
      continue;
    }
    const rows = new Map();
    for (const leaf of leaves(f.root, [], [])) {
      const key = leaf.path.length > 1 ? leaf.path[0] : f.flavor;
      if (!rows.has(key)) rows.set(key, []);
      rows.get(key).push(leaf);
    }
    for (const [name, cells] of rows) {
      const line = el("div", { class: "cells", role: "list" });
      for (const { path, d, chain } of cells) {
        const free = amount((d.free || {})[f.resource]);
        const cap = amount((d.capacity || {})[f.resource]);
        const share = cap > 0 ? free / cap : 0;
        const step = Math.min(SCALE.length - 1, Math.floor(share * SCALE.length));
        let label = path.join("/") + ": " + (d.free || {})[f.resource] + " of " + (d.capacity || {})[f.resource] + " " + f.resource +
          " free; " + d.schedulableNodes + " of " + d.nodes + " nodes schedulable" + (d.taintedNodes ? ", " + d.taintedNodes + " tainted" : "");
        const cls = ["cell"];
        if (d.taintedNodes) cls.push("tainted");
        if (d.schedulableNodes < d.nodes) cls.push("unschedulable");
        const placed = holds(chain, state.highlight);
        if (placed) cls.push("highlight");
        const parts = [el("span", {}, d.name), el("span", {}, String((d.free || {})[f.resource] || "0"))];
        if (d.inFlight) {
          cls.push("inflight");
          label += "; in flight: " + d.inFlight.workloads + " workload(s), " + d.inFlight.pods + " pod(s) the hub dispatched here (" +
            resources(d.inFlight.requests) + ") that the summary does not count yet";
          parts.push(el("span", { class: "badge" }, "+" + d.inFlight.pods));
        }
        const hosts = hostTiles(d, f.resource, cap);
        if (hosts) parts.push(hosts);
        line.append(el("button", {
          class: cls.join(" "), role: "listitem", title: label, "aria-label": label + (placed ? "; holds the selected workload's pods" : ""), "data-domain": path.join("/"),
          "data-free": (d.free || {})[f.resource] || "0", "data-in-flight": d.inFlight ? String(d.inFlight.pods) : "0",
          style: "background:" + SCALE[step] + ";color:" + (step < DARK ? "#fff" : "#000"),
        }, ...parts));
      }
      box.append(el("div", { class: "block" }, el("span", { class: "block-name" }, name), line));
    }
    root.append(box);
  }
}

// ---- Queues

function drawQuota(q) {
  const t = el("table", { class: "quota", "data-quota": q.clusterQueue },
    el("caption", {}, "ClusterQueue " + q.clusterQueue + (q.cohort ? " in cohort " + q.cohort : "") + ": " + q.admitted + " admitted, " + q.pending + " pending"),
    el("thead", {}, el("tr", {}, ...["Flavor", "Resource", "Used", "Nominal quota", "Borrowed", "Borrowing limit", "Lent", "Lending limit"].map((h) => el("th", { scope: "col" }, h)))));
  const body = el("tbody");
  for (const r of q.resources) {
    const used = amount(r.used), nominal = amount(r.nominal);
    body.append(el("tr", { "data-flavor": r.flavor, "data-resource": r.resource },
      el("td", {}, r.flavor), el("td", {}, r.resource),
      el("td", {}, el("meter", { min: "0", max: String(Math.max(nominal, used) || 1), value: String(used), "aria-label": r.resource + " used " + r.used + " of " + r.nominal }), " " + r.used),
      el("td", {}, r.nominal), el("td", {}, r.borrowed || "0"), el("td", {}, r.borrowingLimit || "-"), el("td", {}, r.lent || "0"), el("td", {}, r.lendingLimit || "-")));
  }
  t.append(body);
  return t;
}

function drawQueues(vs) {
  const root = document.getElementById("queues");
  root.replaceChildren();
  for (const q of vs) {
    root.append(drawQuota(q.quota));
    if (q.localQueues && q.localQueues.length) {
      const lt = el("table", { class: "localqueues", "data-localqueues": q.clusterQueue },
        el("caption", {}, "LocalQueues of " + q.clusterQueue + ": " + q.localQueues.length),
        el("thead", {}, el("tr", {}, ...["Namespace", "LocalQueue", "Admitted", "Pending", "Problem"].map((h) => el("th", { scope: "col" }, h)))));
      const lb = el("tbody");
      for (const l of q.localQueues) {
        lb.append(el("tr", { "data-localqueue": l.namespace + "/" + l.name }, el("td", {}, l.namespace), el("td", {}, l.name),
          el("td", {}, String(l.admitted)), el("td", {}, String(l.pending)), el("td", { class: l.problem ? "bad" : "" }, l.problem || "-")));
      }
      lt.append(lb);
      root.append(lt);
    }
    const t = el("table", { "data-queue": q.clusterQueue },
      el("caption", {}, "Pending in " + q.clusterQueue + ", in admission order: " + q.pending.length),
      el("thead", {}, el("tr", {}, ...["#", "Namespace", "Workload", "LocalQueue", "Priority", "Waiting", "Why"].map((h) => el("th", { scope: "col" }, h)))));
    const body = el("tbody");
    for (const p of q.pending) {
      body.append(el("tr", {}, el("td", {}, String(p.positionInClusterQueue)), el("td", {}, p.namespace), el("td", {}, p.name),
        el("td", {}, p.localQueue), el("td", {}, String(p.priority)), el("td", {}, ageOf(p.created)), el("td", { class: "reason" }, p.message || p.reason || "-")));
    }
    t.append(body);
    root.append(t);
  }
}

// ---- Workloads and one workload's explanation

function drawWorkloads(rows) {
  const body = document.querySelector("#workloads tbody");
  body.replaceChildren();
  for (const r of rows) {
    const key = r.namespace + "/" + r.name;
    const tr = el("tr", {
      class: "selectable" + (state.selected && state.selected.key === key ? " selected" : ""), tabindex: "0", "data-workload": key, "data-state": r.state,
      onclick: () => select(r), onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(r); } },
    }, el("td", {}, r.namespace), el("th", { scope: "row" }, r.name), el("td", {}, r.localQueue), el("td", {}, r.state),
    el("td", {}, r.cluster || "-"), el("td", {}, r.flavor || "-"), el("td", { class: "reason" }, r.state === "Admitted" || r.state === "Finished" ? "" : (r.message || r.reason || "")));
    body.append(tr);
  }
}

async function select(r) {
  state.selected = { key: r.namespace + "/" + r.name, row: r };
  await refreshExplain();
  refresh();
}

async function refreshExplain() {
  const box = document.getElementById("explain");
  const sel = state.selected;
  if (!sel) return;
  // No outline until this selection's explain says where its pods are.
  state.highlight = new Set();
  if (!sel.row.job) {
    box.replaceChildren(el("p", {}, sel.key + ": no job of a kind Strata knows owns it"));
    return;
  }
  try {
    const out = await getJSON("/api/explain?namespace=" + encodeURIComponent(sel.row.namespace) + "&job=" + encodeURIComponent(sel.row.job));
    const v = out.explain;
    const lines = [];
    lines.push(sel.row.job + " in " + sel.row.namespace + " (Workload " + v.workload + ", queue " + v.queue + ")");
    if (v.admitted) lines.push("Admitted: " + v.admitted.status + " " + (v.admitted.reason || "") + (v.admitted.message ? ": " + v.admitted.message : ""));
    // The conditions explain shows when they hold.
    for (const [label, c] of [["Invalid", v.invalid], ["Evicted", v.evicted], ["Preempted", v.preempted], ["Copy going", v.copyGoing],
      ["No answer", v.unreachable], ["Finished", v.finished]]) {
      if (c && c.status === "True") lines.push(label + ": " + (c.reason || "") + (c.message ? ": " + c.message : ""));
    }
    if (v.podsReady) lines.push("Pods ready: " + v.podsReady.status + " " + (v.podsReady.reason || ""));
    if (v.timeLimit) {
      // max-exec-time-seconds: what its admissions used, on this browser's clock.
      const t = v.timeLimit;
      let used = t.accumulatedSeconds || 0;
      if (t.admittedSince) used += Math.max(0, (Date.now() - Date.parse(t.admittedSince)) / 1000);
      used = Math.floor(used);
      lines.push("Time limit: " + t.seconds + "s admitted in all (max-exec-time-seconds): " + used + "s used, " + Math.max(0, t.seconds - used) + "s left");
    }
    if (v.position) lines.push("Position " + v.position.position + " of " + v.position.of + " in ClusterQueue " + v.position.clusterQueue);
    if (v.placement) {
      lines.push("Worker: " + (v.placement.cluster || "-") + ", flavor " + (v.placement.flavor || "-"));
      for (const a of v.placement.attempts || []) lines.push("  " + a.result + " on " + a.cluster + ": " + (a.message || ""));
    }
    // The heatmap outlines the domains that hold its pods (LEVEL=VALUE).
    state.highlight = new Set(out.domains);
    if (v.admission) {
      for (const ps of v.admission.podSets) {
        lines.push("Pod set " + ps.name + ": " + ps.count + " pod(s) on " + ps.flavor);
        for (const d of ps.domains || []) lines.push("  " + d.values.join("/") + ": " + d.pods);
      }
    }
    if (v.placement && v.placement.cluster) state.worker = v.placement.cluster;
    const events = el("table", { class: "events" }, el("caption", {}, "Events"),
      el("thead", {}, el("tr", {}, ...["When", "Type", "Reason", "About", "Message"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...out.events.map((e) => el("tr", {}, el("td", {}, ageOf(e.time) + " ago" + (e.count ? " (×" + e.count + ")" : "")),
        el("td", {}, e.type), el("td", {}, e.reason), el("td", {}, e.object), el("td", {}, e.note)))));
    box.replaceChildren(el("pre", { "data-explain": sel.key }, lines.join("\n")), out.events.length ? events : el("p", {}, "No events."));
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, String(err.message || err)));
  }
}

// ---- Refresh

let refreshing = false;
let again = false;

async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    try { drawFleet(await getJSON("/api/clusters")); showError("fleet-error", null); } catch (e) { showError("fleet-error", e); }
    if (state.worker) {
      try { drawTopology(await getJSON("/api/topology?cluster=" + encodeURIComponent(state.worker))); showError("topo-error", null); } catch (e) { showError("topo-error", e); document.getElementById("heatmaps").replaceChildren(); }
    }
    try { drawQueues(await getJSON("/api/queues")); showError("queues-error", null); } catch (e) { showError("queues-error", e); }
    try { drawWorkloads(await getJSON("/api/workloads")); showError("wl-error", null); } catch (e) { showError("wl-error", e); }
    document.getElementById("live").textContent = "live, updated " + new Date().toLocaleTimeString();
  } finally {
    refreshing = false;
    if (again) { again = false; refresh(); }
  }
}

document.getElementById("worker-select").addEventListener("change", (e) => { state.worker = e.target.value; refresh(); });
drawLegend();
refresh();
const changes = new EventSource("/api/changes");
changes.addEventListener("change", async () => { if (state.selected) await refreshExplain(); refresh(); });
changes.onerror = () => { document.getElementById("live").textContent = "reconnecting…"; };
// Summaries change on the workers, which the page does not watch: read
// the topology again every 10 seconds too.
setInterval(refresh, 10000);
