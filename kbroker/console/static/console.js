// The console's own script: charts (uPlot, served from the npm build), list filtering and
// sortable tables. No inline scripts anywhere: the Content-Security-Policy allows only this
// file and the charting library.
"use strict";

(function () {
  const interval = Math.max(1, parseFloat(document.body.dataset.interval || "10"));

  function drawChart(figure) {
    const key = figure.dataset.key;
    const body = figure.querySelector(".chart-body");
    let plot = null;

    async function refresh() {
      let points = [];
      try {
        const answer = await fetch("/api/series?key=" + encodeURIComponent(key), {
          credentials: "same-origin",
        });
        if (!answer.ok) return;
        points = (await answer.json()).points;
      } catch (e) {
        return;
      }
      figure.dataset.points = String(points.length);
      if (points.length) figure.dataset.last = String(points[points.length - 1][1]);
      if (points.length < 1) return;
      const data = [points.map((p) => p[0]), points.map((p) => p[1])];
      if (typeof uPlot === "undefined") {
        body.textContent = "Latest: " + data[1][data[1].length - 1].toFixed(1) + " " + figure.dataset.unit;
        return;
      }
      if (plot === null) {
        body.textContent = "";
        plot = new uPlot(
          {
            width: Math.max(280, body.clientWidth || 480),
            height: 180,
            legend: { show: false },
            scales: { y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
            series: [{}, { label: figure.dataset.title, stroke: "#2b6cb0", width: 2, fill: "rgba(43,108,176,0.12)" }],
            axes: [{}, { size: 60 }],
          },
          data,
          body,
        );
      } else {
        plot.setData(data);
      }
    }

    refresh();
    setInterval(refresh, interval * 1000);
  }

  function filterRows(input) {
    const table = document.querySelector(input.dataset.filter);
    if (!table) return;
    const text = input.value.toLowerCase();
    for (const row of table.querySelectorAll("tbody tr[data-name]")) {
      row.hidden = text !== "" && !row.dataset.name.toLowerCase().includes(text);
    }
  }

  function sortable(table) {
    table.querySelectorAll("thead th").forEach((th, column) => {
      th.addEventListener("click", () => {
        const body = table.tBodies[0];
        const rows = Array.from(body.querySelectorAll("tr[data-name]"));
        const numeric = th.classList.contains("num");
        const descending = th.dataset.sorted === "asc";
        const value = (row) => {
          const text = row.cells[column].textContent.trim();
          if (!numeric) return text.toLowerCase();
          const n = parseFloat(text.replace(/[^0-9.\-]/g, ""));
          return isNaN(n) ? -Infinity : n;
        };
        rows.sort((a, b) => (value(a) < value(b) ? -1 : value(a) > value(b) ? 1 : 0) * (descending ? -1 : 1));
        rows.forEach((row) => body.appendChild(row));
        table.querySelectorAll("thead th").forEach((other) => delete other.dataset.sorted);
        th.dataset.sorted = descending ? "desc" : "asc";
      });
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("figure.chart").forEach(drawChart);
    document.querySelectorAll("input[data-filter]").forEach((input) => {
      input.addEventListener("input", () => filterRows(input));
    });
    document.querySelectorAll("table.sortable").forEach(sortable);
  });
})();
