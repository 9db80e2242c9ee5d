// tidings admin UI: live refresh of [data-live] regions and auto-submitting selects.
// A static file (the Content-Security-Policy allows no inline script).
(function () {
  "use strict";
  var INTERVAL_MS = 4000;

  function liveUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("partial", "1");
    url.searchParams.delete("resent");
    return url.toString();
  }

  function liveEnabled() {
    var toggle = document.getElementById("live-toggle");
    return !document.hidden && (!toggle || toggle.checked);
  }

  function refresh() {
    if (!liveEnabled()) {
      return Promise.resolve();
    }
    return fetch(liveUrl(), { credentials: "same-origin", headers: { "X-Tidings-Live": "1" } })
      .then(function (response) {
        if (response.redirected || response.status === 401) {
          window.location.reload(); // the session ended: the server shows the login page
          return;
        }
        if (!response.ok) {
          return;
        }
        return response.text().then(swap);
      })
      .catch(function () { /* offline for a moment: try again on the next tick */ });
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    fresh.querySelectorAll("[data-live][id]").forEach(function (node) {
      var current = document.getElementById(node.id);
      if (current) {
        current.replaceWith(document.importNode(node, true));
      }
    });
    document.dispatchEvent(new CustomEvent("tidings:refreshed"));
  }

  function start() {
    if (document.querySelector("[data-live]")) {
      window.setInterval(refresh, INTERVAL_MS);
      document.addEventListener("visibilitychange", function () {
        if (!document.hidden) {
          refresh();
        }
      });
    }
    document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
      select.addEventListener("change", function () {
        select.form.submit();
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
