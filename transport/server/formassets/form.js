// The hosted payment form's script: served as a file (the pages' Content
// Security Policy allows no inline script), no framework, no third-party
// resource. It checks the card before submit, sends it in a POST body to the
// gateway itself, follows the order to its outcome, tells the parent window
// (contract section 9a) and sends the customer back to the shop.
(function () {
  "use strict";

  var cfgNode = document.getElementById("pg-config");
  if (!cfgNode) return;
  var cfg = JSON.parse(cfgNode.textContent);
  var t = cfg.texts || {};
  var live = document.getElementById("pg-live");
  var lastPosted = "";
  var FINAL_DELAY_MS = 1200;
  var POLL_MS = 500;

  function say(text, kind) {
    if (!live) return;
    live.textContent = text || "";
    live.className = "status" + (kind ? " " + kind : "");
  }

  // The message to the parent window: once per status this page sees change.
  function postStatus(s) {
    if (!s || s.status === lastPosted || s.status === "created") return;
    lastPosted = s.status;
    if (!window.parent || window.parent === window) return;
    var msg = {
      type: "order-status",
      order_id: s.order_id,
      status: s.status,
      amount: s.amount,
      currency: s.currency
    };
    if (s.decline) msg.decline = { code: s.decline.code, message: s.decline.message };
    try {
      window.parent.postMessage(msg, cfg.targetOrigin || "*");
    } catch (e) {
      // A malformed target origin must not stop the payment flow.
    }
  }

  function showOutcome(s) {
    if (s.status === "declined") {
      say(t.declined + (s.decline && s.decline.message ? ": " + s.decline.message : ""), "declined");
    } else if (s.status === "expired") {
      say(t.expired, "declined");
    } else {
      say(t.success, "success");
    }
  }

  // follow polls the order until the payment attempt has its outcome.
  function follow(s) {
    postStatus(s);
    if (s.redirect_url && !s.final) {
      say(t.to_bank);
      window.location.assign(s.redirect_url);
      return;
    }
    if (s.final) {
      showOutcome(s);
      if (s.return_url) {
        setTimeout(function () {
          say(t.redirecting, s.status === "declined" ? "declined" : "success");
          window.location.assign(s.return_url);
        }, FINAL_DELAY_MS);
      }
      return;
    }
    say(t.processing);
    setTimeout(function () {
      fetch(cfg.statusUrl, { cache: "no-store", credentials: "omit", redirect: "error" })
        .then(function (r) { return r.json(); })
        .then(follow)
        .catch(function () { follow(s); });
    }, POLL_MS);
  }

  // ----- card checks (hints before submit; the gateway checks again) -----

  function digits(v) { return v.replace(/[\s-]/g, ""); }

  function luhn(num) {
    var sum = 0, dbl = false;
    for (var i = num.length - 1; i >= 0; i--) {
      var d = num.charCodeAt(i) - 48;
      if (dbl) { d *= 2; if (d > 9) d -= 9; }
      sum += d;
      dbl = !dbl;
    }
    return sum % 10 === 0;
  }

  function isAmex(num) { return /^3[47]/.test(num); }

  var fields = {
    number: "cc-number",
    name: "cc-name",
    month: "cc-exp-month",
    year: "cc-exp-year",
    cvv: "cc-csc"
  };

  // The gateway's attribute names (charge validation) → the page's inputs.
  var attrToField = {
    "payment_source.card_number": "number",
    "payment_source.card_holder_name": "name",
    "payment_source.card_exp_month": "month",
    "payment_source.card_exp_year": "year",
    "payment_source.card_cvv": "cvv"
  };

  function input(name) { return document.getElementById(fields[name]); }

  function value(name) {
    var el = input(name);
    return el ? el.value.trim() : "";
  }

  function setError(name, text) {
    var el = input(name);
    var err = document.getElementById(fields[name] + "-error");
    if (!el || !err) return;
    err.textContent = text || "";
    el.setAttribute("aria-invalid", text ? "true" : "false");
  }

  function check(name) {
    var v = value(name);
    var now = new Date();
    switch (name) {
      case "number":
        v = digits(v);
        if (!v) return t.required;
        if (!/^\d{12,19}$/.test(v) || !luhn(v)) return t.number;
        return "";
      case "name":
        return v ? "" : t.required;
      case "month":
        if (!v) return t.required;
        if (!/^\d{1,2}$/.test(v) || +v < 1 || +v > 12) return t.month;
        return "";
      case "year":
        if (!v) return t.required;
        if (!/^(\d{2}|\d{4})$/.test(v)) return t.year;
        var y = v.length === 2 ? 2000 + +v : +v;
        var m = +value("month");
        if (y < now.getUTCFullYear() ||
            (m >= 1 && m <= 12 && y === now.getUTCFullYear() && m < now.getUTCMonth() + 1)) {
          return t.card_expired;
        }
        return "";
      case "cvv":
        var amex = isAmex(digits(value("number")));
        if (!v) return t.required;
        if (amex && !/^\d{4}$/.test(v)) return t.cvv4;
        if (!amex && !/^\d{3}$/.test(v)) return t.cvv3;
        return "";
    }
    return "";
  }

  function setupForm() {
    var form = document.getElementById("pg-form");
    var button = document.getElementById("pg-pay");
    var general = document.getElementById("pg-error");
    if (!form) return;

    // Pressing Pay takes the focus from the field last typed in. Its hint,
    // shown at once, would push Pay down under the pointer: the release
    // lands beside the button and the click is lost. While Pay is pressed
    // the hint waits; the submit checks every field, and a press released
    // elsewhere (no click follows) shows the hint then.
    var pressed = false, waiting = [];
    function showWaiting() {
      pressed = false;
      waiting.forEach(function (name) { if (value(name)) setError(name, check(name)); });
      waiting = [];
    }
    button.addEventListener("pointerdown", function () { pressed = true; });
    ["pointerup", "pointercancel"].forEach(function (type) {
      document.addEventListener(type, function () {
        // The click, and the submit, come in the same task as the release.
        if (pressed) setTimeout(function () { if (pressed) showWaiting(); }, 0);
      });
    });

    Object.keys(fields).forEach(function (name) {
      var el = input(name);
      if (!el) return;
      // A hint as soon as a field is left, and cleared while it is fixed.
      el.addEventListener("blur", function () {
        if (pressed) {
          waiting.push(name);
          return;
        }
        if (value(name)) setError(name, check(name));
      });
      el.addEventListener("input", function () {
        if (el.getAttribute("aria-invalid") === "true" && !check(name)) setError(name, "");
      });
    });

    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      pressed = false;
      waiting = [];
      general.textContent = "";
      var first = null;
      Object.keys(fields).forEach(function (name) {
        var msg = check(name);
        setError(name, msg);
        if (msg && !first) first = name;
      });
      if (first) {
        general.textContent = t.fix;
        input(first).focus();
        return;
      }
      // Empty inputs are absent fields; the card goes only in this body.
      var card = {
        card_number: digits(value("number")),
        card_holder_name: value("name"),
        card_exp_month: value("month"),
        card_exp_year: value("year"),
        card_cvv: value("cvv")
      };
      Object.keys(card).forEach(function (k) { if (!card[k]) delete card[k]; });
      button.disabled = true;
      form.setAttribute("aria-busy", "true");
      say(t.processing);
      fetch(cfg.payUrl, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(card),
        cache: "no-store",
        credentials: "omit",
        redirect: "error"
      }).then(function (r) {
        return r.json().then(function (body) { return { ok: r.ok, status: r.status, body: body }; });
      }).then(function (res) {
        if (res.ok) {
          form.hidden = true;
          follow(res.body);
          return;
        }
        button.disabled = false;
        form.removeAttribute("aria-busy");
        say("");
        var msgs = (res.body && res.body.error && res.body.error.messages) || {};
        var focus = null, other = [];
        Object.keys(msgs).forEach(function (attr) {
          var name = attrToField[attr];
          if (name) {
            setError(name, msgs[attr].join(" "));
            if (!focus) focus = name;
          } else {
            other.push(msgs[attr].join(" "));
          }
        });
        if (res.status === 409 || res.status === 404) {
          // Used or expired meanwhile: this form cannot pay any more.
          general.textContent = t.used;
          button.disabled = true;
          return;
        }
        general.textContent = focus ? t.fix : (other.join(" ") || t.failed);
        if (focus) input(focus).focus();
      }).catch(function () {
        button.disabled = false;
        form.removeAttribute("aria-busy");
        say("");
        general.textContent = t.failed;
      });
    });
  }

  if (cfg.mode === "pay") {
    setupForm();
  } else if (cfg.mode === "follow" && cfg.initial) {
    follow(cfg.initial);
  }
})();
