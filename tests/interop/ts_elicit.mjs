#!/usr/bin/env node
// Approval through MCP elicitation, and long approvals, with the official TypeScript
// SDK v2 client (@modelcontextprotocol/client, pinned in package.json).
//
//     node tests/interop/ts_elicit.mjs target/release/sp
//     SP_INTEROP_LONG=1 node tests/interop/ts_elicit.mjs target/release/sp   (+ the 90 s run)
//
// 1. A client that declares form elicitation and answers `elicitation/create`
//    (setRequestHandler): in the legacy handshake and pinned to 2026-07-28 (where the
//    SDK fulfils sp's `input_required` by itself), an approved call runs once, a
//    declined one is SP_NOT_APPROVED and sends nothing. The SDK validates each result
//    against the tool's outputSchema as it goes.
// 2. Progress while an approver thinks (sp sends notifications/progress at least every
//    5 s): with a 7 s request timeout, an 11 s approval fails without
//    `resetTimeoutOnProgress` (the SDK default) and succeeds with it.
// 3. SP_INTEROP_LONG=1: the issue's case in real time: a 60 s timeout reset on
//    progress waits through a 90 s approval.
// One line per check, then `N passed, M failed`; exit 1 on any failure.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const STATELESS = '2026-07-28';
const LONG = process.env.SP_INTEROP_LONG === '1';
const sp = resolve(process.argv[2] ?? 'target/release/sp');
let passed = 0;
let failed = 0;
function check(name, ok, detail) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'}  ${name}${ok ? '' : `: ${detail}`}`);
}
const limit = LONG ? 240_000 : 90_000;
const watchdog = setTimeout(() => {
  console.log(`FAIL  watchdog: not finished within ${limit / 1000} s`);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
}, limit);

const seen = [];
const api = createServer((req, res) => {
  seen.push(req.url);
  res.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
  res.end('{"ok":true}');
});
await new Promise((r) => api.listen(0, '127.0.0.1', r));
const host = `127.0.0.1:${api.address().port}`;
const base = `http://${host}`;

const dir = mkdtempSync(join(tmpdir(), 'sp-ts-elicit-'));
const token = join(dir, 'token');
writeFileSync(token, `sp-ts-elicit-${Math.random().toString(16).slice(2)}\n`, { mode: 0o600 });
function policy(name, approval) {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify({
    credentials: { interop: { source: { file: token }, inject: { bearer: {} }, hosts: [host], paths: ['/v1/*'], approve: true } },
    http: { allow: [{ hosts: [host], methods: ['GET'], paths: ['/v1/*'] }] },
    approval,
    audit: { path: join(dir, `${name}.audit.jsonl`) },
  }), { mode: 0o600 });
  return path;
}
const code = (r) => r?.structuredContent?.error?.code;
const connect = async (config, options) => {
  const client = new Client({ name: 'sp-interop-elicit', version: '1.0.0' }, options);
  await client.connect(new StdioClientTransport({ command: sp, args: ['mcp', '--config', config], stderr: 'pipe' }));
  return client;
};

// 1. Elicitation, both eras.
const elicit = policy('elicit', { via: ['elicitation'], timeout_s: 20 });
for (const [label, mode] of [['legacy', 'legacy'], [`pin ${STATELESS}`, { pin: STATELESS }]]) {
  let client;
  try {
    client = await connect(elicit, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode } });
    let answer = 'accept';
    const forms = [];
    client.setRequestHandler('elicitation/create', async (req) => {
      forms.push(req.params);
      return answer === 'accept' ? { action: 'accept', content: { approve: true } } : { action: answer };
    });
    let before = seen.length;
    const ok = await client.callTool({ name: 'http_request', arguments: { method: 'GET', url: `${base}/v1/ts-${forms.length}` } });
    check(`TS client (${label}): approved through elicitation, the call ran once`,
      ok.isError === false && seen.length === before + 1 && forms.length === 1 && /tool: http_request/.test(forms[0]?.message ?? ''),
      `${JSON.stringify(ok).slice(0, 300)} seen +${seen.length - before} forms ${forms.length}`);
    answer = 'decline';
    before = seen.length;
    const no = await client.callTool({ name: 'http_request', arguments: { method: 'GET', url: `${base}/v1/ts-no` } });
    check(`TS client (${label}): a decline is SP_NOT_APPROVED, nothing sent`,
      no.isError === true && code(no) === 'SP_NOT_APPROVED' && seen.length === before, JSON.stringify(no).slice(0, 300));
  } catch (e) {
    check(`TS client (${label}): session ran`, false, String(e?.stack ?? e));
  } finally {
    await client?.close().catch(() => {});
  }
}
const rows = readFileSync(join(dir, 'elicit.audit.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const channels = [...new Set(rows.filter((r) => r.kind === 'approval').map((r) => r.channel))];
check('the journal names the elicitation channel', JSON.stringify(channels) === '["elicitation"]', JSON.stringify(channels));

// 2 and 3. A slow approver command, progress every 5 s.
function approver(seconds) {
  const path = join(dir, `approver-${seconds}`);
  writeFileSync(path, `#!/bin/sh\ncat >/dev/null\nsleep ${seconds}\nexit 0\n`, { mode: 0o700 });
  return path;
}
async function slow(label, seconds, options, expectOk) {
  const config = policy(`slow-${seconds}`, { command: [approver(seconds)], timeout_s: seconds + 30 });
  let client;
  let notes = 0;
  const started = Date.now();
  try {
    client = await connect(config, {});
    let outcome;
    try {
      const r = await client.callTool({ name: 'http_request', arguments: { method: 'GET', url: `${base}/v1/slow` } },
        { ...options, onprogress: () => { notes++; } });
      outcome = r.isError === false ? 'ok' : `error ${code(r)}`;
    } catch (e) {
      outcome = `threw ${e?.code ?? ''} ${String(e?.message ?? e).slice(0, 120)}`;
    }
    const secs = Math.round((Date.now() - started) / 1000);
    check(`${label}: ${expectOk ? 'answered' : 'the client gave up'} (${secs} s, ${notes} progress notes)`,
      expectOk ? outcome === 'ok' && notes >= 2 : outcome.startsWith('threw'), `${outcome} after ${secs} s, ${notes} notes`);
  } finally {
    await client?.close().catch(() => {});
  }
}
await slow('11 s approval, 7 s timeout, no reset (the SDK default)', 11, { timeout: 7_000 }, false);
await slow('11 s approval, 7 s timeout reset on progress', 11, { timeout: 7_000, resetTimeoutOnProgress: true }, true);
if (LONG) {
  await slow('90 s approval, 60 s timeout reset on progress', 90, { timeout: 60_000, resetTimeoutOnProgress: true }, true);
} else {
  console.log('skip  the 90 s real-time run (SP_INTEROP_LONG=1)');
}

api.close();
rmSync(dir, { recursive: true, force: true });
clearTimeout(watchdog);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
