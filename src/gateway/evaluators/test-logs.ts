/**
 * Per-test statuses from a test runner's output, as SWE-bench's log parsers read them
 * (https://github.com/SWE-bench/SWE-bench, harness/log_parsers): a map from test id to PASSED, FAILED, SKIPPED, ERROR
 * or XFAIL. A test the output does not mention is absent (graders count it as not passed).
 */

export const TEST_LOG_PARSERS = ['pytest', 'unittest'] as const;
export type TestLogParser = (typeof TEST_LOG_PARSERS)[number];

const PYTEST_STATUSES = ['PASSED', 'FAILED', 'SKIPPED', 'ERROR', 'XFAIL'] as const;

/**
 * pytest with `-rA`: the short test summary lines `PASSED tests/test_x.py::test_a` and
 * `FAILED tests/test_x.py::test_b - AssertionError: …` (SWE-bench `parse_log_pytest`).
 */
export function parsePytestLog(log: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of log.split('\n')) {
    const line = raw.trim();
    const status = PYTEST_STATUSES.find((s) => line.startsWith(`${s} `));
    if (!status) continue;
    const rest = line.slice(status.length + 1).replace(/ - .*$/, '').trim();
    if (rest !== '') out.set(rest, status);
  }
  return out;
}

/**
 * unittest in verbose mode (`python -m unittest -v`, Django's runner): `test_a (pkg.mod.Class.test_a) ... ok`, `... FAIL`,
 * `... ERROR`, `... skipped 'why'`, `... expected failure`. The id is the text before ` ... `.
 */
export function parseUnittestLog(log: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of log.split('\n')) {
    const m = /^(\S.*?) \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)\s*$/.exec(raw.trimEnd());
    if (!m) continue;
    const word = m[2]!;
    const status = word === 'ok' ? 'PASSED' : word === 'FAIL' || word === 'unexpected success' ? 'FAILED' : word === 'ERROR' ? 'ERROR' : word === 'expected failure' ? 'XFAIL' : 'SKIPPED';
    out.set(m[1]!, status);
  }
  return out;
}

export function parseTestLog(parser: TestLogParser, log: string): Map<string, string> {
  return parser === 'pytest' ? parsePytestLog(log) : parseUnittestLog(log);
}

/** SWE-bench counts PASSED and XFAIL as passing (harness/grading.py `test_passed`). */
export function testPassed(statuses: Map<string, string>, id: string): boolean {
  const s = statuses.get(id);
  return s === 'PASSED' || s === 'XFAIL';
}
