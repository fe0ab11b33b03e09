// Keeps the live regions of a web page current without a reload (docs/operating.md#the-web-mailbox).
//
// The page names its source on <main data-live-source="...">; each region it may refresh
// carries data-live="<key>". The source answers the same regions rendered by the same
// templates, and 304 with no body while they are unchanged. Only server-rendered, escaped
// markup is inserted, and only into the regions: the script builds no markup of its own.
// While the tab is hidden it asks nothing, and it asks at once when the tab is shown.
// Without JavaScript the page is simply as it was rendered.
"use strict";

(() => {
  const POLL_MS = 1000; // a change shows within about a second, and well within two
  const MAX_BACKOFF_MS = 30000; // after errors (server down, database unavailable)

  const main = document.querySelector("main[data-live-source]");
  if (!main) {
    return;
  }
  const source = main.dataset.liveSource;
  let etag = null;
  let timer = null;
  let inFlight = false;
  let stopped = false;
  let delay = POLL_MS;

  function regionsOf(root) {
    const found = new Map();
    for (const region of root.querySelectorAll("[data-live]")) {
      found.set(region.dataset.live, region);
    }
    return found;
  }

  function apply(markup) {
    // A <template>'s content is inert: nothing in it loads or runs while it is parsed.
    const fragment = document.createElement("template");
    fragment.innerHTML = markup;
    const shown = regionsOf(main);
    for (const [key, fresh] of regionsOf(fragment.content)) {
      const region = shown.get(key);
      // The region element stays (an aria-live one must), only its content changes.
      if (region && region.innerHTML !== fresh.innerHTML) {
        region.replaceChildren(...fresh.childNodes);
      }
    }
  }

  function schedule(after) {
    clearTimeout(timer);
    timer = null;
    if (!stopped && !document.hidden) {
      timer = setTimeout(poll, after);
    }
  }

  async function poll() {
    clearTimeout(timer);
    timer = null;
    if (inFlight || stopped || document.hidden) {
      return;
    }
    inFlight = true;
    try {
      const headers = etag ? { "If-None-Match": etag } : {};
      const response = await fetch(source, {
        headers,
        cache: "no-store",
        credentials: "same-origin",
        // Signed out meanwhile: the source sends to the sign-in page; stop, and leave the
        // page as it is until the next navigation.
        redirect: "manual",
      });
      if (response.type === "opaqueredirect") {
        stopped = true;
        return;
      }
      if (response.status === 200) {
        const markup = await response.text();
        apply(markup);
        etag = response.headers.get("ETag");
      } else if (response.status !== 304) {
        throw new Error(`live regions: HTTP ${response.status}`);
      }
      delay = POLL_MS;
    } catch (error) {
      delay = Math.min(delay * 2, MAX_BACKOFF_MS);
    } finally {
      inFlight = false;
    }
    schedule(delay);
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      schedule(0); // clears the timer, schedules nothing
    } else {
      delay = POLL_MS;
      poll(); // catch up at once
    }
  });
  // Back from the back-forward cache: the regions are as they were when the page left.
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) {
      poll();
    }
  });
  schedule(POLL_MS);
})();
