// ax console, edit forms: progressive enhancement only (the forms work
// without it: the server checks everything and "Preview without saving"
// shows the next fires).
// - the task form's payload is checked as JSON
//   while typing; invalid JSON blocks the submit with a message;
// - the task form's preview (#preview[data-url]) follows the schedule
//   fields as they are typed, from the console's preview endpoint.
(function () {
  "use strict";
  function checkJSON(ta, out) {
    var msg = "";
    if (ta.value.trim() !== "") {
      try { JSON.parse(ta.value); } catch (e) { msg = "Not valid JSON: " + e.message; }
    }
    ta.setCustomValidity(msg);
    ta.setAttribute("aria-invalid", msg ? "true" : "false");
    out.textContent = msg ? msg : (ta.value.trim() === "" ? "" : "Valid JSON.");
    out.className = msg ? "field-error" : "hint";
    return msg === "";
  }
  function payload(form) {
    var ta = form.querySelector("textarea[name=payload]");
    var out = document.getElementById("payload-check");
    if (!ta || !out) { return; }
    ta.setAttribute("aria-describedby", "payload-check");
    ta.addEventListener("input", function () { checkJSON(ta, out); });
    form.addEventListener("submit", function (ev) {
      // "Preview without saving" sends the form as it is.
      if (ev.submitter && ev.submitter.name === "preview") { return; }
      if (!checkJSON(ta, out)) { ev.preventDefault(); ta.focus(); }
    });
  }
  var localFmt;
  try {
    localFmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  } catch (e) { localFmt = null; }
  var scheduleFields = ["type", "cron", "timezone", "dialect", "dst_policy", "interval", "run_at", "start_at", "end_at", "exclude_calendars", "event", "members"];
  function preview(form) {
    var box = document.getElementById("preview");
    if (!box || !box.getAttribute("data-url") || !form.querySelector("[name=type]")) { return; }
    var list = document.getElementById("preview-list");
    var note = document.getElementById("preview-note");
    var timer = null, seq = 0;
    function show(data) {
      list.textContent = "";
      (data.fires || []).forEach(function (f) {
        var li = document.createElement("li");
        li.setAttribute("data-at", f.at);
        var t = document.createElement("time");
        var d = new Date(f.at);
        t.setAttribute("datetime", f.at);
        t.title = f.at;
        t.textContent = localFmt ? localFmt.format(d) : f.at;
        li.appendChild(t);
        var z = document.createElement("span");
        z.className = "muted";
        z.textContent = " (" + f.local + ")";
        li.appendChild(z);
        if (f.dst) {
          var l = document.createElement("span");
          l.className = "label warn";
          l.textContent = "DST: " + f.dst;
          li.appendChild(document.createTextNode(" "));
          li.appendChild(l);
        }
        list.appendChild(li);
      });
      if (data.errors && data.errors.length) {
        note.textContent = "No preview: " + data.errors.map(function (e) { return e.field + " " + e.message; }).join("; ");
      } else if (!data.fires || data.fires.length === 0) {
        note.textContent = data.note || "This schedule fires no more.";
      } else {
        note.textContent = data.words ? "Schedule: " + data.words + "." : "";
      }
      box.setAttribute("data-state", "fresh");
    }
    function update() {
      var q = new URLSearchParams();
      var fd = new FormData(form);
      scheduleFields.forEach(function (k) { fd.getAll(k).forEach(function (v) { q.append(k, v); }); });
      var mine = ++seq;
      box.setAttribute("data-state", "loading");
      fetch(box.getAttribute("data-url") + "?" + q.toString(), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) {
          if ((r.headers.get("Content-Type") || "").indexOf("application/json") !== 0) { throw new Error("status " + r.status); }
          return r.json();
        })
        .then(function (data) { if (mine === seq) { show(data); } })
        .catch(function () {
          if (mine === seq) { note.textContent = "The preview is unavailable right now; \u201cPreview without saving\u201d asks the server."; box.setAttribute("data-state", "error"); }
        });
    }
    function later() {
      if (timer) { clearTimeout(timer); }
      timer = setTimeout(update, 300);
    }
    scheduleFields.forEach(function (k) {
      form.querySelectorAll("[name=" + k + "]").forEach(function (el) {
        el.addEventListener("input", later);
        el.addEventListener("change", later);
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("task-form");
    if (form) { payload(form); preview(form); }
  });
})();
