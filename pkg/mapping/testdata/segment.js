// Segment's mapping-kit as a line server, for evfwd's differential test.
// Each stdin line is {"id", "mapping": JSON text, "payload": JSON text};
// each stdout line answers it: {"id", "out": JSON text} when transform
// returned a value, {"id", "undef": true} when it returned undefined, or
// {"id", "error", "validation"} when it threw (validation: the mapping was
// refused before anything was resolved).
'use strict';
const path = require('path');
const readline = require('readline');

const root = process.argv[2];

// actions-core 3.170.0 requires liquidjs without declaring it, so npm does
// not install it. evfwd refuses @liquid and never sends one; a stand-in
// lets mapping-kit load (a @liquid that reached it would throw).
const Module = require('module');
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === 'liquidjs') {
    return {
      Liquid: class {
        registerTag() {}
        registerFilter() {}
        parseAndRenderSync() { throw new Error('liquidjs is not installed'); }
        fullVariablesSync() { return []; }
      }
    };
  }
  return load.call(this, request, ...rest);
};
const kitDir = path.join(root, 'node_modules/@segment/actions-core/dist/cjs/mapping-kit');
const kit = require(path.join(kitDir, 'index.js'));

// A mapping is refused (invalid) when transform throws before its first
// validate call returns: the root directive's checks or validate itself.
// A validate that fails later is @transform's, at resolve time: an error of
// that pair, not an invalid mapping.
const validateModule = require(path.join(kitDir, 'validate.js'));
const validate = validateModule.default;
let validated = false;
validateModule.default = function (...args) {
  const r = validate.apply(this, args);
  validated = true;
  return r;
};
Error.stackTraceLimit = 0; // thousands of errors: their stacks are not read


const out = [];
function flush() {
  if (out.length) {
    process.stdout.write(out.join(''));
    out.length = 0;
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  const req = JSON.parse(line);
  let res;
  try {
    validated = false;
    const mapping = JSON.parse(req.mapping);
    const payload = JSON.parse(req.payload);
    const v = kit.transform(mapping, payload);
    res = v === undefined ? { id: req.id, undef: true } : { id: req.id, out: JSON.stringify(v) };
    if (res.out === undefined && !res.undef) res = { id: req.id, undef: true };
  } catch (e) {
    res = { id: req.id, error: String(e && e.message).trim().split('\n')[0], validation: !validated };
  }
  out.push(JSON.stringify(res) + '\n');
  if (out.length >= 256) flush();
});
rl.on('pause', flush);
// Answer what was read so far whenever input stalls.
setInterval(flush, 5).unref();
rl.on('close', flush);
