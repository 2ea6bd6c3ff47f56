// Draw figures built by the pure chart builders (scheduling/charts.py, portal/billing/charts.py): each
// element with data-figures names the json_script that holds its list of plotly figures.
(function () {
  "use strict";
  if (!window.Plotly) return;
  for (const holder of document.querySelectorAll("[data-figures]")) {
    const source = document.getElementById(holder.dataset.figures);
    if (!source) continue;
    for (const figure of JSON.parse(source.textContent)) {
      const div = document.createElement("div");
      div.className = "chart";
      holder.appendChild(div);
      window.Plotly.newPlot(div, figure.data, figure.layout, { displaylogo: false, responsive: true });
    }
  }
})();
