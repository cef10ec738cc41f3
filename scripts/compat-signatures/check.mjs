// Cross-checks `evfwd sign` and `evfwd verify` against the webhook
// signature schemes' owners' own libraries, both ways, and checks the
// published test vectors. scripts/compat-signatures.sh copies this file and
// package.json (pinned versions) into a temp dir, installs there, and runs:
//
//   node check.mjs EVFWD VECTORS_JSON   every check; exit 1 when one fails
//   node check.mjs --generate           one vector per scheme made by the
//                                       owners' libraries (pasted into
//                                       pkg/signature/testdata/vectors.json)
import { spawnSync } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as octokit from '@octokit/webhooks-methods';
import octokit3 from '@octokit/webhooks-methods-3';
import '@shopify/shopify-api/adapters/node';
import { ApiVersion, LogSeverity, shopifyApi } from '@shopify/shopify-api';
import { getHmac as shopifyTestHmac } from '@shopify/shopify-api/test-helpers';
import bolt from '@slack/bolt';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { Webhook as SvixWebhook } from 'svix';

const here = dirname(fileURLToPath(import.meta.url));
const version = (name) => JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'), 'utf8')).version;
const v = {
  octokit: version('@octokit/webhooks-methods'),
  octokit3: version('@octokit/webhooks-methods-3'),
  shopify: version('@shopify/shopify-api'),
  bolt: version('@slack/bolt'),
  standard: version('standardwebhooks'),
  stripe: version('stripe'),
  svix: version('svix'),
};

// The reference: each scheme written out with node:crypto from its owner's
// documentation. Segment publishes no verifier library, so for segment this
// is the library; Slack's JS packages verify but do not sign, so Slack's
// signing side is this too. Every published vector is checked against it.
const hmac = (alg, key, data, enc) => createHmac(alg, key).update(data).digest(enc);
const standardKey = (secret) => Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
const reference = {
  segment: ({ secret, body }) => hmac('sha1', secret, body, 'hex'),
  github: ({ secret, body }) => `sha256=${hmac('sha256', secret, body, 'hex')}`,
  'github-sha1': ({ secret, body }) => `sha1=${hmac('sha1', secret, body, 'hex')}`,
  stripe: ({ secret, body, ts }) => `t=${ts},v1=${hmac('sha256', secret, `${ts}.${body}`, 'hex')}`,
  standard: ({ secret, body, ts, id }) => `v1,${hmac('sha256', standardKey(secret), `${id}.${ts}.${body}`, 'base64')}`,
  slack: ({ secret, body, ts }) => `v0=${hmac('sha256', secret, `v0:${ts}:${body}`, 'hex')}`,
  shopify: ({ secret, body }) => hmac('sha256', secret, body, 'base64'),
};

const stripe = new Stripe('sk_test_offline_compat_check'); // no request is made
const shopify = (secret) =>
  shopifyApi({
    apiKey: 'compat', apiSecretKey: secret, hostName: 'localhost', apiVersion: ApiVersion.January25,
    isEmbeddedApp: false, logger: { level: LogSeverity.Error },
  });
// webhooks.validate also wants the unsigned metadata headers Shopify sends.
const shopifyMeta = {
  'x-shopify-topic': 'orders/create', 'x-shopify-shop-domain': 'compat.myshopify.com',
  'x-shopify-api-version': ApiVersion.January25, 'x-shopify-webhook-id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043',
};

const plainSecrets = ['compat-secret-1', 'compat-sécret-2'];
const stripeSecrets = ['whsec_compatStripeSecret1', 'whsec_compatStripeSecret2'];
const standardSecrets = [
  'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  `whsec_${createHash('sha256').update('evfwd compat').digest('base64')}`, // 32 bytes, '=' padded
];

// One row per library. verify(body, headers (lower-case names), secret) is
// the library's verifier on evfwd's headers; sign({body, secret, ts, id}) is
// the library's signer, giving the headers evfwd verify gets. multi: evfwd
// signs once with every secret (one signature per secret in the header);
// otherwise once per secret.
const rows = [
  {
    scheme: 'segment', multi: false, secrets: plainSecrets, wrong: 'wrong-secret',
    verifier: 'node:crypto (Segment has no verifier library)',
    verify: (body, h, secret) => h['x-signature'] === reference.segment({ secret, body }),
    signer: 'node:crypto (Segment has no signing library)',
    sign: (a) => ({ 'X-Signature': reference.segment(a) }),
  },
  {
    scheme: 'github', multi: false, secrets: plainSecrets, wrong: 'wrong-secret',
    verifier: `@octokit/webhooks-methods@${v.octokit} verify (X-Hub-Signature-256)`,
    verify: (body, h, secret) => octokit.verify(secret, body, h['x-hub-signature-256']),
    signer: `@octokit/webhooks-methods@${v.octokit} sign`,
    sign: async ({ body, secret }) => ({ 'X-Hub-Signature-256': await octokit.sign(secret, body) }),
  },
  {
    scheme: 'github', label: 'github (legacy sha1)', multi: false, secrets: plainSecrets, wrong: 'wrong-secret',
    verifier: `@octokit/webhooks-methods@${v.octokit3} verify (X-Hub-Signature)`,
    verify: (body, h, secret) => octokit3.verify(secret, body, h['x-hub-signature']),
    signer: `@octokit/webhooks-methods@${v.octokit3} sign sha1`,
    sign: async ({ body, secret }) => ({ 'X-Hub-Signature': await octokit3.sign({ secret, algorithm: 'sha1' }, body) }),
  },
  {
    scheme: 'stripe', multi: true, timed: true, secrets: stripeSecrets, wrong: 'whsec_wrongStripeSecret',
    verifier: `stripe@${v.stripe} webhooks.constructEvent`,
    verify: (body, h, secret) => !!stripe.webhooks.constructEvent(body, h['stripe-signature'], secret),
    signer: `stripe@${v.stripe} webhooks.generateTestHeaderString`,
    sign: ({ body, secret, ts }) => ({
      'Stripe-Signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: ts }),
    }),
  },
  {
    scheme: 'standard', multi: true, timed: true, id: true, secrets: standardSecrets,
    wrong: `whsec_${Buffer.from('not the key that signed this').toString('base64')}`,
    verifier: `standardwebhooks@${v.standard} Webhook.verify`,
    verify: (body, h, secret) => (new StandardWebhook(secret).verify(body, h), true),
    signer: `standardwebhooks@${v.standard} Webhook.sign`,
    sign: ({ body, secret, ts, id }) => ({
      'webhook-id': id, 'webhook-timestamp': String(ts),
      'webhook-signature': new StandardWebhook(secret).sign(id, new Date(ts * 1000), body),
    }),
  },
  {
    scheme: 'standard', label: 'standard (svix)', multi: true, timed: true, id: true, secrets: standardSecrets, branded: true,
    wrong: `whsec_${Buffer.from('not the key that signed this').toString('base64')}`,
    verifier: `svix@${v.svix} Webhook.verify`,
    verify: (body, h, secret) => (new SvixWebhook(secret).verify(body, h), true),
    signer: `svix@${v.svix} Webhook.sign`,
    sign: ({ body, secret, ts, id }) => ({
      'webhook-id': id, 'webhook-timestamp': String(ts),
      'webhook-signature': new SvixWebhook(secret).sign(id, new Date(ts * 1000), body),
    }),
  },
  {
    scheme: 'slack', multi: false, timed: true, secrets: plainSecrets, wrong: 'wrong-secret',
    verifier: `@slack/bolt@${v.bolt} verifySlackRequest`,
    verify: (body, h, secret) => {
      bolt.verifySlackRequest({
        signingSecret: secret, body,
        headers: { 'x-slack-signature': h['x-slack-signature'], 'x-slack-request-timestamp': Number(h['x-slack-request-timestamp']) },
      });
      return true;
    },
    signer: "node:crypto (Slack's JS packages have no signer)",
    sign: (a) => ({ 'X-Slack-Request-Timestamp': String(a.ts), 'X-Slack-Signature': reference.slack(a) }),
  },
  {
    scheme: 'shopify', multi: false, secrets: plainSecrets, wrong: 'wrong-secret',
    verifier: `@shopify/shopify-api@${v.shopify} webhooks.validate`,
    verify: async (body, h, secret) => {
      const rawRequest = { method: 'POST', url: '/webhooks', headers: { ...shopifyMeta, ...h } };
      return (await shopify(secret).webhooks.validate({ rawBody: body, rawRequest, rawResponse: {} })).valid;
    },
    signer: `@shopify/shopify-api@${v.shopify} test-helpers getHmac`,
    sign: ({ body, secret }) => ({ 'X-Shopify-Hmac-Sha256': shopifyTestHmac(body, secret) }),
  },
];

// Every body is JSON: stripe's constructEvent and the Standard Webhooks
// verifiers parse it after checking the signature.
const big = JSON.stringify({
  type: 'batch',
  items: Array.from({ length: 1400 }, (_, i) => ({ sku: `sku-${i}`, name: `Item ${i} — ünïcode`, qty: i % 7, price: i * 1.25 })),
});
const bodies = [
  ['trailing newline', '{"type":"track","event":"Order Completed","properties":{"total":129.95}}\n'],
  ['unicode', '{"name":"Zoë Saldaña","city":"Zürich","note":"日本語 🚀","esc":"\\u00e9"}'],
  ['{}', '{}'],
  [`${Math.round(Buffer.byteLength(big) / 1024)} KB`, big],
];
const tamper = (body) => `${body} `;

if (process.argv[2] === '--generate') {
  generate();
} else {
  await main(process.argv[2], process.argv[3]);
}

async function main(evfwd, vectorsFile) {
  const work = join(here, 'bodies');
  mkdirSync(work, { recursive: true });
  let n = 0;
  const file = (body) => {
    const p = join(work, `body-${n++}`);
    writeFileSync(p, body);
    return p;
  };
  const run = (args) => spawnSync(evfwd, args, { encoding: 'utf8' });
  const failures = [];
  const fail = (what, detail) => failures.push(`${what}: ${JSON.stringify(detail, (k, val) =>
    (typeof val === 'string' && val.length > 400 ? `${val.slice(0, 400)}…` : val))}`);
  const libSays = async (row, body, headers, secret) => {
    try {
      return !!(await row.verify(body, headers, secret));
    } catch {
      return false;
    }
  };
  const say = (label, line) => console.log(`compat-signatures: ${label}: ${line}`);

  for (const row of rows) {
    const label = row.label ?? row.scheme;
    const now = Math.floor(Date.now() / 1000);

    // evfwd sign → the library's verifier.
    let accepted = 0;
    let rejected = 0;
    let total = 0;
    for (const [name, body] of bodies) {
      const path = file(body);
      const batches = row.multi ? [row.secrets] : row.secrets.map((s) => [s]);
      for (const secrets of batches) {
        const id = `msg_compat${n}`;
        const args = ['sign', path, '--scheme', row.scheme, ...secrets.flatMap((s) => ['--secret', s]), '--header'];
        if (row.timed) args.push('--timestamp', String(now));
        if (row.id) args.push('--id', id);
        const r = run(args);
        if (r.status !== 0) {
          fail(`${label}: evfwd sign exited ${r.status}`, { body: name, args, stderr: r.stderr });
          total += secrets.length;
          continue;
        }
        const headers = {};
        for (const line of r.stdout.split('\n').filter(Boolean)) {
          const i = line.indexOf(':');
          headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
        }
        for (const secret of secrets) {
          total++;
          if (await libSays(row, body, headers, secret)) accepted++;
          else fail(`${label}: ${row.verifier} rejected evfwd's signature`, { body: name, secret, sign: args.slice(2), out: r.stdout });
          if (!(await libSays(row, tamper(body), headers, secret))) rejected++;
          else fail(`${label}: ${row.verifier} accepted evfwd's signature over a tampered body`, { body: name, secret, out: r.stdout });
        }
      }
    }
    say(label, `evfwd sign → ${row.verifier}: ${accepted}/${total} accepted, ${rejected}/${total} tampered rejected`);

    // The library's signer → evfwd verify.
    accepted = 0;
    total = 0;
    let wrong = 0;
    let tampered = 0;
    let auto = 0;
    let request = 0;
    const verify = (path, headers, secrets, scheme = row.scheme) =>
      run(['verify', path, '--scheme', scheme,
        ...Object.entries(headers).flatMap(([k, val]) => ['--header', `${k}: ${val}`]),
        ...secrets.flatMap((s) => ['--secret', s])]);
    for (const [bi, [name, body]] of bodies.entries()) {
      const path = file(body);
      for (const secret of row.secrets) {
        total++;
        const headers = await row.sign({ body, secret, ts: now, id: `msg_compat${n}` });
        const r = verify(path, headers, row.secrets);
        if (r.status === 0) accepted++;
        else fail(`${label}: evfwd verify exited ${r.status} on ${row.signer}'s signature`, { body: name, secret, headers, stdout: r.stdout, stderr: r.stderr });
        if (bi === 0) {
          const a = verify(path, headers, row.secrets, 'auto');
          if (a.status === 0) auto++;
          else fail(`${label}: evfwd verify --scheme auto exited ${a.status} on ${row.signer}'s signature`, { body: name, headers, stdout: a.stdout, stderr: a.stderr });
          // The same as a raw HTTP request, as listen --record or a capture has it.
          const head = Object.entries(headers).map(([k, val]) => `${k}: ${val}\r\n`).join('');
          const raw = `POST /hooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\n${head}\r\n${body}`;
          const q = run(['verify', '--request', file(raw), '--scheme', row.scheme, ...row.secrets.flatMap((s) => ['--secret', s])]);
          if (q.status === 0) request++;
          else fail(`${label}: evfwd verify --request exited ${q.status} on ${row.signer}'s signature`, { raw, stdout: q.stdout, stderr: q.stderr });
        }
      }
      const headers = await row.sign({ body, secret: row.secrets[0], ts: now, id: `msg_compat${n}` });
      const w = verify(path, headers, [row.wrong]);
      if (w.status === 1) wrong++;
      else fail(`${label}: evfwd verify with a wrong secret exited ${w.status}, want 1`, { body: name, headers, secret: row.wrong, stdout: w.stdout, stderr: w.stderr });
      const t = verify(file(tamper(body)), headers, row.secrets);
      if (t.status === 1) tampered++;
      else fail(`${label}: evfwd verify of a tampered body exited ${t.status}, want 1`, { body: name, headers, stdout: t.stdout, stderr: t.stderr });
    }
    say(label, `${row.signer} → evfwd verify: ${accepted}/${total} accepted` +
      ` (--scheme auto: ${auto}/${row.secrets.length}, --request: ${request}/${row.secrets.length}),` +
      ` ${wrong}/${bodies.length} wrong secret and ${tampered}/${bodies.length} tampered rejected (exit 1)`);

    // Timestamps outside the 5-minute default: evfwd must judge each as the
    // owner's library does (all refuse a stale one; stripe's and slack's
    // accept one ahead, Standard Webhooks' refuse it).
    if (row.timed) {
      const body = '{}';
      const verdicts = [];
      for (const skew of [-400, 400]) {
        const h = await row.sign({ body, secret: row.secrets[0], ts: now + skew, id: 'msg_compat_skew' });
        const lower = Object.fromEntries(Object.entries(h).map(([k, val]) => [k.toLowerCase(), val]));
        const lib = await libSays(row, body, lower, row.secrets[0]);
        const r = verify(file(body), h, row.secrets);
        verdicts.push(`${skew > 0 ? '+' : ''}${skew} s: library ${lib ? 'accepts' : 'rejects'}, evfwd verify exits ${r.status}`);
        if ((skew < 0 && lib) || r.status !== (lib ? 0 : 1)) {
          fail(`${label}: a signature ${skew} s off: library ${lib ? 'accepts' : 'rejects'}, evfwd verify exits ${r.status} (want the same verdict, and a stale one refused)`, { headers: h, stdout: r.stdout, stderr: r.stderr });
        }
      }
      say(label, `timestamps (5 min tolerance): ${verdicts.join('; ')}`);
    }

    // Svix itself sends svix-id, svix-timestamp, svix-signature unless an
    // account has the unbranded webhook-* names; its library takes both,
    // and so must evfwd verify.
    if (row.branded) {
      const body = bodies[0][1];
      const h = await row.sign({ body, secret: row.secrets[0], ts: now, id: 'msg_compat_branded' });
      const branded = Object.fromEntries(Object.entries(h).map(([k, val]) => [k.replace(/^webhook-/, 'svix-'), val]));
      const r = verify(file(body), branded, row.secrets);
      if (r.status !== 0) {
        fail(`${label}: with Svix's header names (svix-id, svix-timestamp, svix-signature), evfwd verify exits ${r.status}`, { headers: branded, stdout: r.stdout, stderr: r.stderr });
      }
      say(label, `Svix's header names (svix-id, svix-timestamp, svix-signature): evfwd verify accepts`);
    }
  }

  // The published vectors (and the generated ones): node:crypto must make
  // each signature exactly, and evfwd verify must accept it. Their
  // timestamps are old, hence the wide tolerance.
  const vectors = JSON.parse(readFileSync(vectorsFile, 'utf8'));
  let matched = 0;
  let verified = 0;
  let libOK = 0;
  let libTotal = 0;
  for (const vec of vectors) {
    const sha1 = vec.signature.startsWith('sha1=');
    const want = reference[sha1 ? 'github-sha1' : vec.scheme]({ secret: vec.secret, body: vec.body, ts: vec.timestamp, id: vec.id });
    if (want === vec.signature) matched++;
    else fail(`vector ${vec.scheme} (${vec.source}): node:crypto makes ${want}`, vec);
    // The owners' verifiers too, with the clock set to the vector's time.
    const headers = {
      segment: { 'x-signature': vec.signature },
      github: { [sha1 ? 'x-hub-signature' : 'x-hub-signature-256']: vec.signature },
      stripe: { 'stripe-signature': vec.signature },
      standard: { 'webhook-id': vec.id, 'webhook-timestamp': String(vec.timestamp), 'webhook-signature': vec.signature },
      slack: { 'x-slack-request-timestamp': String(vec.timestamp), 'x-slack-signature': vec.signature },
      shopify: { 'x-shopify-hmac-sha256': vec.signature },
    }[vec.scheme];
    for (const row of rows.filter((r) => r.scheme === vec.scheme && (vec.scheme !== 'github' || sha1 === !!r.label))) {
      libTotal++;
      const realNow = Date.now;
      Date.now = () => (vec.timestamp || Math.floor(realNow() / 1000)) * 1000;
      try {
        if (await libSays(row, vec.body, headers, vec.secret)) libOK++;
        else fail(`vector ${vec.scheme} (${vec.source}): ${row.verifier} rejects it`, vec);
      } finally {
        Date.now = realNow;
      }
    }
    const args = ['verify', file(vec.body), '--scheme', vec.scheme, '--signature', vec.signature, '--secret', vec.secret];
    if (vec.timestamp) args.push('--timestamp', String(vec.timestamp), '--tolerance', '876000h');
    if (vec.id) args.push('--id', vec.id);
    const r = run(args);
    if (r.status === 0) verified++;
    else fail(`vector ${vec.scheme} (${vec.source}): evfwd verify exited ${r.status}`, { args, stdout: r.stdout, stderr: r.stderr });
  }
  say('vectors', `${matched}/${vectors.length} made exactly by node:crypto, ${libOK}/${libTotal} accepted by the owners' verifiers,` +
    ` ${verified}/${vectors.length} accepted by evfwd verify --signature`);

  if (failures.length) {
    console.log(`compat-signatures: FAIL: ${failures.length} check(s) failed${failures.length > 20 ? ', the first 20' : ''}:`);
    for (const f of failures.slice(0, 20)) console.log(`- ${f}`);
    process.exit(1);
  }
}

// One vector per scheme that has no published example, made by its owner's
// library (segment: node:crypto, there being none).
async function generate() {
  const ts = 1767225600; // 2026-01-01T00:00:00Z
  const body = '{"id":"evt_compat_1","type":"order.created","data":{"total":42,"name":"Zoë"}}';
  const out = [
    { scheme: 'stripe', source: `generated by stripe@${v.stripe} webhooks.generateTestHeaderString`, secret: stripeSecrets[0], timestamp: ts, id: '', body,
      signature: stripe.webhooks.generateTestHeaderString({ payload: body, secret: stripeSecrets[0], timestamp: ts }) },
    { scheme: 'shopify', source: `generated by @shopify/shopify-api@${v.shopify} test-helpers getHmac`, secret: plainSecrets[0], timestamp: 0, id: '', body,
      signature: shopifyTestHmac(body, plainSecrets[0]) },
    { scheme: 'github', source: `generated by @octokit/webhooks-methods@${v.octokit3} sign (sha1, the legacy X-Hub-Signature)`, secret: "It's a Secret to Everybody", timestamp: 0, id: '', body: 'Hello, World!',
      signature: await octokit3.sign({ secret: "It's a Secret to Everybody", algorithm: 'sha1' }, 'Hello, World!') },
    { scheme: 'standard', source: `generated by standardwebhooks@${v.standard} Webhook.sign`, secret: standardSecrets[1], timestamp: ts, id: 'msg_compat_1', body,
      signature: new StandardWebhook(standardSecrets[1]).sign('msg_compat_1', new Date(ts * 1000), body) },
    { scheme: 'segment', source: 'generated by node:crypto (Segment publishes neither an example nor a library)', secret: plainSecrets[1], timestamp: 0, id: '', body,
      signature: reference.segment({ secret: plainSecrets[1], body }) },
  ];
  console.log(JSON.stringify(out, null, 2));
}
