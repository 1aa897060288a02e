/* The curator's dashboard: the few things htmx does not do itself (no build step), wired
   by data attributes rather than inline handlers, which the Content-Security-Policy refuses:
   - [data-tag-added]: once its htmx request succeeded (Add, or a suggestion chosen), the
     tag input is emptied for the next tag;
   - [data-enter-clicks="ID"]: Enter in it clicks element ID (the tag input's Add) instead
     of submitting the source's form;
   - input[data-check-files]: its files are checked in the browser before they are sent;
   - form[data-upload-progress]: its upload's progress fills its bar. */
(function () {
  "use strict";

  function tagAdded() {
    const input = document.getElementById('tag-input');
    input.value = '';
    document.getElementById('tag-suggestions').replaceChildren();
    input.focus();
  }

  /* An upload's files checked in the browser before they are sent (the server checks
     again and refuses in place): a type Lectern indexes, at most the size it takes. */
  function checkFiles(input) {
    const accepted = input.accept.split(',');
    const limit = Number(input.dataset.maxBytes);
    const problems = [];
    for (const file of input.files) {
      const dot = file.name.lastIndexOf('.');
      const suffix = dot > 0 ? file.name.slice(dot).toLowerCase() : '';
      if (!accepted.includes(suffix)) problems.push(`${file.name}: not a file type Lectern indexes (${input.accept})`);
      else if (file.size > limit) problems.push(`${file.name}: ${file.size} bytes; at most ${limit} may be uploaded`);
    }
    const out = document.getElementById(input.id + '-check');
    out.textContent = problems.join('; ');
    input.setCustomValidity(problems.length ? problems.join('; ') : '');
  }

  /* The upload's progress bar, from htmx's htmx:xhr:progress events. */
  function uploadProgress(form, event) {
    const bar = form.querySelector('.upload-progress');
    if (!bar || !event.detail.lengthComputable) return;
    const percent = Math.round(100 * event.detail.loaded / event.detail.total);
    bar.hidden = false;
    bar.querySelector('progress').value = percent;
    bar.querySelector('.upload-percent').textContent = percent + '%';
  }

  document.addEventListener('htmx:afterRequest', (event) => {
    if (event.detail.successful && event.target.closest('[data-tag-added]')) tagAdded();
  });
  document.addEventListener('keydown', (event) => {
    const input = event.target.closest && event.target.closest('[data-enter-clicks]');
    if (!input || event.key !== 'Enter') return;
    event.preventDefault();
    document.getElementById(input.dataset.enterClicks).click();
  });
  document.addEventListener('change', (event) => {
    const input = event.target.closest && event.target.closest('input[data-check-files]');
    if (input) checkFiles(input);
  });
  document.addEventListener('htmx:xhr:progress', (event) => {
    const form = event.target.closest && event.target.closest('form[data-upload-progress]');
    if (form) uploadProgress(form, event);
  });
})();
