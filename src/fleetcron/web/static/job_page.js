// The job page: a box that checks every shown target, and a count of the selected ones.
// The page works without it (each target has its own box).
"use strict";

(function () {
  document.querySelectorAll("[data-check-all]").forEach(function (all) {
    var form = document.getElementById(all.getAttribute("data-check-all"));
    if (!form) return;
    var boxes = Array.prototype.slice.call(form.querySelectorAll('tbody input[name="target"]'));
    var out = form.querySelector("[data-selected-count]");
    var update = function () {
      var on = boxes.filter(function (box) { return box.checked; }).length;
      all.checked = on === boxes.length && on > 0;
      all.indeterminate = on > 0 && on < boxes.length;
      if (out) out.textContent = on + " of " + boxes.length + " shown selected:";
    };
    all.hidden = false;
    all.addEventListener("change", function () {
      boxes.forEach(function (box) { box.checked = all.checked; });
      update();
    });
    boxes.forEach(function (box) { box.addEventListener("change", update); });
  });
})();
