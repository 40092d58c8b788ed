/* global document, window */
// Progressive enhancement only: every page works without this file.
// 1. Elements with data-refresh="<seconds>" reload the page every so many seconds while it is
//    visible (a campaign's progress, a DLQ being drained), unless the operator is typing in a form.
// 2. Buttons with data-confirm="<text>" ask before submitting their form.
(function () {
  'use strict';
  var el = document.querySelector('[data-refresh]');
  if (el) {
    var seconds = Math.max(2, parseInt(el.getAttribute('data-refresh'), 10) || 10);
    var typing = false;
    document.addEventListener('input', function () {
      typing = true;
    });
    setInterval(function () {
      if (!typing && document.visibilityState === 'visible') window.location.reload();
    }, seconds * 1000);
  }
  document.addEventListener('click', function (e) {
    var b = e.target && e.target.closest ? e.target.closest('[data-confirm]') : null;
    if (b && !window.confirm(b.getAttribute('data-confirm'))) e.preventDefault();
  });
  // "Select all" checkboxes: data-select-all="<name>" toggles every checkbox of that name.
  document.addEventListener('change', function (e) {
    var t = e.target;
    if (!t || !t.getAttribute) return;
    var name = t.getAttribute('data-select-all');
    if (!name) return;
    var boxes = document.querySelectorAll('input[type="checkbox"][name="' + name.replace(/"/g, '') + '"]');
    for (var i = 0; i < boxes.length; i++) boxes[i].checked = t.checked;
  });
})();
