// Checks of riskapi's Precognition dry-runs with the official client (laravel-precognition, default
// fetch transport). The same module runs in Node (run.mjs) and, bundled by esbuild, in Chromium
// (page.mjs), where every request is cross-origin and goes through CORS.
import { client, createValidator } from 'laravel-precognition';

const driver = (data) => ({ data: [{ object: 'driver', data }] });

class CheckFailed extends Error {}

function expect(condition, message) {
  if (!condition) throw new CheckFailed(message);
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const show = (response) => ({
  status: response?.status,
  precognition: response?.headers?.precognition,
  'precognition-success': response?.headers?.['precognition-success'],
  'content-type': response?.headers?.['content-type'] ?? null,
});

/** Resolve on the validator's next change of `event` for which `until()` holds, or fail after `ms`. */
function waitFor(validator, event, until, ms = 15000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new CheckFailed(`no ${event} within ${ms} ms`)), ms);
    validator.on(event, () => {
      if (until()) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/**
 * Run every check against a served app; `info` is serve.py's JSON ({base, token, risk, other_risk}).
 * Returns [{name, ok, detail}]; never throws.
 */
export async function runChecks(info, log = () => {}) {
  client.withBaseURL(info.base);
  const auth = { Authorization: `Bearer ${info.token}` };
  const drivers = `/risks/${info.risk}/data/drivers`;
  const results = [];

  async function check(name, body) {
    try {
      const detail = await body();
      results.push({ name, ok: true, detail });
    } catch (error) {
      const detail = error instanceof CheckFailed ? error.message : `${error?.name}: ${error?.message}`;
      results.push({ name, ok: false, detail });
    }
    log(results[results.length - 1]);
  }

  await check('a valid dry-run reaches onPrecognitionSuccess (204, no Content-Type, nothing written)', async () => {
    const calls = [];
    let seen;
    await client.post(drivers, driver({ first_name: 'Ada', sex: 'female' }), {
      headers: auth,
      onPrecognitionSuccess: (response) => {
        calls.push('onPrecognitionSuccess');
        seen = response;
      },
      onValidationError: (response) => {
        calls.push('onValidationError');
        seen = response;
      },
    });
    expect(same(calls, ['onPrecognitionSuccess']), `callbacks ${JSON.stringify(calls)}: ${JSON.stringify(show(seen))}`);
    expect(seen.status === 204 && seen.headers['precognition-success'] === 'true', `saw ${JSON.stringify(show(seen))}`);
    expect(!('content-type' in seen.headers) && seen.data === '', `a 204 with a body or Content-Type: ${JSON.stringify(show(seen))}`);
    const listed = await fetch(`${info.base}${drivers}`, { headers: { ...auth, Accept: 'application/json' } });
    const page = await listed.json().catch(() => null);
    expect(listed.status === 200 && page?.data, `GET drivers after the dry-run: ${listed.status} ${JSON.stringify(page)}`);
    const count = page.data.length;
    expect(count === 0, `the dry-run wrote: ${count} drivers afterwards`);
    return `callbacks ${JSON.stringify(calls)}, response ${JSON.stringify(show(seen))}, drivers afterwards: ${count}`;
  });

  await check('an invalid dry-run limited with `validate` surfaces exactly those fields (onValidationError)', async () => {
    const body = driver({ number: 'x', sex: 'bogus', date_of_birth: 'nope' });
    let all;
    await client.post(drivers, body, {
      headers: auth,
      onValidationError: (response) => {
        all = Object.keys(response.data.errors).sort();
      },
    });
    const only = ['data.0.data.sex', 'data.0.data.date_of_birth'];
    const calls = [];
    let seen;
    await client.post(drivers, body, {
      headers: auth,
      validate: only,
      onPrecognitionSuccess: () => calls.push('onPrecognitionSuccess'),
      onValidationError: (response) => {
        calls.push('onValidationError');
        seen = response;
      },
    });
    expect(same(calls, ['onValidationError']), `callbacks ${JSON.stringify(calls)}`);
    const keys = Object.keys(seen.data.errors).sort();
    expect(same(keys, [...only].sort()), `errors for ${JSON.stringify(keys)}, expected ${JSON.stringify(only)}`);
    expect(seen.status === 422 && seen.headers['precognition-success'] === 'false', `saw ${JSON.stringify(show(seen))}`);
    expect(all && all.length === 3, `without validate: ${JSON.stringify(all)}`);
    return `without validate: ${JSON.stringify(all)}; validate ${JSON.stringify(only)} -> ${seen.status} ${JSON.stringify(seen.data.errors)}`;
  });

  await check('`validate` naming only valid fields passes although others are invalid (onPrecognitionSuccess)', async () => {
    const calls = [];
    let seen;
    await client.post(drivers, driver({ number: 'x', first_name: 'Ada' }), {
      headers: auth,
      validate: ['data.0.data.first_name'],
      onPrecognitionSuccess: (response) => {
        calls.push('onPrecognitionSuccess');
        seen = response;
      },
      onValidationError: (response) => {
        calls.push('onValidationError');
        seen = response;
      },
    });
    expect(same(calls, ['onPrecognitionSuccess']), `callbacks ${JSON.stringify(calls)}: ${JSON.stringify(seen?.data)}`);
    expect(!('content-type' in seen.headers), `204 with Content-Type ${seen.headers['content-type']}`);
    return `callbacks ${JSON.stringify(calls)}, response ${JSON.stringify(show(seen))}`;
  });

  await check('createValidator clears an error once its field is fixed (hasErrors() false after)', async () => {
    let form = driver({ first_name: 'Ada', sex: 'bogus' });
    const validator = createValidator((precognitive) => precognitive.post(drivers, form, { headers: auth }));
    const field = 'data.0.data.sex';

    const failed = waitFor(validator, 'errorsChanged', () => validator.hasErrors());
    validator.validate(field, 'bogus');
    await failed;
    const before = validator.errors();
    expect(same(Object.keys(before), [field]), `errors after the first validation: ${JSON.stringify(before)}`);

    // A new object, as a reactive form would hold: the validator compares with the data it last sent.
    form = structuredClone(form);
    form.data[0].data.sex = 'female';
    const cleared = waitFor(validator, 'errorsChanged', () => !validator.hasErrors());
    validator.validate(field, 'female');
    await cleared;
    expect(!validator.hasErrors(), `errors after the fix: ${JSON.stringify(validator.errors())}`);
    expect(validator.valid().includes(field), `valid() is ${JSON.stringify(validator.valid())}`);
    return `sex=bogus -> hasErrors() true, errors ${JSON.stringify(before)}; sex=female -> hasErrors() ${validator.hasErrors()}, valid() ${JSON.stringify(validator.valid())}, touched() ${JSON.stringify(validator.touched())}`;
  });

  await check('a bad token reaches onUnauthorized, another agency\'s risk onNotFound', async () => {
    const calls = [];
    await client.post(drivers, driver({ first_name: 'Ada' }), {
      headers: { Authorization: 'Bearer rk_not-a-token' },
      onUnauthorized: (response) => calls.push(`onUnauthorized ${response.status}`),
    });
    await client.post(`/risks/${info.other_risk}/data/drivers`, driver({ first_name: 'Ada' }), {
      headers: auth,
      onNotFound: (response) => calls.push(`onNotFound ${response.status}`),
    });
    expect(same(calls, ['onUnauthorized 401', 'onNotFound 404']), `callbacks ${JSON.stringify(calls)}`);
    return `callbacks ${JSON.stringify(calls)}`;
  });

  return results;
}

/**
 * From an origin that is not allowed, the browser must refuse to hand the response to the client:
 * the client sees a network error, never a response.
 */
export async function runBlocked(info) {
  client.withBaseURL(info.base);
  const calls = [];
  try {
    await client.post(`/risks/${info.risk}/data/drivers`, driver({ first_name: 'Ada' }), {
      headers: { Authorization: `Bearer ${info.token}` },
      onPrecognitionSuccess: () => calls.push('onPrecognitionSuccess'),
      onValidationError: () => calls.push('onValidationError'),
    });
  } catch (error) {
    const ok = error?.name === 'HttpNetworkError' && calls.length === 0;
    return [{ name: 'an origin not in RISKAPI_CORS_ORIGINS is refused by the browser', ok, detail: `${error?.name}: ${error?.message}; callbacks ${JSON.stringify(calls)}` }];
  }
  return [{ name: 'an origin not in RISKAPI_CORS_ORIGINS is refused by the browser', ok: false, detail: `the request went through; callbacks ${JSON.stringify(calls)}` }];
}
