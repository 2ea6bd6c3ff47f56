// Workspace detail: keep state, events and logs fresh; reload the page when the state changes so the
// action buttons and the notebook link match it.
(function () {
  "use strict";
  const section = document.getElementById("cluster");
  if (!section) return;
  const api = section.dataset.api;
  const shownState = document.getElementById("state").textContent.trim();

  async function json(url) {
    const response = await fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" });
    return response.ok ? response.json() : null;
  }

  async function refresh() {
    const workspace = await json(api);
    if (workspace && workspace.state !== shownState) {
      window.location.reload();
      return;
    }
    if (workspace) document.getElementById("reason").textContent = workspace.reason;
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

  refresh();
  setInterval(refresh, 2000);
})();
