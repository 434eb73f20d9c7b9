// Small utilities for the job-status web page: debounce the search box and
// poll the scheduler with backoff while a job is running.

'use strict';

/**
 * Returns a function that delays calling `fn` until `waitMs` have passed
 * since the last call. The pending call can be cancelled or flushed.
 */
function debounce(fn, waitMs) {
  let timer = null;
  let lastArgs = null;

  function debounced(...args) {
    lastArgs = args;
    clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      fn(...lastArgs);
    }, waitMs);
  }

  debounced.cancel = () => {
    clearTimeout(timer);
    timer = null;
  };

  debounced.flush = () => {
    if (timer !== null) {
      clearTimeout(timer);
      timer = null;
      fn(...lastArgs);
    }
  };

  return debounced;
}

const TERMINAL_STATES = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);

/**
 * Polls `fetchStatus(jobId)` until the job reaches a terminal state,
 * doubling the interval after each poll up to `maxMs`.
 */
async function pollUntilDone(fetchStatus, jobId, { startMs = 1000, maxMs = 30000, onUpdate } = {}) {
  let interval = startMs;
  for (;;) {
    const status = await fetchStatus(jobId);
    if (onUpdate) onUpdate(status);
    if (TERMINAL_STATES.has(status.state)) return status;
    await new Promise((resolve) => setTimeout(resolve, interval));
    interval = Math.min(interval * 2, maxMs);
  }
}

module.exports = { debounce, pollUntilDone, TERMINAL_STATES };
