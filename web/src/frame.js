// The one place the page touches the DOM for streamed text: views marked dirty are rendered
// together in the next animation frame (at most one update per frame, no timers). Each
// frame's main-thread time is a performance measure "tandem:frame" whose detail says how
// many tokens it showed; the test reads them to bound the per-token cost.
const dirty = new Set();
const after = new Set();
let scheduled = false;
let tokens = 0;

export function markDirty(view, newTokens = 0) {
  dirty.add(view);
  tokens += newTokens;
  if (!scheduled) {
    scheduled = true;
    requestAnimationFrame(flush);
  }
}

// Runs after the views of every frame (scrolling to the bottom reads the new layout).
export function afterFrame(fn) { after.add(fn); }

function flush() {
  scheduled = false;
  const t0 = performance.now();
  const views = [...dirty];
  dirty.clear();
  const n = tokens;
  tokens = 0;
  for (const v of views) v.frame();
  for (const fn of after) fn();
  performance.measure('tandem:frame', { start: t0, detail: { tokens: n } });
}
