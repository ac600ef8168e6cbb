// The release's npm packages (clients/node/npm/build.mjs, run by goreleaser after each build):
// installed from their tarballs, the main package finds the binary of its platform package.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { cfpBinary, tempDir } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const goos = { linux: 'linux', darwin: 'darwin', win32: 'windows' }[process.platform];
const goarch = { x64: 'amd64', arm64: 'arm64' }[process.arch];

test('the platform package installs beside the main package, and findCfp() takes its binary', { skip: !goos || !goarch }, async () => {
  const cfp = await cfpBinary();
  const out = tempDir('cfp-npm-out-');
  const version = '0.0.0-test.1';
  const made = execFileSync(process.execPath, [path.join(here, '..', 'npm', 'build.mjs'), '--version', version,
    '--os', goos, '--arch', goarch, '--binary', cfp, '--out', out], { encoding: 'utf8' }).trim().split('\n');
  assert.equal(made.length, 2);
  const main = path.join(out, `cfp-dev-changefeed-${version}.tgz`);
  const platform = path.join(out, `cfp-dev-cli-${process.platform}-${process.arch}-${version}.tgz`);
  assert.ok(fs.existsSync(main) && fs.existsSync(platform), `made ${made}`);

  const app = tempDir('cfp-npm-app-');
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  // The other platforms' packages are optional and not published: npm skips them.
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--silent', platform, main], { cwd: app });
  const manifest = JSON.parse(fs.readFileSync(path.join(app, 'node_modules/@cfp-dev/changefeed/package.json'), 'utf8'));
  assert.equal(manifest.optionalDependencies[`@cfp-dev/cli-${process.platform}-${process.arch}`], version);
  assert.equal(manifest.devDependencies, undefined);

  const env = { ...process.env, PATH: '/nonexistent', CFP_PATH: '' };
  const script = "const m = require('@cfp-dev/changefeed'); process.stdout.write(m.findCfp())";
  const found = execFileSync(process.execPath, ['-e', script], { cwd: app, env, encoding: 'utf8' });
  assert.equal(found, path.join(app, 'node_modules', '@cfp-dev', `cli-${process.platform}-${process.arch}`, 'bin', process.platform === 'win32' ? 'cfp.exe' : 'cfp'));
  assert.match(execFileSync(found, ['version'], { encoding: 'utf8' }), /cfp/);
  // ESM finds the same binary; the option and CFP_PATH come first.
  const esm = execFileSync(process.execPath, ['--input-type=module', '-e',
    "import { findCfp } from '@cfp-dev/changefeed'; process.stdout.write(findCfp())"], { cwd: app, env, encoding: 'utf8' });
  assert.equal(esm, found);
  const byOption = execFileSync(process.execPath, ['-e', `process.stdout.write(require('@cfp-dev/changefeed').findCfp(${JSON.stringify(cfp)}))`], { cwd: app, env, encoding: 'utf8' });
  assert.equal(byOption, cfp);
});

test('without a platform package, cfp comes from PATH, or the error says where it looked', async () => {
  const { findCfp, BinaryNotFoundError } = await import('../index.mjs');
  const cfp = await cfpBinary();
  assert.equal(findCfp(undefined, { PATH: path.dirname(cfp) }), path.join(path.dirname(cfp), 'cfp'));
  assert.throws(() => findCfp(undefined, { PATH: '/nonexistent' }), (err) => err instanceof BinaryNotFoundError
    && /@cfp-dev\/cli-/.test(err.message) && /PATH/.test(err.message));
  assert.throws(() => findCfp('/nonexistent/cfp', {}), BinaryNotFoundError);
});
