#!/bin/sh
# Harness matrix: run the example task set with each real harness CLI through `polar run` (built-in
# simulator, loopback-only network namespace) and print harness × (sessions completed, pass@1, completions, traces).
#
#   scripts/harness-matrix.sh                      # every harness, 2 samples per task
#   SAMPLES=4 HARNESSES="pi codex" scripts/harness-matrix.sh
#   MODE=token scripts/harness-matrix.sh           # token mode (default chat)
#   MODE=token TASKS=examples/long-tasks SAMPLES=2 scripts/harness-matrix.sh   # long sessions (35 turns, thinking on)
#   RESTORE_REASONING=1 scripts/harness-matrix.sh  # chat mode with `polar run --restore-reasoning`
#   CONCURRENCY=1 HARNESSES=openclaw scripts/harness-matrix.sh   # one session at a time (`polar run --concurrency`)
#
# Columns: main chains (prefix_merging chains of the agent conversation; "4 (4/4)" = 4 chains, 4 of 4 sessions with
# exactly one), side/retry/compaction chains, and the trainer-token reduction per_request / prefix_merging.
# Each CLI is installed first with `polar harness install` (the only step that uses the network: the npm registry),
# then runs inside `unshare -n` with only `lo` up, so nothing it sends can leave the machine. Needs root (or
# unprivileged user namespaces, then `unshare -rn` is used). Results: $OUT/<harness>/{results.db,summary.json,run.log};
# each session's harness output (stdout/stderr tails) in $OUT/<harness>/work/harness-logs/s-<hash>.log. A session whose
# CLI reported failure ends ERROR, and its error (in results.db) quotes the tail of that output.
# A CLI that cannot be installed here (crush) gets a row saying why instead of a run.
# Exit status: 0 when every harness completed every session, 1 otherwise (a not-installable CLI does not count).
set -u
cd "$(dirname "$0")/.."
HARNESSES=${HARNESSES:-"pi claude_code codex qwen_code gemini_cli opencode cline continue kilo openclaw crush"}
# CLIs with no adapter because they cannot be installed here: a row with the reason instead of a run.
not_installable() {
  case "$1" in
    crush) echo "@charmland/crush 0.96.1 ships no binary in its npm tarball (no optionalDependencies either); its postinstall downloads it from GitHub releases, which this machine cannot reach, and Debian has no package" ;;
    *) return 1 ;;
  esac
}
SAMPLES=${SAMPLES:-2}
TASKS=${TASKS:-examples/tasks}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-600}
MODE=${MODE:-chat}
EXTRA=""
[ -n "${RESTORE_REASONING:-}" ] && EXTRA="--restore-reasoning"
[ -n "${CONCURRENCY:-}" ] && EXTRA="$EXTRA --concurrency $CONCURRENCY"
OUT=${OUT:-out/harness-matrix-$(date -u +%Y%m%dT%H%M%SZ)}
if command -v bun >/dev/null 2>&1; then BUN=$(command -v bun); else BUN=$PWD/node_modules/.bin/bun; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if unshare -n true 2>/dev/null; then NS="unshare -n"; elif unshare -rn true 2>/dev/null; then NS="unshare -rn"; else
  echo "harness-matrix: cannot create a loopback-only network namespace (unshare -n); refusing to run real CLIs" >&2
  exit 2
fi

status=0
for h in $HARNESSES; do
  dir="$OUT/$h"
  mkdir -p "$dir"
  if reason=$(not_installable "$h"); then
    echo "== $h: not installable here: $reason" >&2
    echo "$reason" >"$dir/not-installable"
    continue
  fi
  echo "== $h: install" >&2
  if ! "$BUN" src/main.ts harness install "$h" >"$dir/install.log" 2>&1; then
    echo "harness-matrix: installing $h failed (see $dir/install.log)" >&2
    echo "install failed" >"$dir/failure"
    status=1
    continue
  fi
  echo "== $h: polar run $TASKS --samples $SAMPLES --mode $MODE (loopback-only namespace)" >&2
  start=$(date +%s)
  $NS sh -c 'ip link set lo up; exec "$0" src/main.ts run "$1" --harness "$2" --samples "$3" --out "$4" --timeout-s "$5" --mode "$6" $7' \
    "$BUN" "$TASKS" "$h" "$SAMPLES" "$dir" "$RUN_TIMEOUT_S" "$MODE" "$EXTRA" >"$dir/run.log" 2>&1
  rc=$?
  echo "$rc $(( $(date +%s) - start ))" >"$dir/exit"
  [ "$rc" -eq 0 ] || status=1
done

# The matrix, from each run's summary.json.
"$BUN" -e '
const [out, ...names] = process.argv.slice(1);
const { existsSync, readFileSync } = require("node:fs");
const rows = [["harness", "sessions completed", "harness ok", "pass@1", "completions", "traces per_request", "traces prefix_merging", "main chains (sessions with 1)", "side/retry/compaction", "trainer tokens per_req/prefix", "reduction", "re-rendered", "exit", "wall"]];
for (const h of names) {
  const dir = `${out}/${h}`;
  if (existsSync(`${dir}/not-installable`)) { rows.push([h, "not installable here (reason below)", ...Array(12).fill("-")]); continue; }
  const [rc, secs] = existsSync(`${dir}/exit`) ? readFileSync(`${dir}/exit`, "utf8").trim().split(" ") : ["-", "-"];
  if (!existsSync(`${dir}/summary.json`)) { rows.push([h, "no summary (see run.log / install.log)", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", rc, `${secs}s`]); continue; }
  const s = JSON.parse(readFileSync(`${dir}/summary.json`, "utf8"));
  const x = s.harnesses.find((r) => r.harness === h) ?? s.harnesses[0];
  if (!x) { rows.push([h, "0/0", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", rc, `${secs}s`]); continue; }
  const roles = x.chain_roles ?? {};
  const ratio = x.trainer_tokens.prefix_merging > 0 ? `${(x.trainer_tokens.per_request / x.trainer_tokens.prefix_merging).toFixed(1)}x` : "-";
  rows.push([h, `${x.completed}/${x.sessions}`, `${x.harness_ok ?? x.sessions - (x.harness_failures ?? 0)}/${x.sessions}`, x.pass_at_1 === null ? "-" : x.pass_at_1.toFixed(3), String(x.completions), String(x.traces.per_request), String(x.traces.prefix_merging), `${roles.main ?? "-"} (${x.sessions_with_one_main_chain ?? "-"}/${x.sessions})`, `${roles.side ?? "-"}/${roles.retry ?? "-"}/${roles.compaction ?? "-"}`, `${x.trainer_tokens.per_request}/${x.trainer_tokens.prefix_merging}`, ratio, String(x.rerender_mismatches ?? 0), rc, `${secs}s`]);
}
const w = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
for (const [i, r] of rows.entries()) {
  console.log(r.map((c, j) => String(c).padEnd(w[j])).join(" | "));
  if (i === 0) console.log(w.map((n) => "-".repeat(n)).join("-|-"));
}
for (const h of names) if (existsSync(`${out}/${h}/not-installable`)) console.log(`${h}: not installable here: ${readFileSync(`${out}/${h}/not-installable`, "utf8").trim()}`);
for (const h of names) {
  const f = `${out}/${h}/summary.json`;
  if (!existsSync(f)) continue;
  for (const x of JSON.parse(readFileSync(f, "utf8")).harnesses) for (const r of x.harness_failure_reasons ?? []) console.log(`${h}: harness failure: ${r} (output: ${out}/${h}/work/harness-logs)`);
}
console.log(`\nper-harness logs and results: ${out}`);
' "$OUT" $HARNESSES
exit $status
