// fleetcron pages: small enhancements on top of forms that work without JavaScript.
"use strict";

(function () {
  // -- The viewer's time zone: the server formats times in the zone this cookie names.
  function syncTimeZone() {
    var zone;
    try {
      zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    } catch (e) {
      return;
    }
    // IANA names ("America/Argentina/Buenos_Aires", "Etc/GMT+3") are cookie-safe as they are.
    if (!zone || !/^[A-Za-z0-9_+\-\/]+$/.test(zone)) return;
    var current = document.cookie.match(/(?:^|;\s*)fleetcron_tz=([^;]*)/);
    if (current && current[1] === zone) return;
    document.cookie = "fleetcron_tz=" + zone + "; path=/; max-age=31536000; samesite=lax";
    var shown = document.body.getAttribute("data-zone");
    var stored = document.cookie.indexOf("fleetcron_tz=") !== -1;
    // Reload once so this page shows its times in the viewer's zone; never loop if the
    // server does not know the zone.
    var key = "fleetcron_tz_reloaded";
    if (stored && shown !== zone && sessionStorage.getItem(key) !== zone) {
      sessionStorage.setItem(key, zone);
      window.location.reload();
    }
  }

  function showJsOnly() {
    document.querySelectorAll("[data-js-only]").forEach(function (el) {
      el.hidden = false;
    });
  }

  // -- The bulk job form's target picker: search, check all shown, count, selector.
  function pickerItems(listId) {
    var list = document.getElementById(listId);
    return list ? Array.prototype.slice.call(list.querySelectorAll("li")) : [];
  }

  function updateCount(listId) {
    var out = document.querySelector('[data-count-for="' + listId + '"]');
    if (!out) return;
    var items = pickerItems(listId);
    var on = items.filter(function (li) {
      return li.querySelector('input[type="checkbox"]').checked;
    }).length;
    out.textContent = on + " of " + items.length + " checked";
  }

  function setupPicker() {
    document.querySelectorAll("[data-filter]").forEach(function (box) {
      var listId = box.getAttribute("data-filter");
      box.addEventListener("input", function () {
        var needle = box.value.trim().toLowerCase();
        pickerItems(listId).forEach(function (li) {
          var hay = (li.getAttribute("data-name") + " " + li.getAttribute("data-labels")).toLowerCase();
          li.hidden = needle !== "" && hay.indexOf(needle) === -1;
        });
      });
    });
    document.querySelectorAll("[data-check]").forEach(function (button) {
      var listId = button.getAttribute("data-check");
      button.addEventListener("click", function () {
        var value = button.getAttribute("data-value") === "on";
        pickerItems(listId).forEach(function (li) {
          if (!li.hidden) li.querySelector('input[type="checkbox"]').checked = value;
        });
        updateCount(listId);
      });
    });
    document.querySelectorAll("[data-count-for]").forEach(function (out) {
      var listId = out.getAttribute("data-count-for");
      var list = document.getElementById(listId);
      if (list) list.addEventListener("change", function () { updateCount(listId); });
    });
    document.querySelectorAll("[data-selector-for]").forEach(function (input) {
      var listId = input.getAttribute("data-selector-for") + "-list";
      var mark = function () { markSelector(input.value, listId); };
      input.addEventListener("input", mark);
      mark();
    });
  }

  function parsePairs(text) {
    var pairs = {};
    var ok = true;
    text.split(",").forEach(function (part) {
      part = part.trim();
      if (!part) return;
      var at = part.indexOf("=");
      if (at < 1) { ok = false; return; }
      pairs[part.slice(0, at).trim()] = part.slice(at + 1).trim();
    });
    return ok ? pairs : null;
  }

  function markSelector(text, listId) {
    var selector = parsePairs(text);
    pickerItems(listId).forEach(function (li) {
      var labels = parsePairs(li.getAttribute("data-labels") || "") || {};
      var matches = selector === null || Object.keys(selector).every(function (key) {
        return labels[key] === selector[key];
      });
      li.classList.toggle("unmatched", !matches);
      var note = li.querySelector(".no-match");
      if (note) note.hidden = matches;
    });
  }

  // -- Live schedule preview: GET /api/v1/cron/preview as the user types.
  var WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

  function fireTime(iso) {
    // "2026-03-02T10:00:00+01:00" -> "Mon 2026-03-02 10:00" (in the job's zone, as sent)
    var date = iso.slice(0, 10);
    var parts = date.split("-").map(Number);
    var day = new Date(Date.UTC(parts[0], parts[1] - 1, parts[2])).getUTCDay();
    return WEEKDAYS[day] + " " + date + " " + iso.slice(11, 16);
  }

  function element(tag, className, text) {
    var el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function showPreview(box, data) {
    box.replaceChildren();
    box.appendChild(element("p", "description", data.description));
    if (data.zones && data.zones.length) {
      // tz=target: each target's local time, one line per zone in use.
      box.appendChild(element("p", "muted small", "Next fire times at each target's local time:"));
      var spread = element("ul", "fires zone-spread");
      data.zones.forEach(function (z) {
        var li = element("li", "", z.timezone + " (" + z.targets + " target" +
          (z.targets === 1 ? "" : "s") + "): " + z.next.map(fireTime).join(", "));
        li.setAttribute("data-zone", z.timezone);
        spread.appendChild(li);
      });
      box.appendChild(spread);
      return;
    }
    box.appendChild(element("p", "muted small", "Next fire times (" + data.timezone + "):"));
    var list = element("ol", "fires");
    data.next.forEach(function (iso) { list.appendChild(element("li", "", fireTime(iso))); });
    box.appendChild(list);
    if (data.dst && data.dst.length) {
      // What the schedule does at the zone's next DST transitions, under the DST choices.
      box.appendChild(element("p", "muted small", "DST ahead:"));
      var notes = element("ul", "dst-notes");
      data.dst.forEach(function (text) { notes.appendChild(element("li", "", text)); });
      box.appendChild(notes);
    }
  }

  function showProblem(box, message) {
    box.replaceChildren(element("p", "field-error", message));
  }

  function setupPreview() {
    document.querySelectorAll("[data-preview]").forEach(function (input) {
      var box = document.getElementById(input.getAttribute("data-preview"));
      var zoneInput = document.getElementById(input.getAttribute("data-zone-input"));
      var dstInputs = (input.getAttribute("data-dst-inputs") || "").split(" ")
        .map(function (id) { return id && document.getElementById(id); })
        .filter(function (el) { return el; });
      if (!box) return;
      var timer = null;
      var asked = 0;
      var ask = function () {
        var expr = input.value.trim();
        var mine = ++asked;
        if (!expr) {
          box.replaceChildren(element("p", "muted small", "Type a schedule to see when it fires."));
          return;
        }
        var query = "expr=" + encodeURIComponent(expr);
        var zone = zoneInput ? zoneInput.value.trim() : "";
        if (zone) query += "&tz=" + encodeURIComponent(zone);
        dstInputs.forEach(function (el) {
          if (el.value) query += "&" + el.name + "=" + encodeURIComponent(el.value);
        });
        fetch("/api/v1/cron/preview?" + query, {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        }).then(function (response) {
          return response.json().then(function (body) {
            if (mine !== asked) return; // a newer request is on its way
            if (response.ok) showPreview(box, body);
            else showProblem(box, (body.error && body.error.message) || "not a valid schedule");
          });
        }).catch(function () {
          if (mine === asked) showProblem(box, "could not check the schedule (connection problem)");
        });
      };
      var later = function () {
        clearTimeout(timer);
        timer = setTimeout(ask, 250);
      };
      input.addEventListener("input", later);
      if (zoneInput) zoneInput.addEventListener("change", later);
      dstInputs.forEach(function (el) { el.addEventListener("change", later); });
    });
  }

  // -- Runs still queued, pending (waiting for their rollout batch) or running: ask the API
  // about them and reload the page as soon as one of them changes state (not while the
  // viewer is typing or reading output).
  function setupAutorefresh() {
    var section = document.querySelector("[data-autorefresh]");
    if (!section) return;
    var pending = Array.prototype.slice.call(
      section.querySelectorAll(
        'tr[data-status="queued"], tr[data-status="pending"], tr[data-status="running"]'));
    if (!pending.length) return;
    var every = 1000 * (Number(section.getAttribute("data-autorefresh")) || 1);
    var polls = 0;
    var busy = function () {
      var active = document.activeElement;
      if (active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) return true;
      return document.querySelector("details.output[open], details.drawer[open]") !== null;
    };
    var changed = function () {
      return Promise.all(pending.map(function (row) {
        return fetch("/api/v1/runs/" + row.getAttribute("data-run"), {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        }).then(function (response) {
          return response.ok ? response.json() : null;
        }).then(function (run) {
          return run !== null && run.status !== row.getAttribute("data-status");
        });
      })).then(function (answers) { return answers.indexOf(true) !== -1; });
    };
    var poll = function () {
      polls += 1;
      changed().then(function (yes) {
        if (yes && !busy()) window.location.reload();
        // Long runs: ask less often as time goes by.
        else setTimeout(poll, polls < 30 ? every : every * 5);
      }).catch(function () { setTimeout(poll, every * 5); });
    };
    setTimeout(poll, every);
  }

  // -- A run that is queued or running ([data-live-run]): follow its output through
  // GET /api/v1/runs/{id}/output?since=..., count its elapsed time, and reload the page
  // (which then shows the recorded output) once it has ended. Without JavaScript the page
  // reloads itself (<noscript> meta refresh).
  function elapsedText(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    if (s >= 3600) return Math.floor(s / 3600) + "h " + pad(Math.floor(s % 3600 / 60)) + "m " + pad(s % 60) + "s";
    if (s >= 60) return Math.floor(s / 60) + "m " + pad(s % 60) + "s";
    return s + "s";
  }

  function setupLiveRun() {
    var section = document.querySelector("[data-live-run]");
    if (!section) return;
    var runId = section.getAttribute("data-live-run");
    var offset = Number(section.getAttribute("data-offset")) || 0;
    var status = section.getAttribute("data-status");
    var out = section.querySelector("[data-live-output]");
    var clock = section.querySelector("[data-elapsed]");
    var base = clock ? Number(clock.getAttribute("data-elapsed")) || 0 : 0;
    var since = Date.now();
    var failures = 0;
    if (clock) {
      setInterval(function () {
        clock.textContent = elapsedText(base + (Date.now() - since) / 1000);
      }, 1000);
    }
    // Control characters other than newline and tab shown as escapes, as the server does
    // (logs.escape_output_controls): a terminal sequence is seen, not copied along.
    var shown = function (text) {
      return text.replace(/\r\n/g, "\n").replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]/g, function (c) {
        var code = c.charCodeAt(0);
        if (c === "\r") return "\\r";
        return code < 0x100
          ? "\\x" + ("0" + code.toString(16)).slice(-2)
          : "\\u" + ("000" + code.toString(16)).slice(-4);
      });
    };
    var append = function (body) {
      if (body.gap && body.gap_at > 0) out.appendChild(document.createTextNode(shown(body.text.slice(0, body.gap_at))));
      if (body.gap) out.appendChild(element("span", "gap", "\n[... " + body.gap + " bytes not kept ...]\n"));
      var rest = body.gap ? body.text.slice(body.gap_at) : body.text;
      if (rest) out.appendChild(document.createTextNode(shown(rest)));
      var atBottom = out.scrollHeight - out.scrollTop - out.clientHeight < 40;
      if (atBottom) out.scrollTop = out.scrollHeight;
    };
    var poll = function () {
      fetch("/api/v1/runs/" + runId + "/output?since=" + offset, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      }).then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      }).then(function (body) {
        failures = 0;
        if (body.text || body.gap) append(body);
        offset = body.offset;
        if (clock && body.elapsed_s !== null) {
          base = body.elapsed_s;
          since = Date.now();
        }
        if (body.status !== status) {
          window.location.reload(); // started, or ended: the server shows what it is now
          return;
        }
        setTimeout(poll, 1000);
      }).catch(function () {
        failures += 1;
        setTimeout(poll, Math.min(1000 * Math.pow(2, failures), 15000));
      });
    };
    setTimeout(poll, 1000);
  }

  // -- Target form: the SSH fields only matter for SSH targets.
  function setupKindToggle() {
    document.querySelectorAll("[data-kind-form]").forEach(function (form) {
      var radios = form.querySelectorAll('input[name="kind"]');
      var update = function () {
        var kind = form.querySelector('input[name="kind"]:checked');
        form.querySelectorAll("[data-kind]").forEach(function (part) {
          part.hidden = kind !== null && part.getAttribute("data-kind") !== kind.value;
        });
      };
      radios.forEach(function (radio) { radio.addEventListener("change", update); });
      update();
    });
  }

  function setupSmallButtons() {
    document.querySelectorAll("[data-copy]").forEach(function (button) {
      button.addEventListener("click", function () {
        var source = document.getElementById(button.getAttribute("data-copy"));
        if (!source || !navigator.clipboard) return;
        navigator.clipboard.writeText(source.textContent.trim()).then(function () {
          button.textContent = "Copied";
        });
      });
    });
    document.querySelectorAll("[data-back]").forEach(function (button) {
      button.addEventListener("click", function () { window.history.back(); });
    });
  }

  // -- Character counters ([data-counter-for]): the count against the server's limit, as
  // the user types. Nothing is cut or blocked: the server refuses a value over the limit with
  // its message and gives the form back as typed.
  function setupCounters() {
    document.querySelectorAll("[data-counter-for]").forEach(function (out) {
      var input = document.getElementById(out.getAttribute("data-counter-for"));
      var limit = Number(out.getAttribute("data-limit"));
      if (!input || !limit) return;
      var update = function () {
        // characters as the server counts them: code points (an emoji is one), and a line
        // break is one (the browser sends CRLF, the server reads it as LF)
        var used = Array.from(input.value).length;
        var over = used - limit;
        out.textContent = used + " / " + limit + " characters" +
          (over > 0 ? ": " + over + " too many" : "");
        out.classList.toggle("over", over > 0);
      };
      input.addEventListener("input", update);
      update();
    });
  }

  // -- The header's project switcher: choosing a project opens it (the button does so
  // without JavaScript).
  function setupProjectSwitch() {
    document.querySelectorAll("[data-switch-project]").forEach(function (select) {
      select.addEventListener("change", function () {
        select.form.submit();
      });
    });
  }

  syncTimeZone();
  showJsOnly();
  setupProjectSwitch();
  setupCounters();
  setupPicker();
  setupPreview();
  setupAutorefresh();
  setupLiveRun();
  setupKindToggle();
  setupSmallButtons();
})();
