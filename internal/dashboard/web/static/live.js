// The live pages' behaviour: the list's start form, and a session page's
// figures from its event stream, with the chart fetched again as events come.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);

  const form = $("live-start");
  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const headers = { "Content-Type": "application/json" };
      if (form.token) headers.Authorization = "Bearer " + form.token.value;
      const resp = await fetch("/api/live/start", {
        method: "POST", headers, body: JSON.stringify({ scenario: form.scenario.value }),
      });
      const body = await resp.json();
      if (resp.status === 201) location.href = "/live/" + body.id;
      else $("live-start-error").textContent = body.error;
    });
  }

  const main = $("live");
  if (!main) return;
  const id = main.dataset.session;
  const ms = (v) => (v ? v.toFixed(3) + " ms" : "–");
  let target = 0, duration = 0, chartBusy = false, chartAgain = false;

  // One chart request at a time; events that come meanwhile ask for one more.
  async function refreshChart() {
    if (chartBusy) { chartAgain = true; return; }
    chartBusy = true;
    try {
      const resp = await fetch("/live/" + encodeURIComponent(id) + "/chart.svg", { cache: "no-store" });
      if (resp.ok) $("live-chart").innerHTML = await resp.text();
    } finally {
      chartBusy = false;
      if (chartAgain) { chartAgain = false; refreshChart(); }
    }
  }

  function setState(state, message) {
    const el = $("live-state");
    el.textContent = state;
    el.className = "state-" + state;
    if (message) {
      $("live-message").textContent = message;
      $("live-message").className = state;
    }
  }

  function apply(e) {
    $("live-seq").textContent = e.seq;
    if (e.target_qps !== undefined) target = e.target_qps;
    if (e.duration_s !== undefined) duration = e.duration_s;
    if (e.kind === "run") {
      $("live-run").textContent = "run " + e.run_index + " of " + e.run_total + ": " + (e.mode || "") + " " + (e.label || "");
    }
    if (e.kind === "progress" || e.kind === "end" || e.kind === "run-end") {
      if (e.calls !== undefined) {
        $("live-qps").textContent = (e.qps || 0).toFixed(1) + " qps" + (target ? " of " + target : " (max)");
        $("live-p50").textContent = ms(e.p50_ms);
        $("live-p90").textContent = ms(e.p90_ms);
        $("live-p99").textContent = ms(e.p99_ms);
        $("live-calls").textContent = e.calls;
        $("live-errors").textContent = e.errors || 0;
        $("live-elapsed").textContent = (e.elapsed_s || 0).toFixed(1) + " s" + (duration ? " of " + duration + " s" : "");
      }
    }
    if (e.kind === "run-end" && e.message) $("live-message").textContent = e.message;
    if (e.kind === "end") setState("done", e.message);
    if (e.kind === "error") setState("failed", e.message);
    refreshChart();
  }

  const stream = new EventSource("/api/live/" + encodeURIComponent(id) + "/stream");
  stream.onmessage = (m) => {
    const e = JSON.parse(m.data);
    apply(e);
    // The server ends the stream with the session; closing here keeps the
    // browser from reconnecting to a stream that has nothing more.
    if (e.kind === "end" || e.kind === "error") stream.close();
  };
})();
