// End-to-end cases for the gRPC endpoint, driven by the official RocketMQ 5
// Node.js client. The Go test (node_test.go) starts a broker, creates the
// topics and groups, and runs: node e2e.js <case>. Settings come from the
// environment: RMQ_ENDPOINT, RMQ_TOPIC, RMQ_FIFO_TOPIC, RMQ_GROUP, RMQ_N.
// A case prints one JSON line with what it saw and exits 0, or prints the
// error and exits 1.
'use strict';

const assert = require('node:assert/strict');
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult, LitePushConsumerBuilder, OffsetOption } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
// step notes progress on stderr, so a case that hangs shows where.
const t0 = Date.now();
const step = (what) => console.error(`[${Date.now() - t0} ms] ${what}`);
const quiet = { info() {}, warn() {}, error(...a) { console.error(...a); }, debug() {} };
const endpoints = env('RMQ_ENDPOINT');
const base = { endpoints, namespace: '', logger: quiet, requestTimeout: 5000 };

// receiveUntil receives until n messages arrived or the deadline passed.
async function receiveUntil(consumer, n, invisibleMs, deadlineMs) {
  const got = [];
  const end = Date.now() + deadlineMs;
  while (got.length < n && Date.now() < end) {
    got.push(...await consumer.receive(32, invisibleMs));
  }
  return got;
}

// producer-simple: a Producer sends NORMAL, FIFO, DELAY and TRANSACTION
// messages and recalls a second DELAY one; a SimpleConsumer receives, acks, gives one up with
// changeInvisibleDuration and gets it again with deliveryAttempt 2.
async function producerSimple() {
  const topic = env('RMQ_TOPIC');
  const fifoTopic = env('RMQ_FIFO_TOPIC');
  const group = env('RMQ_GROUP');
  const checked = [];
  // One topic at startup: the client (1.0.8) sends its settings once it
  // has the first route and only then waits for the answer, so an answer
  // that comes while it still fetches a second route is missed and
  // startup waits forever. The FIFO topic's route is fetched at its first
  // send.
  const producer = new Producer({
    ...base, topics: [ topic ],
    checker: { async check(mv) { checked.push(mv.messageId); return TransactionResolution.COMMIT; } },
  });
  step('producer startup');
  await producer.startup();
  step('sending');
  const sent = [];
  const normal = await producer.send({ topic, tag: 'normal', keys: [ 'k1' ], body: Buffer.from('normal'), properties: new Map([[ 'color', 'red' ]]) });
  sent.push(normal.messageId);
  for (let i = 0; i < 3; i++) {
    await producer.send({ topic: fifoTopic, tag: 'fifo', messageGroup: 'order-1', body: Buffer.from(`fifo-${i}`) });
  }
  const delayedAt = Date.now() + 1500;
  await producer.send({ topic, tag: 'delay', deliveryTimestamp: new Date(delayedAt), body: Buffer.from('delay') });
  // A second one, due with it, recalled: it never arrives.
  const recalled = await producer.send({ topic, tag: 'delay', deliveryTimestamp: new Date(delayedAt), body: Buffer.from('recalled') });
  assert.ok(recalled.recallHandle, 'a delayed message has a recall handle');
  const recall = await producer.recallMessage(topic, recalled.recallHandle);
  assert.equal(recall.messageId, recalled.messageId);
  const commitTx = producer.beginTransaction();
  await producer.send({ topic, tag: 'txn', body: Buffer.from('txn-commit') }, commitTx);
  await commitTx.commit();
  const rollbackTx = producer.beginTransaction();
  await producer.send({ topic, tag: 'txn', body: Buffer.from('txn-rollback') }, rollbackTx);
  await rollbackTx.rollback();

  const consumer = new SimpleConsumer({
    ...base, consumerGroup: group, awaitDuration: 3000,
    subscriptions: new Map([[ topic, '*' ]]),
  });
  step('consumer startup');
  await consumer.startup();
  step('receiving');
  // normal, the committed transaction, and the delayed one once due (the
  // recalled one, due with it, would come in the same receive).
  const got = await receiveUntil(consumer, 3, 30000, 20000);
  step(`received ${got.length}`);
  const bodies = got.map(m => m.body.toString()).sort();
  assert.deepEqual(bodies, [ 'delay', 'normal', 'txn-commit' ]);
  const n = got.find(m => m.body.toString() === 'normal');
  assert.equal(n.tag, 'normal');
  assert.deepEqual(n.keys, [ 'k1' ]);
  assert.equal(n.properties.get('color'), 'red');
  assert.equal(n.messageId, normal.messageId);
  assert.equal(n.deliveryAttempt, 1);
  assert.ok(Date.now() >= delayedAt, 'the delayed message came early');
  // Give the normal one up; ack the rest.
  for (const m of got) {
    if (m === n) await consumer.changeInvisibleDuration(m, 0);
    else await consumer.ack(m);
  }
  step('receiving the one given up');
  const again = await receiveUntil(consumer, 1, 30000, 10000);
  assert.equal(again.length, 1);
  assert.equal(again[0].body.toString(), 'normal');
  assert.equal(again[0].deliveryAttempt, 2);
  await consumer.ack(again[0]);
  // Acking the old handle fails: it was superseded.
  await assert.rejects(consumer.ack(n));
  step('consumer shutdown');
  await consumer.shutdown();

  const fifo = new SimpleConsumer({
    ...base, consumerGroup: group + '-fifo', awaitDuration: 3000,
    subscriptions: new Map([[ fifoTopic, 'fifo' ]]),
  });
  step('fifo consumer startup');
  await fifo.startup();
  const fifoGot = await receiveUntil(fifo, 3, 30000, 10000);
  assert.deepEqual(fifoGot.map(m => m.body.toString()), [ 'fifo-0', 'fifo-1', 'fifo-2' ]);
  assert.ok(fifoGot.every(m => m.messageGroup === 'order-1'));
  for (const m of fifoGot) await fifo.ack(m);
  step('fifo consumer shutdown');
  await fifo.shutdown();
  step('producer shutdown');
  await producer.shutdown();
  step('done');
  console.log(JSON.stringify({ ok: true, received: bodies.length, fifo: fifoGot.length }));
}

// push: a PushConsumer consumes RMQ_N messages of RMQ_TOPIC (sent by the
// Go test) and prints their bodies.
async function push() {
  const topic = env('RMQ_TOPIC');
  const want = Number(env('RMQ_N'));
  const bodies = new Set();
  let done;
  const finished = new Promise(resolve => { done = resolve; });
  const consumer = new PushConsumer({
    ...base, consumerGroup: env('RMQ_GROUP'), longPollingTimeout: 3000,
    subscriptions: new Map([[ topic, '*' ]]),
    messageListener: {
      async consume(mv) {
        bodies.add(mv.body.toString());
        if (bodies.size >= want) done();
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  const timer = setTimeout(() => done(), 30000);
  await finished;
  clearTimeout(timer);
  await consumer.shutdown();
  assert.equal(bodies.size, want, `consumed ${bodies.size} of ${want}`);
  console.log(JSON.stringify({ ok: true, bodies: [ ...bodies ].sort() }));
}

// push-retry: a PushConsumer fails the first delivery of each message
// and consumes the second; it prints, for each message, the milliseconds
// between the two deliveries and the delivery attempts it saw.
async function pushRetry() {
  const topic = env('RMQ_TOPIC');
  const want = Number(env('RMQ_N'));
  const first = new Map(); // body -> when the failed delivery came
  const gaps = {};
  const attempts = {};
  let done;
  const finished = new Promise(resolve => { done = resolve; });
  const consumer = new PushConsumer({
    ...base, consumerGroup: env('RMQ_GROUP'),
    subscriptions: new Map([[ topic, '*' ]]),
    messageListener: {
      async consume(mv) {
        const body = mv.body.toString();
        (attempts[body] ??= []).push(mv.deliveryAttempt);
        if (!first.has(body)) {
          first.set(body, Date.now());
          return ConsumeResult.FAILURE;
        }
        if (!(body in gaps)) gaps[body] = Date.now() - first.get(body);
        if (Object.keys(gaps).length >= want) done();
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  const timer = setTimeout(() => done(), 30000);
  await finished;
  clearTimeout(timer);
  await consumer.shutdown();
  assert.equal(Object.keys(gaps).length, want, `consumed ${Object.keys(gaps).length} of ${want} again: ${JSON.stringify(attempts)}`);
  console.log(JSON.stringify({ ok: true, gaps, attempts }));
}

// txn-check: a transaction left open is recovered by the broker over
// Telemetry; the producer's checker commits it and a SimpleConsumer gets it.
async function txnCheck() {
  const topic = env('RMQ_TOPIC');
  const checked = [];
  const producer = new Producer({
    ...base, topics: [ topic ],
    checker: { async check(mv) { checked.push(mv.body.toString()); return TransactionResolution.COMMIT; } },
  });
  await producer.startup();
  const tx = producer.beginTransaction();
  await producer.send({ topic, tag: 'txn', body: Buffer.from('orphan') }, tx);
  // Neither commit nor rollback: the transaction is orphaned.
  const consumer = new SimpleConsumer({
    ...base, consumerGroup: env('RMQ_GROUP'), awaitDuration: 3000,
    subscriptions: new Map([[ topic, '*' ]]),
  });
  await consumer.startup();
  const got = await receiveUntil(consumer, 1, 30000, 30000);
  assert.equal(got.length, 1);
  assert.equal(got[0].body.toString(), 'orphan');
  assert.deepEqual(checked, [ 'orphan' ]);
  await consumer.ack(got[0]);
  await consumer.shutdown();
  await producer.shutdown();
  console.log(JSON.stringify({ ok: true, checked }));
}

// produce: a Producer sends RMQ_N messages "node-<i>" with tag node.
async function produce() {
  const topic = env('RMQ_TOPIC');
  const n = Number(env('RMQ_N'));
  const producer = new Producer({ ...base, topics: [ topic ] });
  await producer.startup();
  const ids = [];
  for (let i = 0; i < n; i++) {
    const r = await producer.send({ topic, tag: 'node', keys: [ `key-${i}` ], body: Buffer.from(`node-${i}`) });
    ids.push(r.messageId);
  }
  await producer.shutdown();
  console.log(JSON.stringify({ ok: true, ids }));
}

// produce-for: a Producer sends "<RMQ_PREFIX>-<i>" to RMQ_TOPIC, one at a
// time, until its stdin closes, printing a line for each acknowledged
// message and waiting 100 ms after each failed send (its retries spent).
async function produceFor() {
  const topic = env('RMQ_TOPIC');
  const prefix = env('RMQ_PREFIX');
  const producer = new Producer({ ...base, topics: [ topic ] });
  await producer.startup();
  let open = true;
  process.stdin.on('end', () => { open = false; });
  process.stdin.on('close', () => { open = false; });
  process.stdin.resume();
  let acked = 0, failed = 0;
  for (let i = 0; open; i++) {
    const body = `${prefix}-${i}`;
    try {
      const r = await producer.send({ topic, tag: 'node', body: Buffer.from(body) });
      acked++;
      console.log(JSON.stringify({ acked: body, offset: String(r.offset) }));
    } catch (e) {
      failed++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  await producer.shutdown();
  console.log(JSON.stringify({ ok: true, acked, failed }));
}

// priority: a Producer sends priority messages to RMQ_TOPIC, a PRIORITY
// topic of 4 queues, lowest and highest mixed; a SimpleConsumer receives
// them in one batch, the highest priority first, each with its priority.
async function priority() {
  const topic = env('RMQ_TOPIC');
  const group = env('RMQ_GROUP');
  const producer = new Producer({ ...base, topics: [ topic ] });
  await producer.startup();
  // The client types priority 0 NORMAL, which a PRIORITY topic's route
  // does not accept, so the lowest sent is 1.
  const sent = [ [ 'p1', 1 ], [ 'p3', 3 ], [ 'p2', 2 ], [ 'p7', 7 ], [ 'p1b', 1 ], [ 'p3b', 3 ] ];
  for (const [ body, priority ] of sent) {
    await producer.send({ topic, tag: 'prio', priority, body: Buffer.from(body) });
  }
  await producer.shutdown();
  const consumer = new SimpleConsumer({
    ...base, consumerGroup: group, awaitDuration: 3000,
    subscriptions: new Map([[ topic, '*' ]]),
  });
  await consumer.startup();
  const got = await receiveUntil(consumer, sent.length, 30000, 20000);
  const order = got.map(m => `${m.body.toString()}:${m.priority}`);
  // 7 is beyond the last queue, 3: it shares that queue with the 3s, in
  // the order sent.
  assert.deepEqual(order, [ 'p3:3', 'p7:7', 'p3b:3', 'p2:2', 'p1:1', 'p1b:1' ]);
  for (const m of got) await consumer.ack(m);
  await consumer.shutdown();
  console.log(JSON.stringify({ ok: true, order }));
}

// lite: a Producer sends to lite topics of RMQ_TOPIC, a LITE topic; a
// LitePushConsumer of RMQ_GROUP subscribes to two of them and gets their
// messages, each lite topic's in the order sent, and none of a third;
// subscribed later with the last one only (tail 1), it gets that one; a
// lite topic unsubscribed gets nothing more. A lite topic's name of the
// wrong characters is refused with ILLEGAL_LITE_TOPIC (40020).
async function lite() {
  const topic = env('RMQ_TOPIC');
  const group = env('RMQ_GROUP');
  const producer = new Producer({ ...base, topics: [ topic ] });
  await producer.startup();
  const send = (liteTopic, body) => producer.send({ topic, tag: 'lite', liteTopic, body: Buffer.from(body) });
  for (const [ liteTopic, body ] of [[ 'chat-a', 'a1' ], [ 'chat-b', 'b1' ], [ 'chat-a', 'a2' ], [ 'chat-c', 'c1' ], [ 'chat-c', 'c2' ], [ 'chat-b', 'b2' ], [ 'chat-a', 'a3' ]]) {
    await send(liteTopic, body);
  }
  let refused;
  try {
    await send('no spaces', 'x');
  } catch (err) {
    refused = err.code;
  }
  assert.equal(refused, 40020, 'a bad lite topic name is ILLEGAL_LITE_TOPIC');
  step('sent');

  const got = [];
  let notify;
  const listener = {
    async consume(mv) {
      step(`consume ${mv.liteTopic}:${mv.body.toString()} attempt ${mv.deliveryAttempt}`);
      assert.equal(mv.topic, topic);
      got.push(`${mv.liteTopic}:${mv.body.toString()}`);
      if (notify) notify();
      return ConsumeResult.SUCCESS;
    },
  };
  const until = (n, ms) => new Promise((resolve, reject) => {
    const check = () => { if (got.length >= n) { notify = undefined; resolve(); } };
    notify = check;
    check();
    setTimeout(() => reject(new Error(`got ${got.length} of ${n} messages: ${got.join(', ')}`)), ms);
  });
  const consumer = await new LitePushConsumerBuilder()
    .setClientConfiguration(base)
    .setConsumerGroup(group)
    .bindTopic(topic)
    .setMessageListener(listener)
    .build();
  await consumer.subscribeLite('chat-a');
  await consumer.subscribeLite('chat-b', OffsetOption.MIN_OFFSET);
  await until(5, 30000);
  const byLite = (l) => got.filter(g => g.startsWith(l + ':')).map(g => g.split(':')[1]);
  assert.deepEqual(byLite('chat-a'), [ 'a1', 'a2', 'a3' ]);
  assert.deepEqual(byLite('chat-b'), [ 'b1', 'b2' ]);
  assert.deepEqual(byLite('chat-c'), []);
  step('first five');

  await consumer.subscribeLite('chat-c', OffsetOption.ofTailN(1));
  await until(6, 30000);
  assert.equal(got[5], 'chat-c:c2');
  step('tail');

  await consumer.unsubscribeLite('chat-a');
  await send('chat-a', 'a4');
  await send('chat-b', 'b3');
  await until(7, 30000);
  assert.equal(got[6], 'chat-b:b3');
  await consumer.close();
  await producer.shutdown();
  assert.equal(got.length, 7, `nothing after b3: ${got.join(', ')}`);
  console.log(JSON.stringify({ ok: true, got }));
}

const cases = { 'producer-simple': producerSimple, push, 'push-retry': pushRetry, produce, 'txn-check': txnCheck, 'produce-for': produceFor, priority, lite };
const run = cases[process.argv[2]];
if (!run) {
  console.error(`unknown case ${process.argv[2]}; cases: ${Object.keys(cases).join(', ')}`);
  process.exit(2);
}
run().then(() => process.exit(0), (err) => {
  console.error(err && err.stack || err);
  process.exit(1);
});
