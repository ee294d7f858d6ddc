/**
 * Live progress of a `polar run`: sessions per stage, completions, tokens and rewards so far. A cli-progress bar on a
 * TTY, plain lines (at most one per interval, only when something changed) otherwise, so CI logs stay readable.
 * cli-progress: https://github.com/npkg/cli-progress
 */
import { SingleBar } from 'cli-progress';

/** One observation of a running job. */
export interface RunSnapshot {
  /** Samples in the run (tasks × num_samples); a `--max-retries` retry adds none: it re-runs samples already counted. */
  total: number;
  /** Sessions on the gateway per stage (queued = waiting for INIT). */
  stages: { queued: number; init: number; ready: number; running: number; postrun: number };
  /** Samples whose last attempt has a result (any final status); a sample a retry is re-running is not done. */
  done: number;
  /** Of those, COMPLETED. */
  completed: number;
  /** CompletionRecords captured so far. */
  completions: number;
  /** Prompt + response tokens of those records. */
  tokens: number;
  /**
   * Sum and count of the evaluated rewards of finished samples (by last attempt); a sample without one (ERROR, TIMEOUT,
   * cancelled) is left out, as the summary's mean reward leaves it (src/observe/results.ts meanReward).
   */
  rewardSum: number;
  rewardCount: number;
}

export interface ProgressView {
  update(snapshot: RunSnapshot): void;
  /** Final render; the view prints nothing afterwards. */
  stop(snapshot: RunSnapshot): void;
}

/** The one-line description of a snapshot (the plain-line format, and the payload of the bar). */
export function describeSnapshot(s: RunSnapshot): string {
  const reward = s.rewardCount > 0 ? (s.rewardSum / s.rewardCount).toFixed(2) : '-';
  const st = s.stages;
  return `${s.done}/${s.total} sessions done (${s.completed} completed) | queued ${st.queued} init ${st.init} ready ${st.ready} running ${st.running} postrun ${st.postrun} | ${s.completions} completions, ${s.tokens} tokens | mean reward ${reward}`;
}

/**
 * A progress view writing to `stream`: a bar when `tty`, else plain lines at most every `intervalMs` (default 2000).
 * `now` is injectable for tests.
 */
export function createProgressView(opts: { stream: NodeJS.WritableStream & { isTTY?: boolean }; tty?: boolean; intervalMs?: number; now?: () => number }): ProgressView {
  const tty = opts.tty ?? opts.stream.isTTY === true;
  if (tty) {
    const bar = new SingleBar({
      format: '{bar} {value}/{total} sessions | {detail}',
      stream: opts.stream,
      hideCursor: true,
      clearOnComplete: false,
      barsize: 24,
    });
    let started = false;
    const detail = (s: RunSnapshot) => describeSnapshot(s).split(' | ').slice(1).join(' | ');
    return {
      update(s) {
        if (!started) {
          bar.start(s.total, s.done, { detail: detail(s) });
          started = true;
        } else {
          bar.setTotal(s.total);
          bar.update(s.done, { detail: detail(s) });
        }
      },
      stop(s) {
        this.update(s);
        bar.stop();
      },
    };
  }
  const now = opts.now ?? Date.now;
  const interval = opts.intervalMs ?? 2000;
  let last = '';
  let lastAt = -Infinity;
  const write = (line: string) => {
    opts.stream.write(`progress: ${line}\n`);
    last = line;
    lastAt = now();
  };
  return {
    update(s) {
      const line = describeSnapshot(s);
      if (line !== last && now() - lastAt >= interval) write(line);
    },
    stop(s) {
      const line = describeSnapshot(s);
      if (line !== last) write(line);
    },
  };
}
