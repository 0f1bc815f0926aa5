/* radvqa viewer page. Two data sources with one interface:
 *  - server mode: the JSON API of `radvqa view DIR` (/api/facets, /api/query)
 *  - static mode: rows embedded in the page by `radvqa view DIR --html FILE`
 * Dataset text is always inserted with textContent (never as HTML): rows come from reports. */
"use strict";
(function () {
  const FACETS = [
    ["strategy", "Strategy"], ["question_type", "Question type"], ["finding", "Finding"],
    ["region", "Region"], ["grade", "Grade"], ["split", "Split"], ["polarity", "Polarity"], ["source", "Source"],
  ];
  const NULL = "__null__";
  // one colour per answer part (colour-blind-friendly set first, then more)
  const PALETTE = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4",
    "#f032e6", "#bfef45", "#fabed4", "#469990", "#dcbeff", "#9a6324"];
  const SVGNS = "http://www.w3.org/2000/svg";

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else if (k === "style") node.style.cssText = v; // CSSOM: allowed by the page's CSP, unlike style="..."
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }
  const shown = (v) => (v === NULL ? "(none)" : v);

  // ---------------------------------------------------------------- data sources
  function serverSource() {
    async function getJSON(url) {
      const r = await fetch(url, { headers: { Accept: "application/json" } });
      const body = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
      return body;
    }
    return {
      mode: "server",
      facets: () => getJSON("/api/facets"),
      query: (state) => getJSON("/api/query?" + toParams(state).toString()),
      study: async (id) => {
        const r = await fetch("/api/study?id=" + encodeURIComponent(id));
        return r.ok ? r.json() : null;
      },
    };
  }

  function staticSource(data) {
    const FIELD = { finding: "findings", region: "regions" };
    function matches(item, state) {
      for (const [name] of FACETS) {
        const want = state.filters[name];
        if (!want || !want.length) continue;
        const col = FIELD[name] || name;
        const v = item[col];
        if (Array.isArray(v) || FIELD[name]) {
          const list = v || [];
          const ok = want.some((w) => (w === NULL ? list.length === 0 : list.includes(w)));
          if (!ok) return false;
        } else if (!want.some((w) => (w === NULL ? v === null || v === undefined : v === w))) {
          return false;
        }
      }
      const words = (state.q || "").toLowerCase().split(/\s+/).filter(Boolean);
      const q = (item.question || "").toLowerCase();
      return words.every((w) => q.includes(w));
    }
    return {
      mode: "static",
      facets: async () => data.facets,
      query: async (state) => {
        const hits = data.items.filter((it) => matches(it, state));
        return { total: hits.length, offset: state.offset, limit: state.limit,
          items: hits.slice(state.offset, state.offset + state.limit) };
      },
      study: async (id) => ((data.reports || {})[id] ? { report: data.reports[id] } : null),
      hasReports: Object.keys(data.reports || {}).length > 0,
    };
  }

  // ---------------------------------------------------------------- state <-> URL hash
  function blankState() {
    return { filters: {}, q: "", offset: 0, limit: 20 };
  }
  function toParams(state) {
    const p = new URLSearchParams();
    for (const [name] of FACETS) for (const v of state.filters[name] || []) p.append(name, v);
    if (state.q) p.set("q", state.q);
    if (state.offset) p.set("offset", String(state.offset));
    p.set("limit", String(state.limit));
    return p;
  }
  function fromHash() {
    const s = blankState();
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    for (const [name] of FACETS) {
      const vals = p.getAll(name).filter(Boolean);
      if (vals.length) s.filters[name] = vals;
    }
    s.q = p.get("q") || "";
    s.offset = Math.max(0, parseInt(p.get("offset") || "0", 10) || 0);
    s.limit = Math.min(200, Math.max(1, parseInt(p.get("limit") || "20", 10) || 20));
    return s;
  }

  // ---------------------------------------------------------------- rendering
  function renderFacets(info) {
    const box = $("facets");
    box.textContent = "";
    for (const [name, label] of FACETS) {
      const values = (info.facets || {})[name];
      if (!values || !values.length) continue;
      const sel = el("select", { id: "f-" + name, name, "data-facet": name });
      sel.append(el("option", { value: "", text: "(any)" }));
      for (const [v, c] of values) sel.append(el("option", { value: v, text: `${shown(v)} (${c})` }));
      sel.addEventListener("change", () => apply(true));
      box.append(el("label", { class: "field" }, label, sel));
    }
    $("dataset-name").textContent = info.dataset || "";
    const m = info.manifest || {};
    const lines = [`${info.total} QA rows`];
    for (const k of ["source", "version", "radvqa_version", "seed", "created"]) {
      if (m[k] !== undefined && m[k] !== null) lines.push(`${k}: ${typeof m[k] === "object" ? JSON.stringify(m[k]) : m[k]}`);
    }
    $("dataset-info").replaceChildren(...lines.map((t) => el("div", { text: t })));
  }

  function syncForm(state) {
    for (const [name] of FACETS) {
      const sel = $("f-" + name);
      if (!sel) continue;
      const v = (state.filters[name] || [])[0] || "";
      if (v && ![...sel.options].some((o) => o.value === v)) sel.append(el("option", { value: v, text: shown(v) }));
      sel.value = v;
    }
    $("q").value = state.q;
    const lim = $("limit");
    if (![...lim.options].some((o) => o.value === String(state.limit))) lim.append(el("option", { text: String(state.limit) }));
    lim.value = String(state.limit);
  }

  function readForm(state) {
    const s = blankState();
    for (const [name] of FACETS) {
      const sel = $("f-" + name);
      if (sel && sel.value) s.filters[name] = [sel.value];
    }
    s.q = $("q").value.trim();
    s.limit = parseInt($("limit").value, 10) || 20;
    s.offset = state.offset;
    return s;
  }

  function boxKey(b) {
    return [b.image_id, b.x1, b.y1, b.x2, b.y2, b.source].join("|");
  }

  // the boxes of one image, grouped by answer part (colour = part index); row boxes that no
  // part carries are drawn too, in grey, so nothing in the row is hidden
  function groupsFor(item, imageId, imageCount) {
    const onImage = (b) => b.image_id === imageId || (imageCount === 1 && !b.image_id);
    const groups = [];
    const seen = new Set();
    (item.answer_parts || []).forEach((part, i) => {
      const boxes = (part.boxes || []).filter(onImage);
      boxes.forEach((b) => seen.add(boxKey(b)));
      if (boxes.length) groups.push({ index: i, color: PALETTE[i % PALETTE.length], part, boxes });
    });
    const rest = (item.boxes || []).filter(onImage).filter((b) => !seen.has(boxKey(b)));
    if (rest.length) groups.push({ index: -1, color: "#9aa0a6", part: null, boxes: rest });
    return groups;
  }

  function partName(part) {
    if (!part) return "other boxes of the row";
    return part.tag || part.text || part.part_type;
  }

  function renderFigure(item, image, imageCount) {
    const wrap = el("div", { class: "imgwrap" });
    const groups = groupsFor(item, image.id, imageCount);
    const overlay = svg("svg", { class: "overlay", preserveAspectRatio: "none" });
    const setSize = (w, h) => {
      overlay.setAttribute("viewBox", `0 0 ${w} ${h}`);
      wrap.style.aspectRatio = `${w} / ${h}`; // layout is final before the (lazy) image arrives
    };
    if (image.width && image.height) setSize(image.width, image.height);
    const src = image.data_url || image.url;
    if (src) {
      const img = el("img", { src, alt: `image ${image.id || ""}`, loading: "lazy", decoding: "async" });
      img.addEventListener("load", () => {
        if (!(image.width && image.height)) setSize(img.naturalWidth, img.naturalHeight);
      });
      img.addEventListener("error", () => wrap.replaceChildren(el("div", { class: "noimg", text: `image could not be loaded: ${image.path}` })));
      wrap.append(img);
    } else {
      wrap.append(el("div", { class: "noimg", text: image.path
        ? `image not available: ${image.path} (missing, or outside the dataset's image roots)`
        : "no image file recorded for this image" }));
    }
    // without the image or its size there is no coordinate frame: list the boxes, draw none
    const drawable = Boolean(src || (image.width && image.height));
    for (const g of drawable ? groups : []) {
      g.boxes.forEach((b) => {
        const cls = "box" + (b.source === "region" ? " region" : "") + (g.index < 0 ? " other" : "");
        const r = svg("rect", { class: cls, x: b.x1, y: b.y1, width: Math.max(0, b.x2 - b.x1),
          height: Math.max(0, b.y2 - b.y1), stroke: g.color, "data-part": g.index });
        const t = svg("title", {});
        t.textContent = `${partName(g.part)} — ${b.label || ""} [${b.source}${b.reader ? ", " + b.reader : ""}]`;
        r.append(t);
        overlay.append(r);
      });
      if (g.index >= 0) {
        const b = g.boxes[0];
        const label = svg("text", { class: "box-label", x: b.x1 + 3, y: b.y1 + 14, fill: g.color, "data-part": g.index });
        label.textContent = String(g.index + 1);
        overlay.append(label);
      }
    }
    wrap.append(overlay);
    const legend = el("ul", { class: "legend" });
    for (const g of groups) {
      const li = el("li", { "data-part": g.index },
        el("span", { class: "swatch", style: `background:${g.color}` }),
        el("span", { text: `${g.index >= 0 ? g.index + 1 + ". " : ""}${partName(g.part)} (${g.boxes.length} box${g.boxes.length === 1 ? "" : "es"}${g.boxes.some((b) => b.source === "region") ? ", region" : ""})` }));
      // pointing at a legend entry dims the other parts' boxes
      li.addEventListener("mouseenter", () => overlay.querySelectorAll(".box").forEach((r) => r.classList.toggle("dim", r.dataset.part !== String(g.index))));
      li.addEventListener("mouseleave", () => overlay.querySelectorAll(".box").forEach((r) => r.classList.remove("dim")));
      legend.append(li);
    }
    if (!groups.length) legend.append(el("li", { class: "nobox" }, el("span", { class: "swatch none" }), "no boxes on this image"));
    return el("figure", { class: "fig", "data-image-id": image.id || "" }, wrap,
      el("figcaption", { text: [image.id, image.width && `${image.width}×${image.height}`].filter(Boolean).join(" · ") }),
      legend);
  }

  function gradeClass(g) {
    return "badge grade g-" + String(g || "none").replace(/\+/g, "p");
  }

  function renderPart(part, i) {
    const boxed = (part.boxes || []).length > 0;
    const chips = [];
    for (const k of ["certainty", "laterality", "severity"]) if (part[k]) chips.push(el("span", { class: "chip", text: part[k] }));
    for (const f of part.findings || []) chips.push(el("span", { class: "chip finding", text: f }));
    for (const r of part.regions || []) chips.push(el("span", { class: "chip region", text: "@" + r }));
    if (boxed) chips.push(el("span", { class: "chip", text: `${part.boxes.length} box${part.boxes.length === 1 ? "" : "es"}` }));
    const color = PALETTE[i % PALETTE.length];
    return el("li", { class: `part level-${part.level || 0}`, "data-part": i, style: `margin-left:${(part.level || 0) * 1.2}em;border-left-color:${boxed ? color : "transparent"}` },
      el("span", { class: "swatch" + (boxed ? "" : " none"), style: boxed ? `background:${color}` : null, title: boxed ? "box colour" : "no boxes" }),
      el("span", { class: "ptype", text: part.part_type }),
      el("span", {}, part.tag ? el("span", { class: "ptag", text: part.tag + ": " }) : null, part.text,
        chips.length ? el("span", { class: "chips" }, chips) : null));
  }

  // the report with the sentences (and spans) the row's provenance cites marked
  function renderReport(rep, prov) {
    const ids = new Set(prov.map((p) => (/^(S\d+):/.exec(p) || [])[1]).filter(Boolean));
    const ranges = (rep.sentences || []).filter((s) => ids.has(s.id)).map((s) => [s.start, s.end]);
    for (const p of prov) {
      const m = /^span (\d+)-(\d+):/.exec(p);
      if (m) ranges.push([+m[1], +m[2]]);
    }
    ranges.sort((a, b) => a[0] - b[0]);
    const box = el("div", { class: "report" });
    let pos = 0;
    for (const [a, b] of ranges) {
      if (a < pos || b <= a || b > rep.text.length) continue; // overlapping or out of range
      box.append(rep.text.slice(pos, a), el("mark", { text: rep.text.slice(a, b) }));
      pos = b;
    }
    box.append(rep.text.slice(pos));
    return box;
  }

  function renderItem(item, source) {
    const images = item.images && item.images.length ? item.images
      : (item.image_paths || []).map((p, i) => ({ path: p, id: (item.image_ids || [])[i], url: null }));
    const figs = el("div", { class: "figs" }, images.map((im) => renderFigure(item, im, images.length)));
    const meta = el("div", { class: "meta" },
      el("span", { class: gradeClass(item.grade), title: "quality grade", text: item.grade || "ungraded" }),
      el("span", { class: "badge", text: item.strategy }),
      el("span", { class: "badge", text: item.question_type }),
      item.split ? el("span", { class: "badge", text: item.split }) : null,
      item.polarity ? el("span", { class: "badge " + (item.polarity === "positive" ? "pos" : "neg"), text: item.polarity }) : null,
      item.template_id ? el("span", { class: "badge", title: "template", text: `${item.template_id} v${item.template_version ?? "?"}` }) : null);
    const text = el("div", { class: "text" }, meta,
      el("h3", { class: "question", text: item.question }),
      el("p", { class: "answer", text: item.answer }));
    const short = [];
    if (item.answer_short !== null && item.answer_short !== undefined) short.push(el("span", {}, "Short answer: ", el("b", { text: item.answer_short })));
    if (item.choices && item.choices.length) short.push(el("span", { text: `  Choices: ${item.choices.join(" / ")}` }));
    if (short.length) text.append(el("div", { class: "short" }, short));
    const parts = item.answer_parts || [];
    if (parts.length) {
      text.append(el("div", { class: "section-title", text: `Answer parts (${parts.length})` }),
        el("ol", { class: "parts" }, parts.map(renderPart)));
    }
    text.append(el("div", { class: "section-title", text: `Grade ${item.grade || "—"}` }));
    const reasons = item.grade_reasons || [];
    text.append(reasons.length ? el("ul", { class: "reasons" }, reasons.map((r) => el("li", { text: r })))
      : el("div", { class: "reasons", text: "no reasons recorded (best grade)" }));
    const prov = item.provenance || [];
    text.append(el("div", { class: "section-title", text: "Provenance" }),
      prov.length ? el("ul", { class: "provenance" }, prov.map((p) => el("li", { text: p })))
        : el("div", { class: "provenance", text: "none recorded" }));
    if (item.reasoning) text.append(el("div", { class: "section-title", text: "Reasoning" }), el("p", { text: item.reasoning }));
    if (source.hasReports && item.study_id) {
      const btn = el("button", { type: "button", class: "show-report", text: "Show report" });
      const holder = el("div", {});
      btn.addEventListener("click", async () => {
        btn.disabled = true;
        const st = await source.study(item.study_id).catch(() => null);
        const rep = st && st.report;
        holder.replaceChildren(rep && rep.text ? renderReport(rep, item.provenance || [])
          : el("div", { class: "reasons", text: "no report stored for this study" }));
      });
      text.append(el("div", {}, btn), holder);
    }
    text.append(el("div", { class: "ids", text: [`qa ${item.qa_id}`, `study ${item.study_id}`, `patient ${item.patient_id}`,
      item.reference_study_id ? `prior ${item.reference_study_id}` : null].filter(Boolean).join(" · ") }));
    return el("article", { class: "item", "data-qa-id": item.qa_id }, figs, text);
  }

  function renderPager(nav, state, total) {
    const pages = Math.max(1, Math.ceil(total / state.limit));
    const page = Math.floor(state.offset / state.limit) + 1;
    const go = (offset) => { state.offset = offset; writeHash(state); };
    const prev = el("button", { type: "button", class: "prev", disabled: state.offset <= 0, text: "‹ Prev" });
    const next = el("button", { type: "button", class: "next", disabled: state.offset + state.limit >= total, text: "Next ›" });
    prev.addEventListener("click", () => go(Math.max(0, state.offset - state.limit)));
    next.addEventListener("click", () => go(state.offset + state.limit));
    nav.replaceChildren(prev, el("span", { class: "page", text: `page ${page} of ${pages}` }), next);
  }

  // ---------------------------------------------------------------- flow
  let source;
  let seq = 0;

  function writeHash(state) {
    const h = "#" + toParams(state).toString();
    if (location.hash !== h) location.hash = h; // hashchange -> load()
    else load();
  }

  function apply(resetOffset) {
    const state = readForm(fromHash());
    if (resetOffset) state.offset = 0;
    writeHash(state);
  }

  async function load() {
    const state = fromHash();
    syncForm(state);
    const mine = ++seq;
    document.body.dataset.loading = "1";
    $("status").textContent = "loading…";
    try {
      const res = await source.query(state);
      if (mine !== seq) return; // a newer request replaced this one
      $("error").hidden = true;
      const items = res.items || [];
      const first = items.length ? res.offset + 1 : 0;
      $("count").textContent = `${res.total} matching item${res.total === 1 ? "" : "s"}` +
        (items.length ? `, showing ${first}–${res.offset + items.length}` : "");
      $("count").dataset.total = String(res.total);
      $("items").replaceChildren(...(items.length ? items.map((it) => renderItem(it, source)) : [el("div", { class: "empty", text: "No item matches these filters." })]));
      renderPager($("pager-top"), state, res.total);
      renderPager($("pager-bottom"), state, res.total);
      $("status").textContent = "";
    } catch (err) {
      if (mine !== seq) return;
      $("error").hidden = false;
      $("error").textContent = `Could not load items: ${err.message}`;
      $("status").textContent = "error";
    } finally {
      if (mine === seq) {
        delete document.body.dataset.loading;
        document.body.dataset.ready = "1";
      }
    }
  }

  async function main() {
    const embedded = document.getElementById("radvqa-data");
    source = embedded ? staticSource(JSON.parse(embedded.textContent)) : serverSource();
    $("mode").textContent = source.mode === "static" ? "static export (sample)" : "live";
    try {
      const info = await source.facets();
      if (source.mode === "server") source.hasReports = Boolean(info.has_reports);
      renderFacets(info);
    } catch (err) {
      $("error").hidden = false;
      $("error").textContent = `Could not load facets: ${err.message}`;
    }
    $("filter-form").addEventListener("submit", (e) => { e.preventDefault(); apply(true); });
    $("limit").addEventListener("change", () => apply(true));
    $("reset").addEventListener("click", () => writeHash({ ...blankState(), limit: parseInt($("limit").value, 10) || 20 }));
    window.addEventListener("hashchange", load);
    // arrow keys page through the results (unless typing in a field)
    document.addEventListener("keydown", (e) => {
      if (e.altKey || e.ctrlKey || e.metaKey || /^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName)) return;
      const btn = document.querySelector(e.key === "ArrowRight" ? "#pager-top .next" : e.key === "ArrowLeft" ? "#pager-top .prev" : null);
      if (btn && !btn.disabled) btn.click();
    });
    await load();
  }

  main();
})();
