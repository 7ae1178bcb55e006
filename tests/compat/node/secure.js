#!/usr/bin/env node
// kafkajs 2.2.4 against kcoord's secure listeners (tests/integration/test_security_clients.py).
//
//   node secure.js SCENARIOS.json
//
// The file is a list of scenarios, all run at once:
//   { "name", "bootstrap", "topic", "messages", "group", "expect": "consume" | "refuse",
//     "ssl": null | { "ca": PATH, "cert": PATH?, "key": PATH? },
//     "sasl": null | { "mechanism": "plain" | "scram-sha-256" | "scram-sha-512", "username", "password" } }
// consume: join the group, read `messages` records, commit, print
//          {"kind":"consumed","name","records","committed"}
// refuse:  connect and expect kafkajs to report the failure, print {"kind":"refused","name","error","message"}
// anything else: {"kind":"failed",...}. The whole run has a hard deadline (90 s).
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const DEADLINE_MS = 90000

function emit(kind, fields) {
  process.stdout.write(JSON.stringify({ kind, ...fields }) + '\n')
}

function withTimeout(promise, ms, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

function makeKafka(s) {
  let ssl = undefined
  if (s.ssl) {
    ssl = { ca: [fs.readFileSync(s.ssl.ca, 'utf-8')] }
    if (s.ssl.cert) ssl.cert = fs.readFileSync(s.ssl.cert, 'utf-8')
    if (s.ssl.key) ssl.key = fs.readFileSync(s.ssl.key, 'utf-8')
  }
  return new Kafka({
    clientId: `kcoord-secure-${s.name}`,
    brokers: [s.bootstrap],
    ssl,
    sasl: s.sasl || undefined,
    connectionTimeout: 5000,
    authenticationTimeout: 10000,
    requestTimeout: 15000,
    retry: { retries: s.expect === 'refuse' ? 0 : 5, initialRetryTime: 200, maxRetryTime: 2000 },
    logLevel: logLevel.NOTHING,
  })
}

async function consume(s) {
  const kafka = makeKafka(s)
  const consumer = kafka.consumer({ groupId: s.group, sessionTimeout: 10000, heartbeatInterval: 1000 })
  await withTimeout(consumer.connect(), 20000, 'connect')
  await withTimeout(consumer.subscribe({ topics: [s.topic], fromBeginning: true }), 20000, 'subscribe')
  let count = 0
  let finish
  const finished = new Promise(resolve => {
    finish = resolve
  })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      let last = null
      for (const m of batch.messages) {
        count++
        resolveOffset(m.offset)
        last = m.offset
      }
      if (last !== null) {
        await consumer.commitOffsets([
          { topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() },
        ])
      }
      if (count >= s.messages) finish()
    },
  })
  await withTimeout(finished, 60000, 'consuming')
  const admin = kafka.admin()
  await admin.connect()
  const offsets = await admin.fetchOffsets({ groupId: s.group, topics: [s.topic] })
  await admin.disconnect()
  await consumer.disconnect()
  const p0 = offsets[0].partitions.find(p => p.partition === 0)
  emit('consumed', { name: s.name, records: count, committed: Number(p0.offset) })
}

async function refuse(s) {
  const admin = makeKafka(s).admin()
  try {
    await withTimeout(admin.connect(), 20000, 'connect')
    await withTimeout(admin.listTopics(), 20000, 'listTopics')
    emit('failed', { name: s.name, error: 'not refused' })
  } catch (e) {
    emit('refused', { name: s.name, error: e.name || e.type || String(e), message: e.message })
  } finally {
    await admin.disconnect().catch(() => {})
  }
}

async function main() {
  const scenarios = JSON.parse(fs.readFileSync(process.argv[2], 'utf-8'))
  const deadline = setTimeout(() => {
    emit('failed', { name: '*', error: 'deadline' })
    process.exit(3)
  }, DEADLINE_MS)
  await Promise.all(
    scenarios.map(s =>
      (s.expect === 'refuse' ? refuse(s) : consume(s)).catch(e =>
        emit('failed', { name: s.name, error: e.name || String(e), message: e.message })
      )
    )
  )
  clearTimeout(deadline)
}

main().then(() => process.exit(0))
