// My workspaces: fetch the API every few seconds and redraw the table, without reloading the page.
(function () {
  "use strict";
  const table = document.getElementById("workspaces");
  if (!table) return;
  const body = table.querySelector("tbody");
  const csrf = document.querySelector("[name=csrfmiddlewaretoken]").value;
  const detailBase = table.dataset.detail;

  function age(iso) {
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 90) return Math.round(seconds) + " s";
    if (seconds < 5400) return Math.round(seconds / 60) + " min";
    if (seconds < 129600) return Math.round(seconds / 3600) + " h";
    return Math.round(seconds / 86400) + " d";
  }

  function cell(row, text, cls) {
    const td = row.insertCell();
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function actionButton(td, ws, verb, label) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = label;
    button.dataset.verb = verb;
    button.className = "small";
    button.addEventListener("click", async () => {
      if (verb === "delete" && !confirm("Delete " + ws.name + " and its home volume?")) return;
      button.disabled = true;
      const url = table.dataset.api + ws.id + "/" + (verb === "delete" ? "" : verb + "/");
      const response = await fetch(url, {
        method: verb === "delete" ? "DELETE" : "POST",
        headers: { "X-CSRFToken": csrf, "Accept": "application/json" },
        credentials: "same-origin",
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({ detail: response.statusText }));
        alert(body.detail);
      }
      refresh();
    });
    td.appendChild(button);
  }

  function draw(workspaces) {
    body.replaceChildren();
    if (workspaces.length === 0) {
      const row = body.insertRow();
      const td = cell(row, "No workspaces yet.", "hint");
      td.colSpan = 9;
      return;
    }
    for (const ws of workspaces) {
      const row = body.insertRow();
      row.dataset.id = ws.id;
      row.dataset.state = ws.state;
      const name = row.insertCell();
      const link = document.createElement("a");
      link.href = detailBase + ws.id + "/";
      link.textContent = ws.name;
      name.appendChild(link);
      cell(row, ws.kind === "job" ? "Training job" : "Notebook");
      cell(row, ws.team);
      cell(row, ws.owner);
      cell(row, ws.offering_name + (ws.gpu_count > 1 ? " ×" + ws.gpu_count : "") + (ws.workers > 1 ? " (" + ws.workers + " workers)" : ""));
      const state = cell(row, ws.state, "state state-" + ws.state);
      state.title = ws.reason;
      cell(row, ws.node_name || "");
      cell(row, age(ws.created_at));
      const actions = row.insertCell();
      if (["queued", "admitted", "provisioning", "running"].includes(ws.state)) actionButton(actions, ws, "stop", "Stop");
      if (["stopped", "preempted", "expired", "failed"].includes(ws.state)) actionButton(actions, ws, "resume", "Resume");
      actionButton(actions, ws, "delete", "Delete");
    }
  }

  async function refresh() {
    try {
      const response = await fetch(table.dataset.api + "?limit=200", { headers: { "Accept": "application/json" }, credentials: "same-origin" });
      if (response.ok) draw((await response.json()).results);
    } catch (error) {
      // Keep the last table on a transient network error; the next tick retries.
    }
  }

  refresh();
  setInterval(refresh, 2000);
})();
