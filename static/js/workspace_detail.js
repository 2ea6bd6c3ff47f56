// Workspace detail: keep state, events and logs fresh; reload the page when the state changes so the
// action buttons and the notebook link match it.
(function () {
  "use strict";
  const section = document.getElementById("cluster");
  if (!section) return;
  const api = section.dataset.api;
  const shownState = document.getElementById("state").textContent.trim();
  const activityCard = document.getElementById("activity");
  const shownWarning = activityCard ? activityCard.dataset.warned : "";

  // The idle banner's countdown to reclaim.
  const countdown = document.getElementById("idle-countdown");
  function tick() {
    const left = Math.max(0, Math.round((Date.parse(countdown.dataset.countdown) - Date.now()) / 1000));
    const minutes = Math.floor(left / 60);
    countdown.textContent = left ? minutes + " min " + (left % 60) + " s left" : "due now";
  }
  if (countdown) { tick(); setInterval(tick, 1000); }

  // The activity sparkline (figure built by scheduling/activity_charts.py).
  const figure = document.getElementById("activity-figure");
  const chart = document.getElementById("activity-chart");
  if (figure && chart && window.Plotly) {
    const f = JSON.parse(figure.textContent);
    window.Plotly.newPlot(chart, f.data, f.layout, { displaylogo: false, responsive: true, staticPlot: false });
  }

  async function json(url) {
    const response = await fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" });
    return response.ok ? response.json() : null;
  }

  // The workspace every 2 s; its cluster events and logs, which the portal asks Kubernetes for, every 10 s;
  // nothing while the tab is hidden. All three count against the viewer's API rate (API_THROTTLE_USER), so an
  // open tab costs about 2,500 requests an hour rather than 5,400.
  const EVERY_MS = 2000;
  const SLOW_EVERY = 5;
  let ticks = 0;

  async function refreshWorkspace() {
    const workspace = await json(api);
    const warned = workspace && workspace.activity && workspace.activity.idle_warned_at ? "warned" : "";
    if (workspace && (workspace.state !== shownState || (activityCard && warned !== (shownWarning ? "warned" : "")))) {
      window.location.reload();
      return false;
    }
    if (workspace) document.getElementById("reason").textContent = workspace.reason;
    return true;
  }

  async function refreshCluster() {
    const events = await json(api + "cluster-events/");
    if (events) {
      const list = document.getElementById("k8s-events");
      list.replaceChildren();
      for (const e of events.events) {
        const item = document.createElement("li");
        item.textContent = (e.at || "") + " " + e.type + " " + e.reason + ": " + e.message;
        list.appendChild(item);
      }
      if (!events.events.length) list.innerHTML = "<li class='hint'>None yet.</li>";
    }
    const logs = await json(api + "logs/");
    if (logs) document.getElementById("logs").textContent = logs.lines.join("\n") || "No output yet.";
  }

  async function refresh() {
    if (document.hidden) return;
    const slow = ticks % SLOW_EVERY === 0;
    ticks += 1;
    if (await refreshWorkspace() && slow) await refreshCluster();
  }

  refresh();
  setInterval(refresh, EVERY_MS);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { ticks = 0; refresh(); } // back in view: everything at once
  });
})();
