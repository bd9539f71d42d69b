'use strict';
// The card vendor's own Node client library (@solidgate/node-sdk, pinned in
// package.json) against a real gatewayd: every one of its eleven HTTP
// methods on /api/v1/ and on /api/v3/, answers checked for their shape, and
// the notifications' signatures checked with the library's own signing code.
//
// node/e2e_clientlib_test.go starts the node and runs this file with
// `node --test`, passing in the environment:
//   GATEWAY_URL                             the node, http://HOST:PORT
//   API_PUBLIC_KEY, API_SECRET_KEY          a merchant's API key pair
//   WEBHOOK_PUBLIC_KEY, WEBHOOK_SECRET_KEY  its webhook key pair
//   WALLET_TOKENS  JSON {"v1":{"applePay":W,"googlePay":W},"v3":{...}}, W =
//                  {"amount","currency","payment_source"}: wallet tokens the
//                  Go test made for this node's wallet keys (single use)
// Written for Debian's Node (18 and later): node:test and node:assert only.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { Api } = require('@solidgate/node-sdk');

function env(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run this through go test ./node -run TestVendorClientLibrary`);
  }
  return v;
}

const gateway = env('GATEWAY_URL');
const apiPK = env('API_PUBLIC_KEY');
const apiSK = env('API_SECRET_KEY');
const webhookPK = env('WEBHOOK_PUBLIC_KEY');
const webhookSK = env('WEBHOOK_SECRET_KEY');
const walletTokens = JSON.parse(env('WALLET_TOKENS'));

// A far settle delay: no order here settles by itself during the test.
const noAutoSettle = { delay_hours: 8760 };
const TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

let seq = 0;
const newOrderID = (what) => `sdk-${what}-${process.pid}-${Date.now()}-${++seq}`;

// order is the v3 body shape this gateway takes on both /api/v1/ and
// /api/v3/ (docs/api.md, "Coming from the vendor's client library").
function order(id, amount, extra) {
  return {
    order_id: id, amount, currency: 'USD', order_description: 'client library order',
    processing_mid: 'mid-1',
    customer: { user_id: 'u1', email: 'u1@example.com', ip_address: '203.0.113.7' },
    ...extra,
  };
}

const card = {
  type: 'card', card_number: '4111111111111111', card_holder_name: 'Jane Doe',
  card_exp_month: '12', card_exp_year: '2035', card_cvv: '123',
};

function expectOrder(o, id, status, amount) {
  assert.equal(o.error, undefined, `want order ${id} ${status}, got error ${JSON.stringify(o.error)}`);
  assert.equal(o.order_id, id);
  assert.equal(o.status, status, JSON.stringify(o));
  assert.equal(o.amount, amount);
  assert.equal(o.currency, 'USD');
  assert.equal(typeof o.settled_amount, 'number');
  assert.equal(typeof o.refunded_amount, 'number');
}

function expectTxn(txn, operation, status, amount) {
  assert.ok(txn && typeof txn.id === 'string' && txn.id !== '', `transaction: ${JSON.stringify(txn)}`);
  assert.equal(txn.operation, operation, JSON.stringify(txn));
  assert.equal(txn.status, status, JSON.stringify(txn));
  assert.equal(txn.amount, amount);
  assert.equal(txn.currency, 'USD');
  assert.match(txn.created_at, TIME);
  assert.match(txn.updated_at, TIME);
}

function expectError(r, code, attribute) {
  assert.ok(r.error, `want error ${code} on ${attribute}, got ${JSON.stringify(r)}`);
  assert.equal(r.error.code, code, JSON.stringify(r.error));
  const msgs = r.error.messages[attribute];
  assert.ok(Array.isArray(msgs) && msgs.length > 0 && typeof msgs[0] === 'string', JSON.stringify(r.error));
}

// waitStatus polls the library's status until the order reaches want
// (bounded: the sandbox acquirer answers within milliseconds).
async function waitStatus(api, id, want) {
  const deadline = Date.now() + 10000;
  let last;
  while (Date.now() < deadline) {
    last = await api.status({ order_id: id });
    if (last.status === want) {
      return last;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.fail(`order ${id}: ${JSON.stringify(last)} after 10 s, want status ${want}`);
}

// A merchant's notification endpoint: records every call and answers
// {"status":"ok"} (interface 6.1).
function startReceiver() {
  const calls = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      calls.push({ merchant: req.headers.merchant, signature: req.headers.signature, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"status":"ok"}');
    });
  });
  server.unref(); // the process ends with its tests
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ calls, url: `http://127.0.0.1:${server.address().port}/notify` }));
  });
}

async function waitNotification(receiver, id, status) {
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline) {
    const c = receiver.calls.find((call) => {
      const b = JSON.parse(call.body);
      return b.order_id === id && b.status === status;
    });
    if (c) {
      return c;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.fail(`no ${status} notification for ${id} within 10 s`);
}

// A payment made by charge, auth, recurring, resign or a wallet answers
// at once with processing and its first transaction, then is authorised.
async function expectPaymentAuthorised(api, r, id, amount, sourceType) {
  expectOrder(r, id, 'processing', amount);
  expectTxn(r.transaction, 'auth', 'created', amount);
  assert.equal(r.payment_source.type, sourceType);
  const st = await waitStatus(api, id, 'authorized');
  const txns = Object.values(st.transactions);
  assert.equal(txns.length, 1, JSON.stringify(st.transactions));
  expectTxn(txns[0], 'auth', 'success', amount);
  assert.equal(st.transactions[txns[0].id], txns[0], 'transactions is keyed by transaction id');
  assert.ok(txns[0].auth_code, 'an approved authorisation has an auth_code');
  return st;
}

const receiverStarted = startReceiver();
// The card charges of both versions: their notifications are checked last.
const notifiedOrders = [];

for (const version of ['v1', 'v3']) {
  test(`every method of the library on /api/${version}/`, async (t) => {
    // The library appends the method's path to its base address.
    const api = new Api(apiPK, apiSK, `${gateway}/api/${version}/`);
    const receiver = await receiverStarted;
    let token;
    let chargeID;

    await t.test('charge, status, settle without amount, refund, arnCode', async () => {
      const id = newOrderID(`charge-${version}`);
      chargeID = id;
      notifiedOrders.push(id);
      const r = await api.charge(order(id, 1500, { settle: noAutoSettle, callback_url: receiver.url, payment_source: card }));
      const st = await expectPaymentAuthorised(api, r, id, 1500, 'card');
      token = st.payment_source.payment_token;
      assert.ok(token, 'an authorised card charge carries a payment_token');
      assert.equal(st.payment_source.masked_card_number, '411111******1111');

      // settle without amount: the whole authorised amount.
      const s = await api.settle({ order_id: id });
      expectOrder(s, id, 'settled', 1500);
      assert.equal(s.settled_amount, 1500);
      expectTxn(s.transaction, 'settle', 'success', 1500);

      const rf = await api.refund({ order_id: id, amount: 400 });
      expectOrder(rf, id, 'settled', 1500);
      assert.equal(rf.refunded_amount, 400);
      expectTxn(rf.transaction, 'refund', 'success', 400);

      const arn = await api.arnCode({ order_id: id });
      assert.equal(arn.error, undefined, JSON.stringify(arn));
      assert.deepEqual(Object.keys(arn), ['arn_codes']);
      assert.deepEqual(arn.arn_codes.map((a) => a.operation), ['auth', 'settle', 'refund']);
      const final = await api.status({ order_id: id });
      for (const a of arn.arn_codes) {
        assert.deepEqual(Object.keys(a).sort(), ['amount', 'arn_code', 'created_at', 'currency', 'operation', 'transaction_id']);
        const txn = final.transactions[a.transaction_id];
        assert.ok(txn, `arn_code of a transaction the order has: ${JSON.stringify(a)}`);
        assert.equal(a.arn_code, txn.arn);
        assert.ok(a.arn_code);
        assert.equal(a.amount, txn.amount);
        assert.equal(a.currency, 'USD');
        assert.equal(a.created_at, txn.created_at);
      }
    });

    await t.test('auth, then void', async () => {
      const id = newOrderID(`auth-${version}`);
      const r = await api.auth(order(id, 700, { payment_source: card }));
      await expectPaymentAuthorised(api, r, id, 700, 'card');
      const v = await api.void({ order_id: id });
      expectOrder(v, id, 'voided', 700);
      expectTxn(v.transaction, 'void', 'success', 700);
    });

    await t.test('recurring with the charge\'s token', async () => {
      const id = newOrderID(`recurring-${version}`);
      const r = await api.recurring(order(id, 900, { settle: noAutoSettle, recurring_token: token }));
      const st = await expectPaymentAuthorised(api, r, id, 900, 'token');
      assert.equal(st.payment_source.masked_card_number, '411111******1111');
    });

    await t.test('resign with the token and the CVV', async () => {
      const id = newOrderID(`resign-${version}`);
      const r = await api.resign(order(id, 950, { settle: noAutoSettle, recurring_token: token, card_cvv: '123' }));
      const st = await expectPaymentAuthorised(api, r, id, 950, 'token');
      assert.equal(st.cvv_check, 'M', 'the CVV reached the acquirer');
    });

    for (const [method, type] of [['applePay', 'walleta-pay'], ['googlePay', 'walletb-pay']]) {
      await t.test(method, async () => {
        const w = walletTokens[version][method];
        const id = newOrderID(`${method}-${version}`);
        const r = await api[method](order(id, w.amount, { currency: w.currency, settle: noAutoSettle, payment_source: w.payment_source }));
        await expectPaymentAuthorised(api, r, id, w.amount, type);
      });
    }

    await t.test('errors the library reads by error.code', async () => {
      // The order of the first subtest, unknown to this key pair's other
      // paths: an unknown order is 2.05, an unknown operation 0.01.
      expectError(await api.status({ order_id: `${chargeID}-none` }), '2.05', 'order_id');
      expectError(await api.arnCode({ order_id: `${chargeID}-none` }), '2.05', 'order_id');
      expectError(await api._baseRequest('no-such-operation', { order_id: chargeID }), '0.01', 'path');
      expectError(await api.recurring(order(newOrderID('bad-token'), 100, { settle: noAutoSettle, recurring_token: 'tok_unknown' })), '7.01', 'recurring_token');
      expectError(await api.settle({ order_id: chargeID }), '0.03', 'status');
      const wrongKey = new Api(apiPK, 'not-the-secret', `${gateway}/api/${version}/`);
      expectError(await wrongKey.status({ order_id: chargeID }), '1.01', 'signature');
    });
  });
}

test('notifications verify with the library\'s own signing code', async () => {
  // The library signs with _generateSignature(body): base64 of the hex
  // HMAC-SHA512 of public key + body + public key. Built with the webhook
  // pair it is the signature a notification must carry.
  const signer = new Api(webhookPK, webhookSK);
  const apiSigner = new Api(apiPK, apiSK);
  const receiver = await receiverStarted;
  assert.equal(notifiedOrders.length, 2, 'a card charge on each version');
  for (const id of notifiedOrders) {
    // Each status change of the charge is notified (contract section 4).
    for (const status of ['authorized', 'settled']) {
      await waitNotification(receiver, id, status);
    }
  }
  for (const call of receiver.calls) {
    assert.equal(call.merchant, webhookPK, 'notifications name the webhook public key');
    assert.equal(call.signature, signer._generateSignature(call.body), `signature of ${call.body}`);
    assert.notEqual(call.signature, apiSigner._generateSignature(call.body), 'not signed with the API pair');
    assert.notEqual(signer._generateSignature(`${call.body} `), call.signature, 'a changed body does not verify');
  }
});
