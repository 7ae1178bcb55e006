#!/usr/bin/env node
// kafkajs 2.2.4 transactions against kcoord (tests/integration/test_transactions_clients.py).
//
//   node txn.js BOOTSTRAP OUT_TOPIC INPUT_TOPIC GROUP TRANSACTIONAL_ID
//
// One committed transaction (10 records "c-<i>" and, through sendOffsets, offset 10 of
// INPUT_TOPIC partition 0 for GROUP), then one aborted transaction (5 records "a-<i>" and offset
// 20), then it reads OUT_TOPIC as a read_committed consumer (kafkajs' default) and GROUP's
// committed offsets through the admin client. Prints one JSON line per step on stdout:
//   {"kind":"committed"}, {"kind":"aborted"}, {"kind":"offsets","offsets":{...}},
//   {"kind":"read","values":[...]}, or {"kind":"error",...}.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

function emit(kind, fields = {}) {
  process.stdout.write(JSON.stringify({ kind, ...fields }) + '\n')
}

function makeKafka(bootstrap, clientId) {
  return new Kafka({
    clientId,
    brokers: [bootstrap],
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 2000 },
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, label, log }) => {
      const { message, ...extra } = log
      process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
    },
  })
}

async function main([bootstrap, out, input, group, txnId]) {
  const kafka = makeKafka(bootstrap, 'kcoord-kafkajs-txn')
  const producer = kafka.producer({ transactionalId: txnId, maxInFlightRequests: 1, idempotent: true })
  await producer.connect()

  const committed = await producer.transaction()
  await committed.send({ topic: out, messages: [...Array(10).keys()].map(i => ({ key: `k${i}`, value: `c-${i}` })) })
  await committed.sendOffsets({ consumerGroupId: group, topics: [{ topic: input, partitions: [{ partition: 0, offset: '10' }] }] })
  await committed.commit()
  emit('committed')

  const aborted = await producer.transaction()
  await aborted.send({ topic: out, messages: [...Array(5).keys()].map(i => ({ key: `k${i}`, value: `a-${i}` })) })
  await aborted.sendOffsets({ consumerGroupId: group, topics: [{ topic: input, partitions: [{ partition: 0, offset: '20' }] }] })
  await aborted.abort()
  emit('aborted')
  await producer.disconnect()

  const admin = kafka.admin()
  await admin.connect()
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [input] })
  const flat = {}
  for (const t of offsets) for (const p of t.partitions) flat[`${t.topic}-${p.partition}`] = Number(p.offset)
  emit('offsets', { offsets: flat })
  await admin.disconnect()

  const consumer = kafka.consumer({ groupId: `${group}-reader`, sessionTimeout: 10000, heartbeatInterval: 1000 })
  await consumer.connect()
  await consumer.subscribe({ topics: [out], fromBeginning: true })
  const values = []
  let last = Date.now()
  await consumer.run({
    eachMessage: async ({ message }) => {
      values.push(message.value.toString())
      last = Date.now()
    },
  })
  while (values.length < 10 || Date.now() - last < 2000) {
    await new Promise(r => setTimeout(r, 100))
  }
  await consumer.disconnect()
  emit('read', { values })
  return 0
}

const deadline = parseInt(process.env.KCOORD_NODE_DEADLINE_MS || '90000', 10)
setTimeout(() => {
  emit('error', { step: 'deadline', message: `no result after ${deadline} ms` })
  process.exit(3)
}, deadline).unref()

main(process.argv.slice(2)).then(
  rc => process.exit(rc),
  e => {
    emit('error', { step: 'main', error: (e && (e.type || e.name)) || String(e), message: e && e.message })
    process.exit(1)
  }
)
