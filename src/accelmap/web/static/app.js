// accelmap's page: a form, the JSON API, plotly charts. No build step, no framework.
"use strict";

const $ = (id) => document.getElementById(id);
let last = null; // the last result (a plan or estimate --json object) and its kind

function fields(kind) {
  const train = $("mode").value === "train";
  const num = (id) => Number($(id).value);
  if (kind === "frontier") // serving only: the prompt and output lengths of the form
    return { model: $("model").value.trim(), cluster: $("cluster").value.trim(),
      isl: num("prompt"), osl: num("output") };
  const body = { model: $("model").value.trim(), cluster: $("cluster").value.trim(), train };
  if (kind === "plan") {
    if (train) {
      body.seq = num("seq");
      body.global_batch_tokens = $("global_batch_tokens").value.trim();
      if ($("tokens").value.trim()) body.tokens = $("tokens").value.trim();
    } else {
      body.prompt = num("prompt");
      body.output = num("output");
      body.scenario = "batch";
    }
  } else {
    body.tp = num("tp");
    body.pp = num("pp");
    if (train) {
      body.seq = num("seq");
      body.batch = num("est_batch");
      if ($("tokens").value.trim()) body.tokens = $("tokens").value.trim();
    } else {
      body.prompt = num("prompt");
      body.output = num("output");
      body.batch = num("batch");
    }
  }
  return body;
}

function fmtTime(s) {
  if (typeof s !== "number") return "-";
  if (s >= 86400) return (s / 86400).toFixed(1) + " d";
  if (s >= 1) return s.toPrecision(4) + " s";
  if (s >= 1e-3) return (s * 1e3).toPrecision(4) + " ms";
  return (s * 1e6).toPrecision(4) + " µs";
}
const fmtBytes = (b) => (typeof b === "number" ? (b / 1e9).toFixed(2) + " GB" : "-");
const mappingText = (m) =>
  Object.entries(m)
    .filter(([k, v]) => v === true || !(v === 1 || v === false || v === null || v === "none") ||
      ["dp", "tp", "pp"].includes(k))
    .map(([k, v]) => `${k}=${v}`).join(" ");

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

function clearResult() {
  // an error must not stand over the previous answer: the result under it goes
  last = null;
  $("results").hidden = true;
  $("title").textContent = "";
  $("summary").innerHTML = "";
  $("plan-table").innerHTML = "";
  $("plan-table").hidden = true;
  $("charts").innerHTML = "";
  $("notes").innerHTML = "";
  $("export-box").hidden = true;
}

// what each search rule refuses (mapping/constraints.py, search/serve*.py), for "0 feasible"
const RULES = {
  world_size: "dp x tp x pp x cp is not the cluster's device count",
  heads_divisible: "the attention heads do not split over tp",
  kv_heads: "the KV heads can be neither split nor replicated over tp",
  ffn_divisible: "an FFN width does not split over tp",
  layers_over_stages: "more pipeline stages than layers",
  split_conflict: "first/last stage layers given together with embedding/loss as layers",
  pipeline_split: "the layers do not split into the pipeline stages",
  virtual_stages: "the stages do not split into vpp chunks of whole layers",
  schedule: "the pipeline schedule does not match vpp",
  experts_divisible: "ep does not split the experts within dp x cp",
  tp_in_scale_up: "tp crosses the scale-up domain (the fast links)",
  batch_divisible: "the global batch does not split into dp x micro-batch",
  cp_divides_seq: "the sequence does not split into 2 x cp chunks",
  shard_group: "the HSDP shard group does not divide dp",
  memory: "does not fit in device memory",
  memory_tight: "fits only within the memory model's error band (include_tight keeps it)",
};

function infeasibleReasons(r) {
  const rules = Object.entries(r.rejected_by_rule || {}).sort((a, b) => b[1] - a[1]);
  if (!rules.length) return ["0 feasible: no mapping was evaluated (see the notes)"];
  return ["0 feasible: every mapping was refused by a rule:"].concat(rules.map(([k, n]) =>
    `${k} (${n.toLocaleString("en")} mappings): ${RULES[k] || "see the notes"}`));
}

async function post(url, body) {
  const r = await fetch(url, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  if (!r.ok) {
    let msg = `${r.status} ${r.statusText}`;
    try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return r;
}

function planTable(result) {
  const t = $("plan-table");
  const plans = result.plans || [];
  t.hidden = !plans.length;
  if (!plans.length) { t.innerHTML = ""; return; }
  const train = "mfu" in plans[0];
  const cols = [["#", null], ["mapping", null], ["tokens/s", "tokens_per_s"],
    train ? ["MFU", "mfu"] : ["TPOT", "tpot_s"], train ? ["step", "step_time_s"] : ["TTFT", "ttft_s"],
    ["memory/device", "memory_per_device_bytes"], ["$/M tokens", "usd_per_million_tokens"],
    ["J/token at TDP", "energy_j_per_token_tdp"]];
  const head = "<tr>" + cols.map(([c]) => `<th>${c}</th>`).join("") + "</tr>";
  const rows = plans.map((p, i) => {
    const cells = cols.map(([c, k]) => {
      if (c === "#") return `<td>${i + 1}</td>`;
      if (c === "mapping") return `<td class="mapping">${mappingText(p.mapping)}</td>`;
      const v = p[k];
      if (typeof v !== "number") return "<td>-</td>";
      if (k === "mfu") return `<td>${(v * 100).toFixed(1)} %</td>`;
      if (k === "tokens_per_s") return `<td>${Math.round(v).toLocaleString("en")}</td>`;
      if (k.endsWith("_s")) return `<td>${fmtTime(v)}</td>`;
      if (k.endsWith("_bytes")) return `<td>${fmtBytes(v)}</td>`;
      return `<td>${v.toPrecision(3)}</td>`;
    });
    return `<tr class="${i === 0 ? "best" : ""}">${cells.join("")}</tr>`;
  });
  t.innerHTML = `<caption>Top plans by ${result.objective}</caption>` + head + rows.join("");
}

function summary(kind, data) {
  const r = data.result;
  const lines = [];
  if (kind === "frontier") {
    for (const c of r.frontier || []) {
      const f = c.front || [];
      lines.push(f.length ? `${c.cluster}: ${f.length} of ${c.points.length} points on the ` +
        `front, from ${f[0].tokens_per_s_per_user.toFixed(0)} tokens/s per user at ` +
        `${f[0].tokens_per_s_per_device.toFixed(0)} per device to ` +
        `${f[f.length - 1].tokens_per_s_per_user.toFixed(0)} at ` +
        `${f[f.length - 1].tokens_per_s_per_device.toFixed(0)}` :
        `${c.cluster}: no layout runs: ${(c.skipped || []).join("; ")}`);
    }
    (r.notes || []).forEach((x) => lines.push(x));
  } else if (kind === "plan") {
    lines.push(`${r.evaluated.toLocaleString("en")} mappings evaluated, ` +
      `${r.feasible.toLocaleString("en")} feasible, ${r.seconds.toFixed(2)} s` +
      (r.interrupted ? " (stopped early: best so far)" : ""));
    if (r.feasible === 0) infeasibleReasons(r).forEach((x) => lines.push(x));
    (r.explanation || []).slice(0, 3).forEach((x) => lines.push(x));
  } else {
    if (!r.feasible) lines.push(`does not run: ${r.reason}`);
    if (typeof r.step_time_s === "number")
      lines.push(`step ${fmtTime(r.step_time_s)}, ${Math.round(r.tokens_per_s).toLocaleString("en")}` +
        ` tokens/s, MFU ${(r.mfu * 100).toFixed(1)} %`);
    if (typeof r.ttft_s === "number")
      lines.push(`TTFT ${fmtTime(r.ttft_s)}, TPOT ${fmtTime(r.tpot_s)}, ` +
        `${r.tokens_per_s.toFixed(1)} output tokens/s`);
    if (r.memory) lines.push(`memory ${fmtBytes(r.memory.total_bytes)} of ` +
      `${fmtBytes(r.memory.capacity_bytes)} per device (${r.memory.fit})`);
  }
  $("summary").innerHTML = lines.map((x) => `<p>${x.replace(/</g, "&lt;")}</p>`).join("");
}

function charts(figures) {
  const box = $("charts");
  box.innerHTML = "";
  for (const f of figures) {
    const div = document.createElement("div");
    div.className = "chart";
    div.id = "chart-" + f.id;
    box.appendChild(div);
    Plotly.newPlot(div, f.figure.data, f.figure.layout, { displaylogo: false, responsive: true });
  }
}

async function run(kind) {
  showError("");
  const buttons = document.querySelectorAll("button");
  buttons.forEach((b) => (b.disabled = true));
  $("status").textContent = kind === "plan" ? "searching every mapping…" :
    kind === "frontier" ? "simulating concurrency sweeps…" : "estimating…";
  const t0 = performance.now();
  try {
    const data = await (await post(`/api/${kind}/figures`, fields(kind))).json();
    last = { kind, result: data.result };
    $("results").hidden = false;
    $("title").textContent = data.title;
    summary(kind, data);
    planTable(kind === "plan" ? data.result : {});
    $("export-box").hidden = !(kind === "plan" && (data.result.plans || []).length);
    charts(data.figures);
    $("notes").innerHTML = (data.notes || []).map((n) => `<li>${n.replace(/</g, "&lt;")}</li>`)
      .join("");
    $("status").textContent = `done in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
    document.body.dataset.state = "done";
  } catch (e) {
    clearResult();
    showError(e.message);
    $("status").textContent = "";
    document.body.dataset.state = "error";
  } finally {
    buttons.forEach((b) => (b.disabled = false));
  }
}

async function download(url, body, name) {
  showError("");
  try {
    const r = await post(url, body);
    const href = URL.createObjectURL(await r.blob());
    const a = document.createElement("a");
    const cd = r.headers.get("Content-Disposition") || "";
    a.download = (cd.match(/filename="([^"]+)"/) || [])[1] || name;
    a.href = href;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(href), 10000);
  } catch (e) {
    showError(e.message);
  }
}

async function init() {
  $("mode").addEventListener("change", () => {
    const train = $("mode").value === "train";
    document.querySelector("fieldset.train").hidden = !train;
    document.querySelector("fieldset.serve").hidden = train;
  });
  $("job").addEventListener("submit", (e) => { e.preventDefault(); run("plan"); });
  $("run-estimate").addEventListener("click", () => run("estimate"));
  $("run-frontier").addEventListener("click", () => run("frontier"));
  $("download-report").addEventListener("click", () =>
    last && download("/api/report", last.result, `${last.kind}-report.html`));
  $("download-export").addEventListener("click", () => {
    const fmt = $("export-format").value;
    last && download("/api/export", { plan: last.result, format: fmt || null }, "export.zip");
  });
  try {
    const cat = await (await fetch("/api/catalog")).json();
    $("models").innerHTML = cat.models.map((m) => `<option value="${m.id}">${m.name}</option>`).join("");
    $("systems").innerHTML = cat.systems.map((s) => `<option value="${s.id}">${s.name}</option>`).join("");
    $("export-format").innerHTML = '<option value="">every format</option>' +
      cat.exporters.map((e) => `<option value="${e.name}">${e.framework} (${e.plans.join(", ")})</option>`).join("");
    const v = await (await fetch("/api/version")).json();
    $("version").textContent = `accelmap ${v.version} · search cap ${v.search_s} s per request`;
    document.body.dataset.state = "ready";
  } catch (e) {
    showError("could not load the catalog: " + e.message);
  }
}

init();
