// The request form follows the chosen team and offering: only the offerings the team's policy allows,
// its default and longest runtime, the quota left to this member, the GPU counts the offering comes in,
// and the images and fields of the chosen kind. The data is embedded in the page (json_script); the
// server still validates everything.
(function () {
  "use strict";
  const form = document.getElementById("request-form");
  const dataNode = document.getElementById("request-form-data");
  if (!form || !dataNode) return;
  const data = JSON.parse(dataNode.textContent);
  const teams = Object.fromEntries(data.teams.map((t) => [t.slug, t]));
  const teamSelect = document.getElementById("id_team");
  const countSelect = document.getElementById("id_gpu_count");
  const runtime = document.getElementById("id_max_runtime_hours");
  const image = document.getElementById("id_image");
  const workers = document.getElementById("id_workers");
  const rows = Array.from(document.querySelectorAll("#offerings tbody tr"));
  let runtimeEdited = false;
  let lastDefault = runtime.value;

  function kind() {
    const checked = form.querySelector("input[name=kind]:checked");
    return checked ? checked.value : "notebook";
  }

  function chosenOffering() {
    const checked = form.querySelector("input[name=offering]:checked");
    return checked ? checked.value : null;
  }

  function showCounts() {
    const slug = chosenOffering();
    const counts = slug && data.offerings[slug] ? data.offerings[slug].counts : [1];
    const previous = countSelect.value;
    countSelect.replaceChildren();
    for (const n of counts) {
      const option = document.createElement("option");
      option.value = String(n);
      option.textContent = n === 0 ? "0 (CPU only)" : String(n);
      countSelect.appendChild(option);
    }
    countSelect.value = counts.map(String).includes(previous) ? previous : String(counts[0]);
  }

  function showTeam() {
    const team = teams[teamSelect.value];
    if (!team) return;
    const allowed = new Set(team.offerings);
    for (const row of rows) {
      const slug = row.dataset.slug;
      const radio = row.querySelector("input[name=offering]");
      const ok = allowed.has(slug);
      row.hidden = !ok;
      radio.disabled = !ok;
      if (!ok) radio.checked = false;
      const left = team.quota_left[slug];
      row.querySelector(".quota-left").textContent = !ok ? "" : left === null ? "no quota needed" : left;
    }
    document.getElementById("no-offerings").hidden = team.offerings.length > 0;
    for (const node of document.querySelectorAll(".team-name")) node.textContent = team.name;
    document.getElementById("runtime-max").textContent = team.max_runtime_hours;
    document.getElementById("runtime-default").textContent = team.default_runtime_hours;
    runtime.max = team.max_runtime_hours;
    if (!runtimeEdited || Number(runtime.value) > team.max_runtime_hours) {
      runtime.value = team.default_runtime_hours;
      runtimeEdited = false;
    }
    lastDefault = String(team.default_runtime_hours);
    showCounts();
  }

  function showKind() {
    form.dataset.kind = kind();
    image.setAttribute("list", "images-" + kind());
    if (kind() === "notebook") workers.value = 1;
  }

  teamSelect.addEventListener("change", showTeam);
  for (const radio of form.querySelectorAll("input[name=offering]")) radio.addEventListener("change", showCounts);
  for (const radio of form.querySelectorAll("input[name=kind]")) radio.addEventListener("change", showKind);
  runtime.addEventListener("input", () => {
    runtimeEdited = runtime.value !== lastDefault;
  });
  // A page sent back with errors keeps what the person typed.
  runtimeEdited = document.getElementById("form-errors") !== null;
  showKind();
  showTeam();
})();
