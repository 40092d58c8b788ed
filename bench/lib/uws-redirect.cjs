/**
 * A CommonJS preload (`node --require bench/lib/uws-redirect.cjs …`) that makes
 * `require('uWebSockets.js')` load the package directory named by UWS_BUILD_DIR instead of the
 * installed one, so a build can be measured (bench/uws-builds.ts, bench/sidecar.ts `--uws-peer`)
 * without touching package.json, node_modules or product code. Without UWS_BUILD_DIR it does
 * nothing.
 */
'use strict';
/* global require */
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload: require is the point */
const Module = require('node:module');

const dir = process.env.UWS_BUILD_DIR;
if (dir) {
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    return resolve.call(this, request === 'uWebSockets.js' ? dir : request, ...rest);
  };
}
