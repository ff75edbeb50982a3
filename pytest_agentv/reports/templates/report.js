"use strict";
// Filters (verdict, file, evaluator, metadata tag, text), sorting, and case links (#file::id): the cases
// are elements of the page; this only hides, shows and reorders them.
(function () {
  var main = document.getElementById("cases");
  var cases = Array.prototype.slice.call(main.querySelectorAll("details.case"));
  var kind = document.getElementById("f-kind");
  var file = document.getElementById("f-file");
  var evaluator = document.getElementById("f-evaluator");
  // Only a page whose cases have metadata tags has this filter.
  var tag = document.getElementById("f-tag") || { value: "", addEventListener: function () {} };
  var text = document.getElementById("f-text");
  var sort = document.getElementById("sort");
  var shown = document.getElementById("shown");
  var empty = document.getElementById("empty");
  var texts = null;
  var sorted = "";

  cases.forEach(function (el, index) {
    el.dataset.order = String(index);
    el.evaluators = JSON.parse(el.dataset.evaluators || "[]");
    el.tags = JSON.parse(el.dataset.tags || "[]");
  });

  function number(el, key) {
    var value = el.dataset[key];
    return value === undefined ? null : parseFloat(value);
  }

  // Each sort puts the cases it has no value for last, in file order.
  var sorts = {
    score: function (el) { return number(el, "score"); },
    delta: function (el) { return number(el, "delta"); },
    cost: function (el) { var v = number(el, "cost"); return v === null ? null : -v; },
    latency: function (el) { var v = number(el, "latency"); return v === null ? null : -v; }
  };

  function apply() {
    var wanted = text.value.trim().toLowerCase();
    if (wanted && texts === null) {
      texts = cases.map(function (el) { return el.textContent.toLowerCase(); });
    }
    var count = 0;
    cases.forEach(function (el, index) {
      var visible = (!kind.value || el.dataset.kind === kind.value) &&
        (!file.value || el.dataset.file === file.value) &&
        (!evaluator.value || el.evaluators.indexOf(evaluator.value) >= 0) &&
        (!tag.value || el.tags.indexOf(tag.value) >= 0) &&
        (!wanted || texts[index].indexOf(wanted) >= 0);
      el.hidden = !visible;
      if (visible) { count += 1; }
    });
    if (sort.value !== sorted) { reorder(); }
    shown.textContent = count + " of " + cases.length + " shown";
    empty.hidden = count > 0;
    document.querySelectorAll(".chip").forEach(function (chip) {
      chip.classList.toggle("active", chip.dataset.kind === kind.value);
    });
  }

  // Cases move only when the sort changes: moving 10,000 elements is what costs.
  function reorder() {
    sorted = sort.value;
    var key = sorts[sorted];
    var ordered = cases.slice();
    if (key) {
      ordered.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) {
          if (x === y) { return a.dataset.order - b.dataset.order; }
          return x === null ? 1 : -1;
        }
        return x - y || a.dataset.order - b.dataset.order;
      });
    }
    var fragment = document.createDocumentFragment();
    ordered.forEach(function (el) { fragment.appendChild(el); });
    main.appendChild(fragment);
  }

  function follow() {
    var id;
    try { id = decodeURIComponent(location.hash.slice(1)); } catch (e) { id = location.hash.slice(1); }
    var el = id ? document.getElementById(id) : null;
    if (!el || !el.classList.contains("case")) { return; }
    if (el.hidden) {
      kind.value = file.value = evaluator.value = tag.value = text.value = "";
      apply();
    }
    el.open = true;
    el.scrollIntoView();
  }

  [kind, file, evaluator, tag, sort].forEach(function (control) {
    control.addEventListener("change", apply);
  });
  text.addEventListener("input", apply);
  document.getElementById("totals").addEventListener("click", function (event) {
    var chip = event.target.closest(".chip");
    if (chip) {
      kind.value = kind.value === chip.dataset.kind ? "" : chip.dataset.kind;
      apply();
    }
  });
  window.addEventListener("hashchange", follow);
  apply();
  follow();
})();
