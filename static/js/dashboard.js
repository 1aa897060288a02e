/* The curator's dashboard: the few things htmx does not do itself (no build step). */

/* The tag editor: after a tag became a chip, empty the input for the next one. */
function lecternTagAdded() {
  const input = document.getElementById('tag-input');
  input.value = '';
  document.getElementById('tag-suggestions').replaceChildren();
  input.focus();
}

/* An upload's files checked in the browser before they are sent (the server checks
   again and refuses in place): a type Lectern indexes, at most the size it takes. */
function lecternCheckFiles(input) {
  const accepted = input.accept.split(',');
  const limit = Number(input.dataset.maxBytes);
  const problems = [];
  for (const file of input.files) {
    const dot = file.name.lastIndexOf('.');
    const suffix = dot > 0 ? file.name.slice(dot).toLowerCase() : '';
    if (!accepted.includes(suffix)) problems.push(`${file.name}: not a text file Lectern indexes (${input.accept})`);
    else if (file.size > limit) problems.push(`${file.name}: ${file.size} bytes; at most ${limit} may be uploaded`);
  }
  const out = document.getElementById(input.id + '-check');
  out.textContent = problems.join('; ');
  input.setCustomValidity(problems.length ? problems.join('; ') : '');
}

/* The upload's progress bar, from htmx's htmx:xhr:progress events. */
function lecternUploadProgress(form, event) {
  const bar = form.querySelector('.upload-progress');
  if (!bar || !event.detail.lengthComputable) return;
  const percent = Math.round(100 * event.detail.loaded / event.detail.total);
  bar.hidden = false;
  bar.querySelector('progress').value = percent;
  bar.querySelector('.upload-percent').textContent = percent + '%';
}
