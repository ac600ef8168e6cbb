#!/usr/bin/env node
// Builds the npm packages of a release beside goreleaser's archives, publishing nothing:
//
//   node clients/node/npm/build.mjs --version 1.4.0 --os linux --arch amd64 --binary dist/.../cfp --out dist/npm
//
// packs the platform package @cfp-dev/cli-<platform>-<arch> (the skeleton in this directory,
// stamped with the version, the binary in bin/) and the main package @cfp-dev/changefeed (the
// version stamped, every platform package listed in optionalDependencies at that exact
// version) into --out as .tgz files. goreleaser runs it after each build (.goreleaser.yaml,
// builds[].hooks.post), so every platform it builds gets its package; the main package is
// the same each time. Without --binary it packs the main package only.
//
// The repository's clients/node/package.json lists no optionalDependencies: until the
// @cfp-dev scope is ours on the registry, an `npm install ./clients/node` would otherwise fetch
// whatever someone published under those names. The release's package lists them.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const clientDir = path.resolve(here, '..');

// goreleaser's GOOS/GOARCH to Node's process.platform/process.arch.
const nodeOS = { linux: 'linux', darwin: 'darwin', windows: 'win32' };
const nodeArch = { amd64: 'x64', arm64: 'arm64' };

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) usage(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  return out;
}

function usage(msg) {
  process.stderr.write(`build.mjs: ${msg}\nusage: build.mjs --version V [--os GOOS --arch GOARCH --binary PATH] --out DIR\n`);
  process.exit(2);
}

/** The platform packages whose skeletons are in this directory: [{dir, name, os, cpu}]. */
export function platforms() {
  return fs.readdirSync(here)
    .filter((d) => d.startsWith('cli-') && fs.existsSync(path.join(here, d, 'package.json')))
    .map((d) => {
      const pkg = JSON.parse(fs.readFileSync(path.join(here, d, 'package.json'), 'utf8'));
      return { dir: path.join(here, d), name: pkg.name, os: pkg.os[0], cpu: pkg.cpu[0] };
    });
}

// pack runs npm pack in dir and moves the tarball into out with a rename: goreleaser runs the
// post-build hooks of its targets at once, and each packs the same main package.
function pack(dir, out) {
  const tmp = fs.mkdtempSync(path.join(out, '.pack-'));
  try {
    const file = execFileSync('npm', ['pack', '--silent', '--pack-destination', tmp], { cwd: dir, encoding: 'utf8' }).trim().split('\n').pop();
    fs.renameSync(path.join(tmp, file), path.join(out, file));
    return path.join(out, file);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

function stage(files, from, pkg) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cfp-npm-'));
  for (const f of files) fs.cpSync(path.join(from, f), path.join(dir, f), { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
  return dir;
}

export function buildMain(version, out) {
  const pkg = JSON.parse(fs.readFileSync(path.join(clientDir, 'package.json'), 'utf8'));
  pkg.version = version;
  pkg.optionalDependencies = Object.fromEntries(platforms().map((p) => [p.name, version]));
  delete pkg.devDependencies;
  delete pkg.scripts;
  const dir = stage(pkg.files, clientDir, pkg);
  try {
    return pack(dir, out);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function buildPlatform(version, goos, goarch, binary, out) {
  const want = { os: nodeOS[goos], cpu: nodeArch[goarch] };
  const p = platforms().find((x) => x.os === want.os && x.cpu === want.cpu);
  if (!p) throw new Error(`no package skeleton for ${goos}/${goarch} (${want.os}-${want.cpu}) in ${here}`);
  const pkg = JSON.parse(fs.readFileSync(path.join(p.dir, 'package.json'), 'utf8'));
  pkg.version = version;
  const exe = goos === 'windows' ? 'cfp.exe' : 'cfp';
  const dir = stage([], p.dir, pkg);
  try {
    fs.mkdirSync(path.join(dir, 'bin'));
    fs.copyFileSync(binary, path.join(dir, 'bin', exe));
    fs.chmodSync(path.join(dir, 'bin', exe), 0o755);
    return pack(dir, out);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const a = args(process.argv.slice(2));
  if (!a.version || !a.out) usage('--version and --out are required');
  const version = a.version.replace(/^v/, '');
  const out = path.resolve(a.out);
  fs.mkdirSync(out, { recursive: true });
  const made = [buildMain(version, out)];
  if (a.binary) {
    if (!a.os || !a.arch) usage('--binary needs --os and --arch');
    made.push(buildPlatform(version, a.os, a.arch, path.resolve(a.binary), out));
  }
  for (const f of made) process.stdout.write(`${path.relative(process.cwd(), f)}\n`);
}
