// dealtrail console: refresh the floor table in place (no third party, no inline script).
"use strict";
(function () {
  const table = document.getElementById("floor");
  if (!table) return;
  const body = document.getElementById("floor-rows");
  const stamp = document.getElementById("floor-updated");
  const every = Math.max(200, parseInt(table.dataset.every || "2000", 10));
  const url = table.dataset.refresh;
  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const res = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (res.redirected || res.status === 401 || res.status === 303) {
        window.location.assign("/login?next=/");
        return;
      }
      if (res.ok) {
        const html = await res.text();
        const tpl = document.createElement("template");
        tpl.innerHTML = html;  // the server escaped every value
        body.replaceChildren(tpl.content);
        stamp.textContent = "Updated " + new Date().toISOString().replace("T", " ").slice(0, 19) + "+00:00";
      } else {
        stamp.textContent = "Refresh failed (" + res.status + "); retrying";
      }
    } catch (e) {
      stamp.textContent = "Console unreachable; retrying";
    } finally {
      busy = false;
    }
  }
  setInterval(refresh, every);
})();
