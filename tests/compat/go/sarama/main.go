// A sarama client for the integration tests (Debian's golang-github-shopify-sarama-dev, sarama
// 1.22, built in GOPATH mode by tests/clientlib.py). It prints one JSON object per line.
//
//	sarama-client produce BOOTSTRAP TOPIC N PREFIX      N messages keyed k0..k(N-1), synchronously
//	sarama-client consume BOOTSTRAP TOPIC GROUP N       a group member until N messages arrived,
//	                                                    marking each; Close commits what was marked
//
// Sarama sends no ApiVersions request: it picks its request versions from config.Version
// (2.1 here: Produce v3, Fetch v4, JoinGroup v1, OffsetCommit v2, Metadata v5).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

func emit(kind string, fields map[string]interface{}) {
	fields["kind"] = kind
	b, _ := json.Marshal(fields)
	fmt.Println(string(b))
}

func fail(what string, err error) {
	emit("error", map[string]interface{}{"where": what, "error": err.Error()})
	os.Exit(1)
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.ClientID = "kcoord-sarama"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Metadata.Retry.Max = 60
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	return c
}

func produce(bootstrap, topic string, n int, prefix string) {
	p, err := sarama.NewSyncProducer([]string{bootstrap}, config())
	if err != nil {
		fail("producer", err)
	}
	for i := 0; i < n; i++ {
		value := fmt.Sprintf("%s-%d", prefix, i)
		part, off, err := p.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(value)})
		if err != nil {
			fail("send", err)
		}
		emit("produced", map[string]interface{}{"partition": part, "offset": off, "value": value})
	}
	if err := p.Close(); err != nil {
		fail("producer close", err)
	}
}

type member struct {
	mu     sync.Mutex
	want   int
	got    int
	cancel context.CancelFunc
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	emit("assigned", map[string]interface{}{"member": s.MemberID(), "generation": s.GenerationID(),
		"claims": s.Claims()})
	return nil
}

func (m *member) Cleanup(s sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		s.MarkMessage(msg, "")
		emit("consumed", map[string]interface{}{"partition": msg.Partition, "offset": msg.Offset,
			"key": string(msg.Key), "value": string(msg.Value)})
		m.mu.Lock()
		m.got++
		if m.got >= m.want {
			m.cancel()
		}
		m.mu.Unlock()
	}
	return nil
}

func consume(bootstrap, topic, group string, n int) {
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config())
	if err != nil {
		fail("consumer group", err)
	}
	go func() {
		for err := range g.Errors() {
			emit("group-error", map[string]interface{}{"error": err.Error()})
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{want: n, cancel: cancel}
	for ctx.Err() == nil {
		if err := g.Consume(ctx, []string{topic}, m); err != nil {
			emit("group-error", map[string]interface{}{"error": err.Error()})
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := g.Close(); err != nil {
		fail("consumer group close", err)
	}
	emit("closed", map[string]interface{}{"consumed": m.got})
}

func main() {
	a := os.Args
	if len(a) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sarama-client produce|consume ...")
		os.Exit(2)
	}
	atoi := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			fail("argument", err)
		}
		return v
	}
	switch {
	case a[1] == "produce" && len(a) == 6:
		produce(a[2], a[3], atoi(a[4]), a[5])
	case a[1] == "consume" && len(a) == 6:
		consume(a[2], a[3], a[4], atoi(a[5]))
	default:
		fmt.Fprintln(os.Stderr, "usage: sarama-client produce BOOTSTRAP TOPIC N PREFIX | consume BOOTSTRAP TOPIC GROUP N")
		os.Exit(2)
	}
}
