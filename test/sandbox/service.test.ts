/** The sandbox as a service (what main.ts runs): ports from the environment, SANDBOX_FAULTS checked. */
import t from 'tap';
import { getGlobalDispatcher } from 'undici';
import { loadConfig } from '../../shared/config.js';
import { sandboxConfig } from '../../sandbox/config.js';
import { startSandboxService } from '../../sandbox/app.js';
import { testLogger } from '../harness/log.js';
import { freePortPair } from '../harness/ports.js';

// fetch keeps idle connections open for seconds; close them when the file is done.
t.teardown(() => getGlobalDispatcher().close());

t.test('SMTP listens on SANDBOX_PORT + 1 unless SANDBOX_SMTP_PORT says otherwise; credentials are required', async (t) => {
  // Both ports are only free when checked: a start that loses either to another process picks
  // another pair (ports.ts).
  let port = 0;
  let svc: Awaited<ReturnType<typeof startSandboxService>> | undefined;
  for (let attempt = 1; svc === undefined; attempt++) {
    port = await freePortPair();
    try {
      svc = await startSandboxService(
        loadConfig(sandboxConfig, { SANDBOX_PORT: String(port), LOG_LEVEL: 'silent' }),
        testLogger('sandbox'),
      );
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 5) throw err;
    }
  }
  t.teardown(() => svc.close());
  t.equal(svc.port, port);
  t.same(svc.urls, { 'FCM and SMS (FCM_URL, SMS_URL)': `http://127.0.0.1:${port}`, 'SMTP (SMTP_URL)': `smtp://127.0.0.1:${port + 1}` });
  const r = await fetch(`http://127.0.0.1:${port}/v1/projects/p/messages:send`, {
    method: 'POST',
    headers: { authorization: 'Bearer guess' },
    body: JSON.stringify({ message: { token: 't' } }),
  });
  t.equal(r.status, 401, 'the default FCM_ACCESS_TOKEN is required');
});

t.test('SANDBOX_FAULTS are applied at start; a bad one stops it naming the variable and the field', async (t) => {
  const env = { SANDBOX_PORT: '0', SANDBOX_SMTP_PORT: '0', LOG_LEVEL: 'silent', SANDBOX_FAULTS: '[{"channel":"push","error_rate":1}]' };
  const svc = await startSandboxService(loadConfig(sandboxConfig, env), testLogger('sandbox'));
  t.teardown(() => svc.close());
  const faults = (await (await fetch(`http://127.0.0.1:${svc.port}/sandbox/faults`)).json()) as { faults: unknown[] };
  t.match(faults, { faults: [{ channel: 'push', error_rate: 1 }] });
  await t.rejects(
    startSandboxService(
      loadConfig(sandboxConfig, { ...env, SANDBOX_FAULTS: '[{"channel":"push","error_rate":5}]' }),
      testLogger('sandbox'),
    ),
    { name: 'ConfigError', message: 'config: SANDBOX_FAULTS item 1: error_rate: must be a number from 0 to 1' },
  );
  t.throws(() => loadConfig(sandboxConfig, { SANDBOX_FAULTS: '{"channel":"push"}' }), /config: SANDBOX_FAULTS must be a JSON array/);
});
