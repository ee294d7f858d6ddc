/**
 * Real podman for tests, with no registry: a containers.conf this machine kind needs (runc, cgroupfs, file events
 * logger, explicit ulimits: crun cannot set RLIMIT_NOFILE here and hybrid cgroups need cgroupfs) written to a temp dir
 * and exported as CONTAINERS_CONF, and a tiny local image `localhost/polar-test-busybox:1` built with `podman import`
 * from a busybox-static rootfs (bin/ = busybox applets, lib → usr/lib so a host `/usr` bound read-only runs inside).
 * `.ci/run` installs podman, runc and busybox-static; without them `podmanReady()` is false and the tests say why.
 * Sources: https://docs.podman.io/en/latest/markdown/podman-import.1.html ,
 * https://github.com/containers/common/blob/main/docs/containers.conf.5.md
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, copyFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TEST_IMAGE = 'localhost/polar-test-busybox:1';
export const PODMAN_SKIP = '(skipped: podman, runc or busybox-static not installed; .ci/run installs them)';

const CONF = `[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`;

let ready: boolean | null = null;
let reason = '';

/** Why podman is not usable ('' when it is). */
export function podmanProblem(): string {
  podmanReady();
  return reason;
}

/**
 * Set up podman once per process: write the containers.conf (unless CONTAINERS_CONF is already set) and build the
 * test image when missing. Returns false (with `podmanProblem()` saying why) when podman, runc or busybox is absent.
 */
export function podmanReady(): boolean {
  if (ready !== null) return ready;
  ready = false;
  for (const bin of ['podman', 'runc', 'busybox']) {
    if (Bun.which(bin) === null && Bun.which(bin, { PATH: '/usr/sbin:/sbin:/usr/bin:/bin' }) === null) {
      reason = `${bin} is not installed`;
      return false;
    }
  }
  if (!process.env.CONTAINERS_CONF) {
    const dir = mkdtempSync(join(tmpdir(), 'polar-podman-conf-'));
    writeFileSync(join(dir, 'containers.conf'), CONF);
    process.env.CONTAINERS_CONF = join(dir, 'containers.conf');
  }
  if (spawnSync('podman', ['image', 'exists', TEST_IMAGE]).status !== 0) {
    const built = buildImage();
    if (built !== '') {
      reason = `building ${TEST_IMAGE} failed: ${built}`;
      return false;
    }
  }
  ready = true;
  return true;
}

/** Build the image from a busybox-static rootfs; '' on success, else the error. */
function buildImage(): string {
  const busybox = Bun.which('busybox', { PATH: '/usr/bin:/bin:/usr/sbin:/sbin' })!;
  const rootfs = mkdtempSync(join(tmpdir(), 'polar-rootfs-'));
  try {
    mkdirSync(join(rootfs, 'bin'));
    copyFileSync(busybox, join(rootfs, 'bin', 'busybox'));
    chmodSync(join(rootfs, 'bin', 'busybox'), 0o755);
    const applets = spawnSync(busybox, ['--list'], { encoding: 'utf8' }).stdout.split('\n').filter((a) => a && a !== 'busybox');
    for (const applet of applets) symlinkSync('busybox', join(rootfs, 'bin', applet));
    for (const [link, target] of [['lib', 'usr/lib'], ['lib64', 'usr/lib64'], ['sbin', 'bin']] as const) symlinkSync(target, join(rootfs, link));
    mkdirSync(join(rootfs, 'usr'));
    mkdirSync(join(rootfs, 'etc'));
    mkdirSync(join(rootfs, 'tmp'));
    chmodSync(join(rootfs, 'tmp'), 0o1777);
    writeFileSync(join(rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n');
    writeFileSync(join(rootfs, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
    // The host's dynamic linker cache, so host binaries under a bound /usr find their multiarch libraries.
    if (existsSync('/etc/ld.so.cache')) writeFileSync(join(rootfs, 'etc', 'ld.so.cache'), readFileSync('/etc/ld.so.cache'));
    const tar = spawnSync('tar', ['-C', rootfs, '-c', '.'], { maxBuffer: 64 * 1024 * 1024 });
    if (tar.status !== 0) return `tar: ${tar.stderr}`;
    const imported = spawnSync('podman', ['import', '--change', 'ENV PATH=/bin:/usr/bin', '-', TEST_IMAGE], { input: tar.stdout, encoding: 'utf8' });
    return imported.status === 0 ? '' : `podman import: ${imported.stderr}`;
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}

/** Run args that let the host's `/usr` (python3, git, node) run inside the busybox image, read-only. */
export const HOST_USR = ['-v', '/usr:/usr:ro'];
