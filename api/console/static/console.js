// ax console: progressive enhancement only; every page works without it.
// - <time datetime> elements show the viewer's zone (UTC stays in the tooltip);
// - a page marked data-refresh reloads itself every N seconds (a running
//   execution), unless the viewer is typing;
// - buttons with data-confirm ask first.
(function () {
  "use strict";
  function localTimes() {
    var fmt;
    try {
      fmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
    } catch (e) { return; }
    document.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d.getTime())) { el.textContent = fmt.format(d); }
    });
  }
  function refresh() {
    var el = document.querySelector("[data-refresh]");
    if (!el) { return; }
    var s = parseInt(el.getAttribute("data-refresh"), 10);
    if (!(s > 0)) { return; }
    setTimeout(function () {
      var a = document.activeElement;
      if (a && (a.tagName === "INPUT" || a.tagName === "TEXTAREA")) { refresh(); return; }
      window.location.reload();
    }, s * 1000);
  }
  function confirms() {
    document.querySelectorAll("button[data-confirm]").forEach(function (b) {
      b.addEventListener("click", function (ev) {
        if (!window.confirm(b.getAttribute("data-confirm"))) { ev.preventDefault(); }
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localTimes(); refresh(); confirms(); });
})();
