/**
 * Air-gapped harness installs: `packHarnesses` writes installed harness prefixes from the cache into one
 * `.tar.zst` (a `polar-pack.json` manifest with each file's SHA-256 and each symlink's target, then the prefixes);
 * `installPack` unpacks one into a cache, verifies every checksum before anything enters the cache, and moves each
 * prefix in whole. The tar is made and read by the system `tar` (GNU or BSD, present on every Linux box) and
 * compressed with Bun's built-in zstd (`Bun.zstdCompressSync`), so neither needs a dependency or a registry.
 * Sources: https://bun.com/docs/api/utils (zstd), https://www.gnu.org/software/tar/manual/.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { runProcess } from '../runtimes/process.ts';
import { harnessPaths, harnessPrefix } from './install.ts';
import type { HarnessPackage } from './types.ts';

export const PACK_MANIFEST = 'polar-pack.json';

/** The pack's table of contents: per package, its prefix dir; per path (relative to the cache), a file hash or a link. */
export interface PackManifest {
  format: 1;
  packages: { name: string; version: string; bin: string; dir: string }[];
  files: Record<string, { sha256: string; size: number } | { link: string }>;
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** Walk `root/dir`, listing regular files (hashed) and symlinks (target) by path relative to `root`. */
function listTree(root: string, dir: string, into: PackManifest['files']): void {
  for (const entry of readdirSync(join(root, dir))) {
    const rel = join(dir, entry);
    const abs = join(root, rel);
    const st = lstatSync(abs);
    if (st.isSymbolicLink()) into[rel] = { link: readlinkSync(abs) };
    else if (st.isDirectory()) listTree(root, rel, into);
    else if (st.isFile()) into[rel] = { sha256: sha256(abs), size: st.size };
  }
}

async function tar(args: string[], cwd: string): Promise<void> {
  const r = await runProcess(['tar', ...args], { cwd, env: { ...(process.env as Record<string, string>) }, timeoutMs: 30 * 60_000 });
  if (r.exitCode !== 0) throw new Error(`tar ${args[0]} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-400)}`);
}

/**
 * Write the installed prefixes of `pkgs` (from `cacheDir`) to `out` (zstd-compressed tar). Throws Error naming the
 * package when one is not installed in `cacheDir`. Returns the manifest written.
 */
export async function packHarnesses(pkgs: HarnessPackage[], cacheDir: string, out: string, opts: { level?: number } = {}): Promise<PackManifest> {
  const manifest: PackManifest = { format: 1, packages: [], files: {} };
  for (const pkg of pkgs) {
    const paths = harnessPaths(cacheDir, pkg);
    if (!paths.installed) throw new Error(`${pkg.name}@${pkg.version} is not installed in ${cacheDir}`);
    const dir = relative(cacheDir, paths.prefix);
    manifest.packages.push({ name: pkg.name, version: pkg.version, bin: pkg.bin, dir });
    listTree(cacheDir, dir, manifest.files);
  }
  const staging = mkdtempSync(join(dirname(out), '.polar-pack-'));
  try {
    writeFileSync(join(staging, PACK_MANIFEST), `${JSON.stringify(manifest)}\n`);
    const tarPath = join(staging, 'pack.tar');
    await tar(['-cf', tarPath, '-C', staging, PACK_MANIFEST, '-C', cacheDir, ...manifest.packages.map((p) => p.dir)], cacheDir);
    writeFileSync(out, Bun.zstdCompressSync(readFileSync(tarPath), { level: opts.level ?? 10 }));
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return manifest;
}

/**
 * Install every package in the pack at `file` into `cacheDir`. Each file's SHA-256, each symlink's target and the
 * absence of anything unlisted are checked before a prefix is moved into the cache; a package already installed
 * there is kept as it is. Throws Error on a checksum mismatch (naming the path), a malformed pack or a tar failure;
 * the cache is then unchanged. Returns the packages and whether each was installed or already present.
 */
export async function installPack(file: string, cacheDir: string): Promise<{ name: string; version: string; status: 'installed' | 'already installed' }[]> {
  mkdirSync(cacheDir, { recursive: true });
  const staging = mkdtempSync(join(cacheDir, '.polar-unpack-'));
  try {
    const tarPath = join(staging, 'pack.tar');
    writeFileSync(tarPath, Bun.zstdDecompressSync(readFileSync(file)));
    const tree = join(staging, 'tree');
    mkdirSync(tree);
    await tar(['-xf', tarPath, '-C', tree, '--no-same-owner'], staging);
    rmSync(tarPath);
    const manifestPath = join(tree, PACK_MANIFEST);
    if (!existsSync(manifestPath)) throw new Error(`${file}: no ${PACK_MANIFEST} (not a polar harness pack)`);
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as PackManifest;
    if (manifest.format !== 1 || !Array.isArray(manifest.packages)) throw new Error(`${file}: ${PACK_MANIFEST} has an unknown format`);
    const found: PackManifest['files'] = {};
    for (const p of manifest.packages) {
      if (p.dir !== relative(cacheDir, harnessPrefix(cacheDir, p))) throw new Error(`${file}: package ${p.name}@${p.version} has dir ${JSON.stringify(p.dir)}`);
      if (!existsSync(join(tree, p.dir))) throw new Error(`${file}: ${p.dir} is missing`);
      listTree(tree, p.dir, found);
    }
    for (const [path, want] of Object.entries(manifest.files)) {
      const got = found[path];
      if (!got) throw new Error(`${file}: ${path} is missing`);
      if ('link' in want ? !('link' in got) || got.link !== want.link : !('sha256' in got) || got.sha256 !== want.sha256) {
        throw new Error(`${file}: checksum mismatch at ${path}`);
      }
    }
    const extra = Object.keys(found).filter((p) => !(p in manifest.files));
    if (extra.length) throw new Error(`${file}: unlisted files ${extra.slice(0, 3).join(', ')}`);
    const results: { name: string; version: string; status: 'installed' | 'already installed' }[] = [];
    for (const p of manifest.packages) {
      const target = join(cacheDir, p.dir);
      if (harnessPaths(cacheDir, { name: p.name, version: p.version, bin: p.bin }).installed) {
        results.push({ name: p.name, version: p.version, status: 'already installed' });
        continue;
      }
      rmSync(target, { recursive: true, force: true }); // a partial install: the pack replaces it whole
      renameSync(join(tree, p.dir), target);
      results.push({ name: p.name, version: p.version, status: 'installed' });
    }
    return results;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
