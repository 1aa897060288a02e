/* Lectern's own behaviour, beside htmx (no build step).
   Copy buttons: <button data-copy="ID"> copies the value (or text) of element ID and says so
   in the element named by its aria-describedby, else in its own label. The Clipboard API
   needs a secure context (https, or localhost); elsewhere the text is selected and copied
   the old way, and when even that fails the button says to press Ctrl+C.
   Preserved inputs: a file input marked hx-preserve keeps its chosen files when htmx swaps
   in a refused form, but it is the old element, so its invalid state is set again from its
   field's (.has-error), as the server rendered it.
   Filter errors: a list page's htmx answer swaps each filter's error slot (span.filter-error,
   id "<control id>_error") out of band and leaves the controls alone, so what is being typed
   stays; the control is then marked invalid, and described by its error, to match.
   The page's wiring, kept out of the templates so the Content-Security-Policy needs no
   inline script and no eval (hx-on would need both):
   - the body's data-login-url: an htmx request whose session ended lands on the sign-in
     page, which is shown whole; a response marked X-Lectern-Partial (a refused decision,
     403 or 409) is a partial to show whatever its status;
   - input[data-select-all="NAME"] checks or unchecks its form's enabled NAME boxes;
   - form[data-confirm] asks its question before it is sent;
   - [data-failure-note="ID"]: element ID shows while the last htmx request it made failed;
   - [data-share="N"] is N% wide (a win/tie/loss bar: data, not a class per width). */
(function () {
  "use strict";

  function say(button, text) {
    var status = document.getElementById(button.dataset.copyStatus || "");
    if (status) { status.textContent = text; } else { button.textContent = text; }
  }

  function selectAll(field) {
    if (field.select) { field.focus(); field.select(); return; }
    var range = document.createRange();
    range.selectNodeContents(field);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function copyOldWay(field) {
    selectAll(field);
    try { return document.execCommand("copy"); } catch (error) { return false; }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) { return; }
    var field = document.getElementById(button.dataset.copy);
    if (!field) { return; }
    var text = field.value !== undefined ? field.value : field.textContent;
    var done = function () { say(button, "Copied to the clipboard."); };
    var fallback = function () {
      if (copyOldWay(field)) { done(); } else { say(button, "Selected: press Ctrl+C (⌘C) to copy."); }
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (new URL(xhr.responseURL).pathname === document.body.dataset.loginUrl) {
      event.detail.shouldSwap = false;
      window.location.assign(xhr.responseURL);
    } else if (xhr.getResponseHeader("X-Lectern-Partial")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  document.addEventListener("click", function (event) {
    var all = event.target.closest("input[data-select-all]");
    if (!all) { return; }
    all.form.querySelectorAll("input[name='" + all.dataset.selectAll + "']:not(:disabled)").forEach(function (box) {
      box.checked = all.checked;
    });
  });

  document.addEventListener("submit", function (event) {
    var form = event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) { event.preventDefault(); }
  });

  function failureNote(event) {
    var source = event.target.closest && event.target.closest("[data-failure-note]");
    return source ? document.getElementById(source.dataset.failureNote) : null;
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    var note = failureNote(event);
    if (note) { note.hidden = true; }
  });
  ["htmx:responseError", "htmx:sendError"].forEach(function (name) {
    document.addEventListener(name, function (event) {
      var note = failureNote(event);
      if (note) { note.hidden = false; }
    });
  });

  function drawShares(root) {
    root.querySelectorAll("[data-share]").forEach(function (part) {
      part.style.width = part.dataset.share + "%";  // the CSS object model: no inline style for the policy to refuse
    });
  }
  drawShares(document);
  document.addEventListener("htmx:load", function (event) { drawShares(event.detail.elt); });

  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll(".field input[hx-preserve]").forEach(function (input) {
      if (input.closest(".field").classList.contains("has-error")) {
        input.setAttribute("aria-invalid", "true");
      } else {
        input.removeAttribute("aria-invalid");
      }
    });
    document.querySelectorAll("span.filter-error").forEach(function (slot) {
      var control = document.getElementById(slot.id.replace(/_error$/, ""));
      if (!control) { return; }
      var failed = slot.textContent.trim() !== "";
      control.closest("label").classList.toggle("has-error", failed);
      if (failed) {
        control.setAttribute("aria-invalid", "true");
        control.setAttribute("aria-describedby", slot.id);
      } else {
        control.removeAttribute("aria-invalid");
        control.removeAttribute("aria-describedby");
      }
    });
  });
})();
