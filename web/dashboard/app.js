// The dashboard's own code: polls /admin/stats (same origin, the admin listener) and draws it.
// Rates over no samples arrive as null and are shown as "–", never as 0.
// ?interval=MS sets the poll period (default 1000); #token=T (or the form) sets the admin token.
"use strict";
(function () {
  const params = new URLSearchParams(location.search);
  const interval = Math.max(100, Number(params.get("interval")) || 1000);
  const windowPoints = 300;  // points kept per chart
  const routes = ["edge", "cloud-small", "cloud-large", "cache", "gateway", "none"];
  const colours = { "edge": "#2e7d32", "cloud-small": "#1565c0", "cloud-large": "#6a1b9a", "cache": "#ef6c00", "gateway": "#757575", "none": "#c62828" };
  let token = new URLSearchParams(location.hash.slice(1)).get("token") || sessionStorage.getItem("hengshi-admin-token") || "";

  const state = { polls: 0, errors: 0, last: null, previous: null };
  window.hengshiDashboard = state;  // read by the end-to-end test

  const $ = (id) => document.getElementById(id);
  const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1) + "%");
  const num = (v, digits) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
  const width = (el) => Math.max(360, el.clientWidth || 400);

  function makeChart(el, seriesNames, yLabel) {
    const series = [{}].concat(seriesNames.map((name) => ({ label: name, stroke: colours[name] || "#333", width: 2, points: { show: false } })));
    const data = [[]].concat(seriesNames.map(() => []));
    return new uPlot({ width: width(el), height: 220, series, axes: [{}, { label: yLabel }], legend: { live: false } }, data, el);
  }
  const routeChart = makeChart($("routes-chart"), routes, "req/s");
  const latencyChart = makeChart($("latency-chart"), routes, "ms");
  state.charts = { routes: routeChart, latency: latencyChart };

  function push(chart, time, values) {
    const data = chart.data.map((column) => column.slice(-(windowPoints - 1)));
    data[0].push(time);
    values.forEach((v, i) => data[i + 1].push(v));
    chart.setData(data);
  }

  function rows(tbody, cells) {
    tbody.innerHTML = "";
    for (const row of cells) {
      const tr = document.createElement("tr");
      for (const cell of row) {
        const td = document.createElement("td");
        td.textContent = cell;
        tr.appendChild(td);
      }
      tbody.appendChild(tr);
    }
  }

  function render(stats, previous, seconds) {
    $("requests").textContent = stats.requests;
    const answers = stats.answers || {};
    const degraded = (answers.canned || 0) + (answers.handoff || 0) + (answers.stale || 0);
    $("model-share").textContent = stats.requests ? pct(answers.model / stats.requests) : "–";
    $("degraded-note").textContent = `${degraded} degraded, ${answers.error || 0} errors`;
    $("saved").textContent = num(stats.cost.saved, 2);
    $("saved-note").textContent = `${pct(stats.cost.saved_share)} of ${num(stats.cost.all_cloud_large, 2)}; billed ${num(stats.cost.billed, 2)}`;
    $("cache-rate").textContent = pct(stats.cache.hit_rate);
    const hits = Object.entries(stats.cache.hits || {}).map(([tier, n]) => `${tier} ${n}`).join(", ");
    $("cache-note").textContent = hits ? hits : "no hits";
    $("fallback-rate").textContent = pct(stats.edge_fallback.rate);
    $("fallback-note").textContent = `of ${stats.edge_fallback.entered} that entered the edge`;
    const shadow = stats.shadow;
    $("shadow-rates").textContent = `${pct(shadow.false_fallback.rate)} / ${pct(shadow.missed_fallback.rate)}`;
    $("shadow-note").textContent = `n = ${shadow.false_fallback.samples} / ${shadow.missed_fallback.samples} shadow samples`;
    const offline = !!stats.offline;
    $("mode").textContent = offline ? "offline" : "online";
    $("mode").className = offline ? "badge bad" : "badge";

    const now = Date.now() / 1000;
    const count = (s, route) => (s && s.routes && s.routes[route] ? s.routes[route].requests : 0);
    push(routeChart, now, routes.map((r) => (previous && seconds > 0 ? Math.max(0, count(stats, r) - count(previous, r)) / seconds : 0)));
    push(latencyChart, now, routes.map((r) => (stats.latency[r] ? stats.latency[r].p95_ms : null)));

    rows($("latency-table").tBodies[0], Object.entries(stats.latency).map(([route, l]) =>
      [route, l.requests, num(l.p50_ms, 2), num(l.p95_ms, 2), num(l.p99_ms, 2)]));
    const fallback = [];
    for (const [type, n] of Object.entries(stats.edge_fallback.by_type || {})) fallback.push([type, n, "", ""]);
    for (const [task, r] of Object.entries(stats.edge_fallback.by_task_type || {})) {
      fallback.push(["task " + task, "", pct(r.rate), r.samples]);
    }
    rows($("fallback-table").tBodies[0], fallback);
    rows($("breaker-table").tBodies[0], Object.entries(stats.breakers || {}).map(([member, s]) => [member, s]));
  }

  async function poll() {
    const started = Date.now();
    try {
      const headers = token ? { Authorization: "Bearer " + token } : {};
      const reply = await fetch("/admin/stats", { headers, cache: "no-store" });
      if (reply.status === 401) {
        $("token-form").style.display = "flex";
        $("updated").textContent = "admin token needed";
      } else if (reply.ok) {
        const stats = await reply.json();
        const seconds = state.lastAt ? (started - state.lastAt) / 1000 : 0;
        state.previous = state.last;
        render(stats, state.last, seconds);
        state.last = stats;
        state.lastAt = started;
        state.polls += 1;
        $("updated").textContent = "updated " + new Date().toLocaleTimeString();
      } else {
        state.errors += 1;
        $("updated").textContent = "/admin/stats answered " + reply.status;
      }
    } catch (error) {
      state.errors += 1;
      $("updated").textContent = "gateway unreachable: " + error.message;
    }
    setTimeout(poll, Math.max(0, interval - (Date.now() - started)));
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token").value;
    sessionStorage.setItem("hengshi-admin-token", token);
    $("token-form").style.display = "none";
  });
  window.addEventListener("resize", () => {
    for (const [id, chart] of [["routes-chart", routeChart], ["latency-chart", latencyChart]]) {
      chart.setSize({ width: width($(id)), height: 220 });
    }
  });
  poll();
})();
