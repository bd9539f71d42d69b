// Shows every <time datetime> in the viewer's own time zone. The page
// reads in UTC without it; nothing else on the dashboard needs a script.
(function () {
  "use strict";
  var fmt;
  try {
    fmt = new Intl.DateTimeFormat(undefined, {
      year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
    });
  } catch (e) {
    return;
  }
  function localise() {
    var els = document.querySelectorAll("time[datetime]");
    for (var i = 0; i < els.length; i++) {
      var d = new Date(els[i].getAttribute("datetime"));
      if (!isNaN(d.getTime())) {
        els[i].title = els[i].textContent; // the UTC text stays at hand
        els[i].textContent = fmt.format(d);
      }
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", localise);
  } else {
    localise();
  }
})();
