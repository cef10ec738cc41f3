// Segment's subscription engine behind a pipe, for pkg/fql's differential
// test: one request per line on stdin, one answer per line on stdout.
//
//   {"op":"messages","messages":["<json>", ...]}  -> {"ok":true}
//       the messages the next "decide" requests are decided against
//   {"op":"decide","fql":"..."}  -> {"parsed":bool,"error":"...","ast":{...},"results":[true|false|"throw"]}
//       parseFql(fql), then validate(ast, message) for each message
//   {"op":"generate","ast":{...}}  -> {"fql":"..."} or {"error":"..."}
//       generateFql(ast), the text Segment's UI writes for a tree
//   {"op":"prototypes"}  -> {"Object":[...],"Array":[...],...}
//
// Usage: node segment.cjs DIR, where DIR/node_modules holds
// @segment/destination-subscriptions (and its @segment/fql-ts).
'use strict'
const path = require('path')
const readline = require('readline')
const engine = require(path.join(process.argv[2], 'node_modules', '@segment', 'destination-subscriptions'))

let messages = []
let out = []
function flush() {
  if (out.length > 0) {
    process.stdout.write(out.join(''))
    out = []
  }
}

function answer(req) {
  switch (req.op) {
    case 'messages':
      messages = req.messages.map((m) => JSON.parse(m))
      return { ok: true }
    case 'decide': {
      const ast = engine.parseFql(req.fql)
      const results = messages.map((m) => {
        try {
          return engine.validate(ast, m)
        } catch (e) {
          return 'throw'
        }
      })
      return { parsed: !ast.error, error: ast.error ? String(ast.error.message) : '', ast: ast.error ? null : ast, results }
    }
    case 'generate':
      try {
        return { fql: engine.generateFql(req.ast) }
      } catch (e) {
        return { error: String(e && e.message) }
      }
    case 'prototypes': {
      const names = {}
      for (const C of [Object, Array, String, Number, Boolean]) {
        names[C.name] = Object.getOwnPropertyNames(C.prototype)
      }
      return names
    }
  }
  return { error: 'unknown op ' + req.op }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
rl.on('line', (line) => {
  out.push(JSON.stringify(answer(JSON.parse(line))) + '\n')
  if (out.length >= 256) flush()
})
rl.on('close', flush)
// Answers wait in out until 256 are ready or the input pauses.
setInterval(flush, 5).unref()
