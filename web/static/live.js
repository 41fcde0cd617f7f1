// live.js keeps an open page of the Nomos control room current without a
// reload, and counts down plan expiries. Every page renders complete on
// the server; this file only re-reads it.
//
// Why plain JavaScript rather than htmx and its SSE extension: the page
// needs one behaviour — "something changed, re-read the parts marked
// data-live" — which is thirty lines here, while htmx is thousands of
// lines to vendor and review on a page that must never run what it shows.
// The server sends only {kind, id, state} over /events; the new HTML
// comes from the same escaped templates as the first paint, and the
// page's CSP forbids inline script, so nothing shown can ever run.
(function () {
  'use strict';
  var dot = document.getElementById('live-dot');

  function tick() {
    var now = Date.now();
    document.querySelectorAll('[data-expires]').forEach(function (el) {
      var left = Math.round((Date.parse(el.getAttribute('data-expires')) - now) / 1000);
      if (isNaN(left)) return;
      if (left <= 0) { el.textContent = 'expired'; return; }
      var h = Math.floor(left / 3600), m = Math.floor(left % 3600 / 60), s = left % 60;
      el.textContent = (h ? h + 'h' : '') + (h || m ? m + 'm' : '') + s + 's';
    });
  }
  tick();
  setInterval(tick, 1000);

  if (!window.EventSource || !window.fetch || !document.querySelector('[data-live]')) return;

  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { headers: { 'Accept': 'text/html' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) { if (!r.ok) throw new Error('status ' + r.status); return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        document.querySelectorAll('[data-live]').forEach(function (el) {
          var fresh = el.id && doc.getElementById(el.id);
          if (fresh) el.replaceWith(document.adoptNode(fresh));
        });
        tick();
        document.documentElement.setAttribute('data-refreshed', String(Date.now()));
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var es = new EventSource('/events');
  es.onopen = function () { if (dot) { dot.classList.add('on'); dot.textContent = 'live'; } };
  es.onerror = function () { if (dot) { dot.classList.remove('on'); dot.textContent = 'reconnecting'; } };
  es.onmessage = function () { refresh(); };
})();
