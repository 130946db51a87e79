#!/usr/bin/env node
// The TypeScript client check (tox -e ts):
//   1. openapi-typescript generates generated/schema.d.ts from spec/openapi.yaml: any warning fails;
//   2. tsc --strict (tsconfig.json) compiles use_client.ts against it: any type error fails;
//   3. ../serve.py serves the app (fresh SQLite, response validation on, one tenant);
//   4. build/use_client.js drives every operation through openapi-fetch and checks each answer.
// Usage: node run.mjs [--python PATH]. Exits non-zero when a step or a check fails.
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const PYTHON = args.includes('--python') ? args[args.indexOf('--python') + 1] : process.env.PYTHON || 'python3';
const BIN = path.join(HERE, 'node_modules', '.bin');

function step(label, command, commandArgs, { quietLines = [] } = {}) {
  console.log(`$ ${label}`);
  const done = spawnSync(command, commandArgs, { cwd: HERE, encoding: 'utf8' });
  const lines = `${done.stdout}${done.stderr}`.split('\n').filter((line) => line.trim());
  const unexpected = lines.filter((line) => !quietLines.some((pattern) => pattern.test(line)));
  for (const line of lines) console.log(`  ${line}`);
  if (done.status !== 0 || unexpected.length) {
    console.error(`${label}: exit ${done.status}, ${unexpected.length} unexpected line(s) (warnings or errors): failing`);
    process.exit(1);
  }
  console.log(`${label}: 0 warnings, 0 errors`);
}

/** Start serve.py and wait for its JSON line. */
function serveApi() {
  const child = spawn(PYTHON, [path.join(HERE, '..', 'serve.py')], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => resolve({ child, info: JSON.parse(line) }));
    child.once('exit', (code) => reject(new Error(`serve.py exited with ${code} before answering`)));
  });
}

step('openapi-typescript', path.join(BIN, 'openapi-typescript'), ['../../spec/openapi.yaml', '-o', 'generated/schema.d.ts'], {
  quietLines: [/^✨ openapi-typescript \d/, /^🚀 .*generated\/schema\.d\.ts/],
});
step('tsc --strict', path.join(BIN, 'tsc'), ['-p', 'tsconfig.json']);

const { child, info } = await serveApi();
try {
  const use = spawnSync('node', [path.join(HERE, 'build', 'use_client.js'), info.base, info.token, info.risk, info.other_risk], {
    stdio: 'inherit',
  });
  process.exitCode = use.status === 0 ? 0 : 1;
} finally {
  child.stdin.end(); // serve.py stops when its stdin closes
  child.kill('SIGTERM');
}
