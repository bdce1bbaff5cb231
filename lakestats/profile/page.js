// The report's only script: filter the columns by name (also from a link: report.html#q=name),
// sort the column list. The page is drawn already; without this script it shows everything.
(function () {
  const search = document.getElementById("search");
  const rows = Array.from(document.querySelectorAll("#column-table tbody tr"));
  const cards = new Map(Array.from(document.querySelectorAll("article.column"),
                                   (card) => [card.dataset.column, card]));
  const shown = document.getElementById("shown");
  const filter = () => {
    const asked = search.value.trim().toLowerCase();
    let count = 0;
    for (const row of rows) {
      const hide = asked !== "" && !row.dataset.column.toLowerCase().includes(asked);
      row.hidden = hide;
      cards.get(row.dataset.column).hidden = hide;
      count += hide ? 0 : 1;
    }
    shown.textContent = count === rows.length ? "" : `${count} of ${rows.length} shown`;
  };
  search.addEventListener("input", filter);
  if (location.hash.startsWith("#q=")) {
    search.value = decodeURIComponent(location.hash.slice(3));
    filter();
  }
  const body = document.querySelector("#column-table tbody");
  document.querySelectorAll("#column-table th").forEach((th, k) => {
    let ascending = false;
    th.addEventListener("click", () => {
      ascending = !ascending;
      const key = (row) => row.children[k].dataset.sort ?? row.children[k].textContent;
      const numeric = th.dataset.numeric !== undefined;
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        const order = numeric ? (x === "" ? -Infinity : +x) - (y === "" ? -Infinity : +y)
                              : x.localeCompare(y);
        return ascending ? order : -order;
      });
      body.append(...rows);
    });
  });
  window.addEventListener("load", () => {
    document.documentElement.dataset.loadedMs = Math.round(performance.now());
  });
})();
