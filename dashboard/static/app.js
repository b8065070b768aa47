/* AscendBridge dashboard: local times, the action token, live refresh, charts. No inline JS
   anywhere (the CSP forbids it); data for charts comes from <script type="application/json">. */
(function () {
  "use strict";
  var TOKEN_KEY = "ascendbridge-dashboard-token";
  var POLL_MS = 2000;
  var FULL_REFRESH_EVERY = 10; // polls: heartbeats change agent freshness without an event

  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var iso = el.getAttribute("datetime");
      var d = new Date(iso);
      if (!isNaN(d.getTime())) {
        el.textContent = d.toLocaleString();
        el.title = iso + " (UTC)";
      }
    });
  }

  function token() { return window.localStorage.getItem(TOKEN_KEY) || ""; }

  function setupToken() {
    var form = document.getElementById("token-form");
    var input = document.getElementById("token-input");
    var state = document.getElementById("token-state");
    if (!form) return;
    function show() { state.textContent = token() ? "saved" : "not set"; }
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      window.localStorage.setItem(TOKEN_KEY, input.value.trim());
      input.value = "";
      show();
    });
    show();
  }

  function setupActions() {
    document.addEventListener("submit", function (e) {
      var form = e.target;
      if (!form.classList || !form.classList.contains("action")) return;
      if (!token()) {
        e.preventDefault();
        var state = document.getElementById("token-state");
        state.textContent = "enter the action token first";
        state.className = "warn";
        document.getElementById("token-input").focus();
        return;
      }
      form.querySelector("input[name=token]").value = token();
    });
  }

  function openDetails(el) {
    return Array.prototype.map.call(el.querySelectorAll("details"), function (d) { return d.open; });
  }

  function refresh() {
    var regions = document.querySelectorAll("[data-live]");
    if (!regions.length) return Promise.resolve();
    return fetch(window.location.href, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        regions.forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (!fresh) return;
          var open = openDetails(el);
          el.replaceChildren.apply(el, Array.prototype.map.call(fresh.childNodes, function (n) {
            return document.importNode(n, true);
          }));
          el.querySelectorAll("details").forEach(function (d, i) { if (open[i]) d.open = true; });
          localTimes(el);
        });
      });
  }

  function setupLive() {
    var state = document.getElementById("live-state");
    if (!document.querySelector("[data-live]")) { if (state) state.textContent = ""; return; }
    var last = Number(document.body.dataset.lastEventId || 0);
    var polls = 0;
    var busy = false;
    window.setInterval(function () {
      if (busy || document.hidden) return;
      busy = true;
      polls += 1;
      fetch("/api/changes", { cache: "no-store" })
        .then(function (r) { return r.json(); })
        .then(function (j) {
          var changed = j.last_event_id !== last;
          last = j.last_event_id;
          document.body.dataset.lastEventId = String(last);
          state.textContent = "live refresh on";
          return (changed || polls % FULL_REFRESH_EVERY === 0) ? refresh() : null;
        })
        .catch(function () { state.textContent = "board unreachable, retrying"; })
        .then(function () { busy = false; });
    }, POLL_MS);
  }

  var PALETTE = ["#c7000b", "#2f6fde", "#2a9d8f", "#e9a23b", "#7b5ea7", "#6c757d"];

  // One chart on the canvas `id`: `style` gives each series its colour keys (the palette's next
  // colour passed in), `scales` the axes; nothing is drawn without a canvas or labels.
  function chart(id, type, labels, datasets, style, scales) {
    var canvas = document.getElementById(id);
    if (!canvas || !labels || !labels.length) return;
    new window.Chart(canvas, {
      type: type,
      data: {
        labels: labels,
        datasets: datasets.map(function (d, i) {
          var series = style(d, PALETTE[i % PALETTE.length]);
          series.label = d.label;
          series.data = d.data;
          return series;
        })
      },
      options: { animation: false, responsive: true, maintainAspectRatio: false, scales: scales }
    });
  }

  function bar(id, labels, datasets, yTitle) {
    chart(id, "bar", labels, datasets, function (d, color) { return { backgroundColor: color }; },
      { y: { beginAtZero: true, title: { display: !!yTitle, text: yTitle } } });
  }

  function line(id, labels, datasets, yTitle) {
    chart(id, "line", labels, datasets, function (d, color) {
      return { borderColor: color, pointRadius: 0, yAxisID: d.axis || "y" };
    }, {
      y: { title: { display: !!yTitle, text: yTitle } },
      y1: { position: "right", grid: { drawOnChartArea: false }, title: { display: true, text: "gradient norm" } }
    });
  }

  function setupCharts() {
    var holder = document.getElementById("chart-data");
    if (!holder || !window.Chart) return;
    var data = JSON.parse(holder.textContent);
    if (data.latency) {
      bar("latency-chart", data.latency.labels, Object.keys(data.latency.series).map(function (k) {
        return { label: k, data: data.latency.series[k] };
      }), "latency");
    }
    if (data.loss) {
      line("loss-chart", data.loss.step, [{ label: "training loss", data: data.loss.loss },
        { label: "gradient norm", data: data.loss.grad_norm, axis: "y1" }], "loss");
    }
    if (data.sweep) {
      bar("sweep-chart", data.sweep.labels, [{ label: "throughput (samples/s), " + data.sweep.run, data: data.sweep.values }],
        "samples/s");
    }
    if (data.speedup) {
      bar("speedup-chart", data.speedup.labels, [{ label: "speedup (x)", data: data.speedup.values }], "x");
    }
    if (data.speedup_histogram) {
      bar("speedup-histogram", data.speedup_histogram.labels,
        [{ label: "models", data: data.speedup_histogram.counts }], "models");
    }
    if (data.durations) {
      bar("durations-chart", data.durations.labels, [{ label: "median seconds", data: data.durations.median_s }], "s");
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    setupToken();
    setupActions();
    setupLive();
    setupCharts();
  });
})();
