// Draw the quota figures built by scheduling/charts.py (passed through json_script).
(function () {
  "use strict";
  const source = document.getElementById("quota-figures");
  const holder = document.getElementById("quota-charts");
  if (!source || !holder || !window.Plotly) return;
  for (const figure of JSON.parse(source.textContent)) {
    const div = document.createElement("div");
    div.className = "chart";
    holder.appendChild(div);
    window.Plotly.newPlot(div, figure.data, figure.layout, { displaylogo: false, responsive: true });
  }
})();
