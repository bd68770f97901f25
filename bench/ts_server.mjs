#!/usr/bin/env node
// The minimal MCP server `make bench` (examples/bench_compare.rs) compares sp with: the
// official TypeScript SDK server package (@modelcontextprotocol/server, pinned in
// tests/interop/package.json, installed by `make interop`), stdio, one tool.
//
//     node bench/ts_server.mjs
//
// The packages live in tests/interop/node_modules, which ESM resolution from bench/ does
// not search, so they are loaded with a require rooted there.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '..', 'tests', 'interop', 'package.json'));
const { McpServer } = require('@modelcontextprotocol/server');
const { StdioServerTransport } = require('@modelcontextprotocol/server/stdio');
const { z } = require('zod');

const server = new McpServer({ name: 'bench-ts', version: '1.0.0' });
server.registerTool(
  'echo',
  { description: 'Echo the text back', inputSchema: z.object({ text: z.string() }) },
  async ({ text }) => ({ content: [{ type: 'text', text }] }),
);
await server.connect(new StdioServerTransport());
