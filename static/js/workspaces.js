// My workspaces: redraw the table's rows every few seconds from the server (?rows=1), without reloading
// the page. The server renders each row with only the actions its viewer may take, so this script decides
// nothing about who may do what; without it the page still works, it just does not refresh.
(function () {
  "use strict";
  const table = document.getElementById("workspaces");
  if (!table || !table.dataset.rows) return;
  const body = table.querySelector("tbody");

  async function refresh() {
    if (document.hidden || body.contains(document.activeElement)) return; // never pull a row from under a click
    try {
      const response = await fetch(table.dataset.rows, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
      if (response.ok && !response.redirected) body.innerHTML = await response.text();
    } catch (error) {
      // Keep the last rows on a transient network error; the next tick retries.
    }
  }

  setInterval(refresh, 2000);
})();
