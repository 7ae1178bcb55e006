#!/usr/bin/env node
// A kafkajs 2.2.4 client driven by kcoord's integration tests (tests/clientlib.py).
//
// Every line on stdout is one JSON object with a "kind" field; kafkajs logs go to stderr.
//
//   node client.js admin   BOOTSTRAP TOPIC PARTITIONS GROUP
//   node client.js produce BOOTSTRAP TOPIC N [gzip]
//   node client.js consume BOOTSTRAP TOPIC GROUP MAX_MESSAGES IDLE_MS
//
// Every call is bounded (connection/request timeouts, few retries) and the whole run has a hard
// deadline (KCOORD_NODE_DEADLINE_MS, default 90 s) after which the process exits with code 3.
'use strict'

// kafkajs 2 warns on every producer that its default partitioner changed in 2.0.0.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { CompressionTypes, Kafka, logLevel } = require('kafkajs')

const CALL_TIMEOUT_MS = 20000

function emit(kind, fields = {}) {
  process.stdout.write(JSON.stringify({ kind, ...fields }) + '\n')
}

function errorFields(e) {
  return { error: (e && (e.type || e.name)) || String(e), message: e && e.message }
}

function withTimeout(promise, ms, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

function stderrLogCreator() {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

function makeKafka(bootstrap, clientId) {
  return new Kafka({
    clientId,
    brokers: [bootstrap],
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
    logLevel: logLevel.WARN,
    logCreator: stderrLogCreator,
  })
}

// kafkajs keeps its cluster behind a Symbol-keyed private field; its own FindCoordinator code
// path (cluster.findGroupCoordinatorMetadata) is what consumers use, so reach it that way.
function privateCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  if (!sym) throw new Error('kafkajs internals changed: no private:Kafka:createCluster')
  return kafka[sym]({ allowAutoTopicCreation: false })
}

async function admin(bootstrap, topic, partitions, group) {
  const kafka = makeKafka(bootstrap, 'kcoord-kafkajs-admin')
  const adm = kafka.admin()
  let failures = 0
  const step = async (name, fn) => {
    try {
      await withTimeout(fn(), CALL_TIMEOUT_MS, name)
    } catch (e) {
      failures++
      emit('error', { step: name, ...errorFields(e) })
    }
  }
  await withTimeout(adm.connect(), CALL_TIMEOUT_MS, 'connect')

  await step('describeCluster', async () => {
    const c = await adm.describeCluster()
    emit('cluster', {
      cluster_id: c.clusterId,
      controller: c.controller,
      nodes: c.brokers.map(b => `${b.nodeId}@${b.host}:${b.port}`),
    })
  })
  await step('createTopics', async () => {
    const created = await adm.createTopics({
      topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 10000,
    })
    emit('created', { topic, created })
  })
  await step('createTopicsAgain', async () => {
    // kafkajs resolves false (not an error) when every topic already exists.
    const created = await adm.createTopics({
      topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
      waitForLeaders: false,
    })
    emit('create_again', { topic, created })
  })
  await step('listTopics', async () => {
    emit('topics', { names: (await adm.listTopics()).sort() })
  })
  await step('fetchTopicMetadata', async () => {
    const md = await adm.fetchTopicMetadata({ topics: [topic] })
    for (const t of md.topics) {
      emit('described', {
        name: t.name,
        partitions: t.partitions.length,
        leaders: t.partitions.sort((a, b) => a.partitionId - b.partitionId).map(p => p.leader),
      })
    }
  })
  await adm.disconnect()

  await step('findGroupCoordinator', async () => {
    const cluster = privateCluster(kafka)
    await cluster.connect()
    try {
      await cluster.refreshMetadata()
      const md = await cluster.findGroupCoordinatorMetadata({ groupId: group })
      emit('coordinator', {
        group,
        error_code: md.errorCode,
        node_id: md.coordinator.nodeId,
        host: md.coordinator.host,
        port: md.coordinator.port,
      })
    } finally {
      await cluster.disconnect()
    }
  })
  emit('done', { failures })
  return failures === 0 ? 0 : 1
}

// kafkajs 2 itself only has gzip (snappy, lz4 and zstd need codec plugins).
function codec(name) {
  if (name === undefined || name === 'none') return CompressionTypes.None
  if (name === 'gzip') return CompressionTypes.GZIP
  throw new Error(`kafkajs has no built-in ${name} codec`)
}

async function produce(bootstrap, topic, n, compression) {
  const kafka = makeKafka(bootstrap, 'kcoord-kafkajs-producer')
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await withTimeout(producer.connect(), CALL_TIMEOUT_MS, 'connect')
  const messages = []
  for (let i = 0; i < n; i++) messages.push({ key: `k${i}`, value: `v${i}` })
  let acked = 0
  const lastOffsets = {}
  try {
    const res = await withTimeout(
      producer.send({ topic, messages, acks: -1, timeout: 10000, compression: codec(compression) }),
      CALL_TIMEOUT_MS,
      'send'
    )
    for (const r of res) {
      if (r.errorCode !== 0) throw new Error(`partition ${r.partition} error ${r.errorCode}`)
    }
    acked = n
    for (const r of res) lastOffsets[r.partition] = Number(r.baseOffset)
  } catch (e) {
    emit('error', { step: 'send', ...errorFields(e) })
  } finally {
    await withTimeout(producer.disconnect(), 10000, 'disconnect').catch(() => {})
  }
  emit('produced', { topic, sent: n, acked, base_offsets: lastOffsets })
  return acked === n ? 0 : 1
}

async function consume(bootstrap, topic, group, maxMessages, idleMs) {
  const kafka = makeKafka(bootstrap, 'kcoord-kafkajs-consumer')
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    allowAutoTopicCreation: false,
    retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
  })
  let count = 0
  let commitFailures = 0
  // The idle clock starts at the first assignment: joining can take longer than IDLE_MS on a
  // busy machine, and a consumer that gave up before it was assigned tested nothing.
  let lastActivity = null
  consumer.on(consumer.events.GROUP_JOIN, e => {
    lastActivity = Date.now()
    const parts = []
    for (const [t, ps] of Object.entries(e.payload.memberAssignment)) {
      for (const p of ps) parts.push(`${t}-${p}`)
    }
    emit('assigned', {
      partitions: parts.sort(),
      member_id: e.payload.memberId,
      leader: e.payload.isLeader,
    })
  })
  consumer.on(consumer.events.CRASH, e => emit('crash', errorFields(e.payload.error)))
  await withTimeout(consumer.connect(), CALL_TIMEOUT_MS, 'connect')
  await withTimeout(consumer.subscribe({ topics: [topic], fromBeginning: true }), CALL_TIMEOUT_MS, 'subscribe')
  let finish
  const finished = new Promise(resolve => {
    finish = resolve
  })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      lastActivity = Date.now()
      let last = null
      for (const m of batch.messages) {
        if (count >= maxMessages) break
        count++
        emit('record', {
          topic: batch.topic,
          partition: batch.partition,
          offset: Number(m.offset),
          key: m.key && m.key.toString(),
          value: m.value && m.value.toString(),
        })
        resolveOffset(m.offset)
        last = m.offset
      }
      if (last !== null) {
        const next = (BigInt(last) + 1n).toString()
        try {
          await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }])
          emit('committed', { offsets: { [`${batch.topic}-${batch.partition}`]: Number(next) } })
        } catch (e) {
          commitFailures++
          emit('error', { step: 'commitOffsets', ...errorFields(e) })
        }
      }
      await heartbeat()
      if (count >= maxMessages) finish()
    },
  })
  const idleTimer = setInterval(() => {
    if (lastActivity !== null && Date.now() - lastActivity > idleMs) {
      emit('idle', { ms: idleMs })
      finish()
    }
  }, 100)
  await finished
  clearInterval(idleTimer)
  emit('closing', { count })
  await withTimeout(consumer.disconnect(), 15000, 'disconnect').catch(e =>
    emit('error', { step: 'disconnect', ...errorFields(e) })
  )
  emit('done', { count, commit_failures: commitFailures })
  return commitFailures === 0 ? 0 : 1
}

function usage() {
  process.stderr.write(
    'usage: client.js admin BOOTSTRAP TOPIC PARTITIONS GROUP\n' +
      '       client.js produce BOOTSTRAP TOPIC N [gzip]\n' +
      '       client.js consume BOOTSTRAP TOPIC GROUP MAX_MESSAGES IDLE_MS\n'
  )
  process.exit(2)
}

// Every record of TOPIC from the beginning (in a throwaway group: kafkajs has no assign()),
// keys and values as hex so binary records such as __consumer_offsets survive; stops when
// nothing arrived for IDLE_MS.
async function readHex(bootstrap, topic, group, idleMs) {
  const kafka = makeKafka(bootstrap, 'kcoord-kafkajs-reader')
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000 })
  let lastActivity = null // idle is counted from the assignment on (joining may be slow)
  consumer.on(consumer.events.GROUP_JOIN, () => {
    lastActivity = Date.now()
  })
  await withTimeout(consumer.connect(), CALL_TIMEOUT_MS, 'connect')
  await withTimeout(consumer.subscribe({ topics: [topic], fromBeginning: true }), CALL_TIMEOUT_MS, 'subscribe')
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      lastActivity = Date.now()
      emit('record', {
        partition,
        offset: Number(message.offset),
        key: message.key && message.key.toString('hex'),
        value: message.value && message.value.toString('hex'),
      })
    },
  })
  while (lastActivity === null || Date.now() - lastActivity < idleMs) {
    await new Promise(r => setTimeout(r, 100))
  }
  await withTimeout(consumer.disconnect(), 15000, 'disconnect').catch(() => {})
  emit('done', {})
  return 0
}

async function main(argv) {
  const [mode, ...a] = argv
  switch (mode) {
    case 'admin':
      if (a.length < 4) usage()
      return admin(a[0], a[1], parseInt(a[2], 10), a[3])
    case 'produce':
      if (a.length < 3) usage()
      return produce(a[0], a[1], parseInt(a[2], 10), a[3])
    case 'consume':
      if (a.length < 5) usage()
      return consume(a[0], a[1], a[2], parseInt(a[3], 10), parseInt(a[4], 10))
    case 'readhex':
      if (a.length < 4) usage()
      return readHex(a[0], a[1], a[2], parseInt(a[3], 10))
    default:
      return usage()
  }
}

const deadline = parseInt(process.env.KCOORD_NODE_DEADLINE_MS || '90000', 10)
setTimeout(() => {
  emit('error', { step: 'deadline', error: 'deadline', message: `no result after ${deadline} ms` })
  process.exit(3)
}, deadline).unref()

main(process.argv.slice(2)).then(
  rc => process.exit(rc),
  e => {
    emit('error', { step: 'main', ...errorFields(e) })
    process.exit(1)
  }
)
