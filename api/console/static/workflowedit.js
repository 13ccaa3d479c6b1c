// ax console, workflow editor: progressive enhancement only (without it,
// "Preview without saving" posts the form and the server draws the same
// preview). While the document is typed, the draft's preview is fetched
// again, once per pause in the typing, from the console's preview action
// (it checks the draft and stores nothing); the server's own rendering
// replaces the summary above the editor and the graph below it.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("workflow-form");
    var box = document.getElementById("draft");
    var doc = document.getElementById("wf-document");
    if (!form || !box || !doc || !box.getAttribute("data-url")) { return; }
    var timer = null, seq = 0;
    function replace(tpl, id) {
      var next = tpl.content.getElementById(id), cur = document.getElementById(id);
      // The containers stay (the summary is a live region): their content changes.
      if (next && cur) { cur.innerHTML = next.innerHTML; }
    }
    function update() {
      var fd = new FormData();
      fd.append("csrf", form.querySelector("input[name=csrf]").value);
      fd.append("document", doc.value);
      var mine = ++seq;
      box.setAttribute("data-state", "loading");
      fetch(box.getAttribute("data-url"), { method: "POST", body: fd, credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) {
          if ((r.status !== 200 && r.status !== 422) || (r.headers.get("Content-Type") || "").indexOf("text/html") !== 0) {
            throw new Error("status " + r.status);
          }
          return r.text().then(function (html) { return { ok: r.status === 200, html: html }; });
        })
        .then(function (res) {
          if (mine !== seq) { return; }
          // The server's own template output (escaped by html/template).
          var tpl = document.createElement("template");
          tpl.innerHTML = res.html;
          replace(tpl, "draft-summary");
          replace(tpl, "draft-graph");
          doc.setAttribute("aria-invalid", res.ok ? "false" : "true");
          box.setAttribute("data-state", res.ok ? "valid" : "invalid");
        })
        .catch(function () {
          if (mine !== seq) { return; }
          box.setAttribute("data-state", "error");
          var p = document.getElementById("draft-status");
          if (p) { p.textContent = "The preview is unavailable right now; \u201cPreview without saving\u201d asks the server."; }
        });
    }
    doc.addEventListener("input", function () {
      if (timer) { clearTimeout(timer); }
      timer = setTimeout(update, 500);
    });
  });
})();
