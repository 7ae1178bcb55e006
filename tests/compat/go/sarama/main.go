// A sarama client for the integration tests (Debian's golang-github-shopify-sarama-dev, sarama
// 1.22, built in GOPATH mode by tests/clientlib.py). It prints one JSON object per line.
//
//	sarama-client produce BOOTSTRAP TOPIC N PREFIX      N messages keyed k0..k(N-1), synchronously
//	sarama-client consume BOOTSTRAP TOPIC GROUP N       a group member until N messages arrived,
//	                                                    marking each; Close commits what was marked
//	sarama-client member BOOTSTRAP TOPIC GROUP NAME     a roundrobin group member until "close" or
//	                                                    the end of stdin, printing what
//	                                                    tests/clientlib.py's members print (assigned,
//	                                                    revoked, records, closed); Close sends LeaveGroup
//	sarama-client readhex BOOTSTRAP TOPIC PARTITION     one partition from its start to its end
//	                                                    (no group), keys and values in hex
//
// BOOTSTRAP is host:port or a comma-separated list of them (a cluster's nodes).
//
// Sarama sends no ApiVersions request: it picks its request versions from config.Version
// (2.1 here: Produce v3, Fetch v4, JoinGroup v1, OffsetCommit v2, Metadata v5).
//
// Security from the environment: KCOORD_SASL_MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
// KCOORD_SASL_USER, KCOORD_SASL_PASSWORD; KCOORD_TLS_CA (PEM) turns TLS on, KCOORD_TLS_CERT and
// KCOORD_TLS_KEY add a client certificate. Sarama's own log goes to stderr (why a connection
// failed is only there).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
	"github.com/xdg-go/scram"
)

var emitting sync.Mutex

// brokers is a BOOTSTRAP argument's list: host:port[,host:port...] (a cluster's nodes).
func brokers(bootstrap string) []string { return strings.Split(bootstrap, ",") }

func emit(kind string, fields map[string]interface{}) {
	fields["kind"] = kind
	b, _ := json.Marshal(fields)
	emitting.Lock()
	fmt.Println(string(b))
	emitting.Unlock()
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
	if n := os.Getenv("KCOORD_METADATA_RETRIES"); n != "" { // a refusal test gives up sooner
		c.Metadata.Retry.Max, _ = strconv.Atoi(n)
	}
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	secure(c)
	return c
}

// scramClient is sarama's SCRAMClient on xdg-go/scram (sarama leaves SCRAM to the user).
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *scramClient) Done() bool                            { return s.conv.Done() }

func secure(c *sarama.Config) {
	if mech := os.Getenv("KCOORD_SASL_MECHANISM"); mech != "" {
		c.Net.SASL.Enable = true
		c.Net.SASL.Handshake = true
		c.Net.SASL.Mechanism = sarama.SASLMechanism(mech)
		c.Net.SASL.User = os.Getenv("KCOORD_SASL_USER")
		c.Net.SASL.Password = os.Getenv("KCOORD_SASL_PASSWORD")
		switch mech {
		case "SCRAM-SHA-256":
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
		case "SCRAM-SHA-512":
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
		}
	}
	if ca := os.Getenv("KCOORD_TLS_CA"); ca != "" {
		pem, err := ioutil.ReadFile(ca)
		if err != nil {
			fail("TLS CA", err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		t := &tls.Config{RootCAs: pool}
		if cert := os.Getenv("KCOORD_TLS_CERT"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, os.Getenv("KCOORD_TLS_KEY"))
			if err != nil {
				fail("TLS client certificate", err)
			}
			t.Certificates = []tls.Certificate{pair}
		}
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = t
	}
}

func produce(bootstrap, topic string, n int, prefix string) {
	p, err := sarama.NewSyncProducer(brokers(bootstrap), config())
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

// counting is the consume command's handler: it ends the run once `want` messages arrived.
type counting struct {
	mu     sync.Mutex
	want   int
	got    int
	cancel context.CancelFunc
}

func (m *counting) Setup(s sarama.ConsumerGroupSession) error {
	emit("assigned", map[string]interface{}{"member": s.MemberID(), "generation": s.GenerationID(),
		"claims": s.Claims()})
	return nil
}

func (m *counting) Cleanup(s sarama.ConsumerGroupSession) error { return nil }

func (m *counting) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
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

// runGroup is a group member's life: consume `topic` with `h` until ctx ends (a failed
// session is reported as `errKind` and retried), then Close: it commits what was marked and
// sends LeaveGroup.
func runGroup(ctx context.Context, bootstrap, group, topic string, c *sarama.Config, h sarama.ConsumerGroupHandler,
	errKind string) {
	g, err := sarama.NewConsumerGroup(brokers(bootstrap), group, c)
	if err != nil {
		fail("consumer group", err)
	}
	go func() {
		for err := range g.Errors() {
			emit(errKind, map[string]interface{}{"error": err.Error()})
		}
	}()
	for ctx.Err() == nil {
		if err := g.Consume(ctx, []string{topic}, h); err != nil {
			emit(errKind, map[string]interface{}{"error": err.Error()})
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := g.Close(); err != nil {
		fail("consumer group close", err)
	}
}

func consume(bootstrap, topic, group string, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &counting{want: n, cancel: cancel}
	runGroup(ctx, bootstrap, group, topic, config(), m, "group-error")
	emit("closed", map[string]interface{}{"consumed": m.got})
}

// listener prints a member's life as tests/clientlib.py's Background reads it.
type listener struct{ topic string }

func (l *listener) Setup(s sarama.ConsumerGroupSession) error {
	emit("assigned", map[string]interface{}{"partitions": s.Claims()[l.topic], "generation": s.GenerationID()})
	return nil
}

func (l *listener) Cleanup(s sarama.ConsumerGroupSession) error {
	emit("revoked", map[string]interface{}{"partitions": s.Claims()[l.topic]})
	return nil
}

func (l *listener) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		s.MarkMessage(msg, "")
		emit("records", map[string]interface{}{"records": [][]interface{}{{msg.Partition, msg.Offset, string(msg.Key)}}})
	}
	return nil
}

func runMember(bootstrap, topic, group, name string) {
	c := config()
	c.ClientID = name
	c.Consumer.Group.Rebalance.Strategy = sarama.BalanceStrategyRoundRobin // as the Python members
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	c.Consumer.Group.Heartbeat.Interval = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // a line ("close") or the end of stdin ends the member
		os.Stdin.Read(make([]byte, 64))
		cancel()
	}()
	runGroup(ctx, bootstrap, group, topic, c, &listener{topic: topic}, "error")
	emit("closed", map[string]interface{}{})
}

func readhex(bootstrap, topic string, partition int32) {
	client, err := sarama.NewClient(brokers(bootstrap), config())
	if err != nil {
		fail("client", err)
	}
	end, err := client.GetOffset(topic, partition, sarama.OffsetNewest)
	if err != nil {
		fail("end offset", err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		fail("consumer", err)
	}
	if end > 0 {
		pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
		if err != nil {
			fail("consume partition", err)
		}
		for msg := range pc.Messages() {
			emit("record", map[string]interface{}{"partition": msg.Partition, "offset": msg.Offset,
				"key": hex.EncodeToString(msg.Key), "value": hex.EncodeToString(msg.Value)})
			if msg.Offset >= end-1 {
				break
			}
		}
		pc.Close()
	}
	consumer.Close()
	client.Close()
	emit("done", map[string]interface{}{"end": end})
}

func main() {
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags)
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
	case a[1] == "member" && len(a) == 6:
		runMember(a[2], a[3], a[4], a[5])
	case a[1] == "readhex" && len(a) == 5:
		readhex(a[2], a[3], int32(atoi(a[4])))
	default:
		fmt.Fprintln(os.Stderr, "usage: sarama-client produce BOOTSTRAP TOPIC N PREFIX | consume BOOTSTRAP TOPIC GROUP N"+
			" | member BOOTSTRAP TOPIC GROUP NAME | readhex BOOTSTRAP TOPIC PARTITION")
		os.Exit(2)
	}
}
