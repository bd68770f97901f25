#!/usr/bin/env node
// Interop test of `sp mcp` with the official TypeScript SDK v2 client
// (@modelcontextprotocol/client) and the Inspector CLI (@modelcontextprotocol/inspector),
// both pinned in tests/interop/package.json (issue #10).
//
//     node tests/interop/ts_client.mjs target/release/sp
//
// For each version-negotiation mode of the TS client (legacy handshake, pinned to the
// stateless 2026-07-28 revision, auto) it lists the tools, calls sp_inventory, and sends
// a call the policy denies to a loopback port nothing listens on (SP_DENIED proves the
// call reached authorization and went no further). Then the Inspector CLI lists the tools
// and calls sp_inventory in its legacy and modern protocol eras. One line per check, then
// `N passed, M failed`; exit 1 on any failure. Every wait is bounded.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const TOOLS = ['http_request', 'http_get', 'ssh_exec', 'sp_inventory'];
const STATELESS = '2026-07-28';
const here = dirname(fileURLToPath(import.meta.url));
const sp = resolve(process.argv[2] ?? 'target/release/sp');
let passed = 0;
let failed = 0;
function check(name, ok, detail) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'}  ${name}${ok ? '' : `: ${detail}`}`);
}
const watchdog = setTimeout(() => {
  console.log('FAIL  watchdog: the interop test did not finish within 120 s');
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
}, 120_000);

const dir = mkdtempSync(join(tmpdir(), 'sp-ts-interop-'));
const policy = join(dir, 'policy.json');
// Port 9 (discard) on loopback: allowed for GET only, so a DELETE is denied before any
// connection is attempted.
// An SSH host (never reached: no call uses it), so that ssh_exec is listed too: sp lists
// only the tools a policy makes possible.
writeFileSync(policy, JSON.stringify({
  http: { allow: [{ hosts: ['127.0.0.1:9'], methods: ['GET'], paths: ['/*'] }] },
  ssh: { known_hosts: join(dir, 'known_hosts'), hosts: { web1: { address: '127.0.0.1', user: 'nobody', auth: { agent: true } } } },
}), { mode: 0o600 });

const code = (r) => r?.structuredContent?.error?.code;
for (const [label, mode, era] of [
  ['legacy', 'legacy', 'legacy'],
  [`pin ${STATELESS}`, { pin: STATELESS }, 'modern'],
  ['auto', 'auto', 'modern'],
]) {
  const client = new Client({ name: 'sp-interop', version: '1.0.0' }, { versionNegotiation: { mode } });
  try {
    await client.connect(new StdioClientTransport({ command: sp, args: ['mcp', '--config', policy], stderr: 'pipe' }));
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    const inv = await client.callTool({ name: 'sp_inventory', arguments: {} });
    const denied = await client.callTool({ name: 'http_request', arguments: { method: 'DELETE', url: 'http://127.0.0.1:9/x' } });
    check(
      `TS client (${label}): era ${era}, tools listed, sp_inventory ok, a denied call is SP_DENIED`,
      client.getProtocolEra() === era && JSON.stringify(names) === JSON.stringify([...TOOLS].sort())
        && inv.isError === false && denied.isError === true && code(denied) === 'SP_DENIED',
      `era ${client.getProtocolEra()}, tools ${names}, inventory ${JSON.stringify(inv).slice(0, 200)}, denied ${JSON.stringify(denied).slice(0, 200)}`,
    );
  } catch (e) {
    check(`TS client (${label}): session ran`, false, String(e?.stack ?? e));
  } finally {
    await client.close().catch(() => {});
  }
}

// An upstream MCP server behind sp (the stdlib fixture misbehave.py, `ok` mode: it
// answers with the arguments it got): listed as `up_act` beside sp's tools with
// listChanged declared, called through sp with its answer as the upstream shaped it,
// and a pinned argument with another value SP_DENIED.
const upstreamPolicy = join(dir, 'policy-upstream.json');
const python = ['/usr/bin/python3', '/usr/local/bin/python3'].find((p) => existsSync(p)) ?? 'python3';
writeFileSync(upstreamPolicy, JSON.stringify({
  upstreams: { up: {
    command: [python, resolve(here, '..', 'support', 'upstreams', 'misbehave.py'), 'ok'],
    // It starts confined (issue 31): the fixture's directory is granted, read-only.
    sandbox: { read: [resolve(here, '..', 'support', 'upstreams')] },
    tools: { allow: ['*'] },
    arguments: { act: { x: ['ok-*'] } },
  } },
}), { mode: 0o600 });
// This policy allows no HTTP read, so http_get is not listed.
for (const [label, mode] of [['legacy', 'legacy'], [`pin ${STATELESS}`, { pin: STATELESS }]]) {
  const client = new Client({ name: 'sp-interop', version: '1.0.0' }, { versionNegotiation: { mode } });
  try {
    await client.connect(new StdioClientTransport({ command: sp, args: ['mcp', '--config', upstreamPolicy], stderr: 'pipe' }));
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    const ok = await client.callTool({ name: 'up_act', arguments: { x: 'ok-1' } });
    const denied = await client.callTool({ name: 'up_act', arguments: { x: 'other' } });
    const listChanged = mode === 'legacy' ? client.getServerCapabilities()?.tools?.listChanged === true : true;
    check(
      `TS client (${label}) with an upstream: up_act listed, called through sp, a pin denies`,
      listChanged && JSON.stringify(names) === JSON.stringify(['sp_inventory', 'up_act'])
        && ok.isError === false && ok.content?.[0]?.text === '{"arguments": {"x": "ok-1"}, "tool": "act"}'
        && denied.isError === true && code(denied) === 'SP_DENIED',
      `tools ${names}, capabilities ${JSON.stringify(client.getServerCapabilities())}, ok ${JSON.stringify(ok).slice(0, 200)}, denied ${JSON.stringify(denied).slice(0, 200)}`,
    );
  } catch (e) {
    check(`TS client (${label}) with an upstream: session ran`, false, String(e?.stack ?? e));
  } finally {
    await client.close().catch(() => {});
  }
}

function inspector(args) {
  const bin = join(here, 'node_modules', '.bin', 'mcp-inspector');
  return new Promise((done) => {
    execFile(bin, ['--cli', ...args, '-e', `SP_CONFIG=${policy}`, sp, 'mcp'], { timeout: 60_000 }, (err, stdout, stderr) => {
      done({ err, stdout, stderr });
    });
  });
}
for (const era of ['legacy', 'modern']) {
  const list = await inspector(['--protocol-era', era, '--method', 'tools/list']);
  let names = [];
  try { names = JSON.parse(list.stdout).tools.map((t) => t.name).sort(); } catch { /* reported below */ }
  check(`Inspector CLI (--protocol-era ${era}): tools/list`, !list.err && JSON.stringify(names) === JSON.stringify([...TOOLS].sort()),
    `${list.err ?? ''} stdout ${list.stdout.slice(0, 300)} stderr ${list.stderr.slice(0, 300)}`);
  const call = await inspector(['--protocol-era', era, '--method', 'tools/call', '--tool-name', 'sp_inventory']);
  let result = {};
  try { result = JSON.parse(call.stdout); } catch { /* reported below */ }
  check(`Inspector CLI (--protocol-era ${era}): tools/call sp_inventory`, !call.err && result.isError === false && typeof result.structuredContent === 'object',
    `${call.err ?? ''} stdout ${call.stdout.slice(0, 300)} stderr ${call.stderr.slice(0, 300)}`);
}

rmSync(dir, { recursive: true, force: true });
clearTimeout(watchdog);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
