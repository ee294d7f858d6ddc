/**
 * A PATH with every command of this one except `node`, `nodejs`, `npm`, `npx` and `corepack`: symlinks in a directory
 * under the home directory (not /tmp, which a bubblewrap session replaces with its own). JavaScript harness CLIs then
 * run on polar's own Bun through its `node` shim (src/gateway/harnesses/install.ts). Made once per test process and
 * removed when it exits.
 */
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

const NODE_TOOLS = new Set(['node', 'nodejs', 'npm', 'npx', 'corepack']);
let made: string | null = null;

export function pathWithoutNode(): string {
  if (made !== null) return made;
  const dir = mkdtempSync(join(homedir(), '.polar-path-without-node-'));
  for (const entry of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
    let names: string[] = [];
    try {
      names = readdirSync(entry);
    } catch {
      continue;
    }
    for (const name of names) {
      if (NODE_TOOLS.has(name)) continue;
      try {
        symlinkSync(join(entry, name), join(dir, name));
      } catch {
        // an earlier PATH entry already provides this name
      }
    }
  }
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  made = dir;
  return dir;
}
