// Browser entry (bundled by esbuild in run.mjs): run the checks, then write them into the page.
import { runBlocked, runChecks } from './checks.mjs';

async function main() {
  const info = await (await fetch('/info.json')).json();
  const mode = new URLSearchParams(location.search).get('mode');
  const list = document.getElementById('list');
  const show = (result) => {
    const item = document.createElement('li');
    item.textContent = `${result.ok ? 'ok' : 'FAILED'} - ${result.name}: ${result.detail}`;
    list.append(item);
  };
  const results = mode === 'blocked' ? await runBlocked(info) : await runChecks(info, show);
  if (mode === 'blocked') results.forEach(show);
  const context = { origin: location.origin, api: new URL(info.base).origin, userAgent: navigator.userAgent };
  document.getElementById('results').textContent = JSON.stringify({ context, results });
}

main()
  .catch((error) => {
    document.getElementById('results').textContent = JSON.stringify({
      results: [{ name: 'the page ran', ok: false, detail: `${error?.name}: ${error?.message}` }],
    });
  })
  .finally(() => {
    document.body.dataset.state = 'done';
  });
