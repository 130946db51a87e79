#!/usr/bin/env node
// riskapi with the official Precognition client, for real:
//   1. serve.py serves the app (fresh SQLite, one tenant, CORS for this page's origin);
//   2. checks.mjs runs in Node 20 with the client's default fetch transport;
//   3. the same checks, bundled by esbuild, run in headless Chromium from a page on another
//      origin (http://localhost:PAGE -> http://127.0.0.1:API), driven by playwright-core;
//   4. the page from an origin that is not allowed (http://127.0.0.1:PAGE) must be refused.
// Usage: node run.mjs [--python PATH]   (CHROMIUM=/path/to/chromium to use another browser)
// Exits non-zero when any check fails.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';

import { runChecks } from './checks.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const PYTHON = args.includes('--python') ? args[args.indexOf('--python') + 1] : process.env.PYTHON || 'python3';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const CHROMIUM_FLAGS = [
  '--no-sandbox', // running as root (CI)
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking', // no calls home: this machine's network is closed
  '--disable-component-update',
  '--disable-sync',
];

const tally = { passed: 0, failed: 0 };

function report(part, result) {
  tally[result.ok ? 'passed' : 'failed'] += 1;
  console.log(`[${part}] ${result.ok ? 'ok' : 'FAILED'} - ${result.name}\n         ${result.detail}`);
}

/** The page server: page.html, the bundle, and the API's coordinates, on 127.0.0.1. */
function servePage(files) {
  const server = http.createServer((request, response) => {
    const file = files[new URL(request.url, 'http://page').pathname];
    if (!file) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'Content-Type': file.type, 'Cache-Control': 'no-store' }).end(file.body);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Start serve.py and wait for its JSON line. */
function serveApi(origin) {
  const child = spawn(PYTHON, [path.join(HERE, 'serve.py'), '--cors-origin', origin], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('serve.py printed nothing within 60 s')), 60000);
    child.on('exit', (code) => reject(new Error(`serve.py exited with ${code}`)));
    child.on('error', reject);
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        const info = JSON.parse(line);
        clearTimeout(timer);
        resolve({ child, info });
      } catch {
        console.log(`[serve.py] ${line}`);
      }
    });
  });
}

async function browserPart(pageUrl, label, expectCount) {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
  try {
    const page = await browser.newPage();
    const consoleLines = [];
    page.on('console', (message) => consoleLines.push(`${message.type()}: ${message.text()}`));
    page.on('pageerror', (error) => consoleLines.push(`pageerror: ${error.message}`));
    await page.goto(pageUrl);
    await page.waitForSelector('body[data-state="done"]', { timeout: 120000 });
    const { context, results } = JSON.parse(await page.textContent('#results'));
    if (context) {
      console.log(`[${label}] ${browser.version()} page ${context.origin} -> API ${context.api}`);
    }
    results.forEach((result) => report(label, result));
    if (results.length !== expectCount) {
      report(label, { name: `the page ran ${expectCount} checks`, ok: false, detail: `it ran ${results.length}` });
    }
    for (const line of consoleLines) console.log(`[${label}] console ${line}`);
  } finally {
    await browser.close();
  }
}

async function main() {
  const built = await esbuild.build({
    entryPoints: [path.join(HERE, 'page.mjs')],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: ['chrome120'],
    logLevel: 'warning',
  });
  const files = {
    '/': { type: 'text/html; charset=utf-8', body: readFileSync(path.join(HERE, 'page.html')) },
    '/bundle.js': { type: 'text/javascript; charset=utf-8', body: built.outputFiles[0].contents },
  };
  const pageServer = await servePage(files);
  const port = pageServer.address().port;
  const origin = `http://localhost:${port}`;
  let api;
  try {
    api = await serveApi(origin);
    const { info } = api;
    files['/info.json'] = { type: 'application/json', body: JSON.stringify(info) };
    console.log(`[setup] API ${info.base} (CORS origins ${JSON.stringify(info.cors_origins)}), page ${origin}`);
    console.log(`[setup] laravel-precognition ${pkg('laravel-precognition')}, esbuild ${pkg('esbuild')}, playwright-core ${pkg('playwright-core')}, node ${process.version}`);

    const nodeResults = await runChecks(info);
    nodeResults.forEach((result) => report('node', result));

    if (!existsSync(CHROMIUM)) {
      report('chromium', {
        name: 'a Chromium to drive',
        ok: false,
        detail: `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) or set CHROMIUM`,
      });
    } else {
      await browserPart(`${origin}/`, 'chromium', nodeResults.length);
      await browserPart(`http://127.0.0.1:${port}/?mode=blocked`, 'chromium, other origin', 1);
    }
  } finally {
    if (api) api.child.kill('SIGTERM');
    pageServer.close();
  }
}

function pkg(name) {
  return JSON.parse(readFileSync(path.join(HERE, 'node_modules', name, 'package.json'))).version;
}

// The client rejects some promises nobody awaits (createValidator's debounced requests): count them.
process.on('unhandledRejection', (error) => {
  report('node', { name: 'no unhandled rejection', ok: false, detail: error?.stack || String(error) });
});

const watchdog = setTimeout(() => {
  console.error('clients: gave up after 10 minutes');
  process.exit(1);
}, 600000);
watchdog.unref();

try {
  await main();
} catch (error) {
  report('setup', { name: 'the checks ran', ok: false, detail: error?.stack || String(error) });
}
console.log(`clients: ${tally.passed} passed, ${tally.failed} failed`);
process.exitCode = tally.failed || !tally.passed ? 1 : 0;
