// Package realkafka runs a real Apache Kafka broker for the tests: a
// single-node KRaft broker and controller of the pinned release (jars.txt,
// fetched from Maven Central into a git-ignored cache by Fetch), on free
// loopback ports, with a PLAINTEXT listener and a SASL_SSL listener (a
// throwaway CA, PLAIN and SCRAM-SHA-256/512 users created when the storage
// is formatted). It needs Java 17.
//
// One broker serves the tests of a run: cmd/withkafka starts it around
// `go test` (make test) and passes it on in $QUIVER_KAFKA_BROKER; without
// it each test binary starts its own at first use (Shared) and stops it
// when it ends (Main).
package realkafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"
)

// User is the SASL user of the SASL_SSL listener, for PLAIN, SCRAM-SHA-256
// and SCRAM-SHA-512 alike.
const User = "quiver"

// startTimeout bounds a broker start, from the JVM's launch to a broker
// that answers metadata requests.
const startTimeout = 2 * time.Minute

// Broker is a running broker. Its exported fields describe it (and are
// what $QUIVER_KAFKA_BROKER's file holds).
type Broker struct {
	Plain        string `json:"plain"`         // PLAINTEXT listener, host:port
	SASLSSL      string `json:"sasl_ssl"`      // SASL_SSL listener, host:port
	CAFile       string `json:"ca_file"`       // PEM CA of the SASL_SSL listener's certificate
	Password     string `json:"password"`      // of User
	PasswordFile string `json:"password_file"` // holds Password
	Dir          string `json:"dir"`           // config, certificates, data and broker.log

	controller string
	jars       string
	cmd        *exec.Cmd
	exited     chan struct{}
}

// ErrNoJava: java is not on PATH; tests report it with reftool.Missing.
var ErrNoJava = errors.New("java (17 or later) is not on PATH: apt-get install -y openjdk-17-jre-headless (.ci/run installs it)")

// Start fetches the jars when missing, formats a new KRaft storage in a
// temporary folder and starts the broker.
func Start() (*Broker, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, ErrNoJava
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	jars, err := Fetch(cache)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "quiver-kafka-")
	if err != nil {
		return nil, err
	}
	b := &Broker{Dir: dir, jars: jars, CAFile: filepath.Join(dir, "ca.pem"), Password: secret(), PasswordFile: filepath.Join(dir, "password")}
	if err := b.setup(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := b.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

func secret() string {
	var p [12]byte
	_, _ = rand.Read(p[:])
	return hex.EncodeToString(p[:])
}

// setup writes the certificates and server.properties and formats the
// storage with the SCRAM credentials of User.
func (b *Broker) setup() error {
	if err := writeCerts(b.CAFile, filepath.Join(b.Dir, "server.pem")); err != nil {
		return err
	}
	if err := os.WriteFile(b.PasswordFile, []byte(b.Password+"\n"), 0o600); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	b.Plain, b.SASLSSL, b.controller = ports[0], ports[1], ports[2]
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@%[3]s
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://%[1]s,SASL_SSL://%[2]s,CONTROLLER://%[3]s
advertised.listeners=PLAINTEXT://%[1]s,SASL_SSL://%[2]s
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=%[4]s
num.partitions=3
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
group.initial.rebalance.delay.ms=0
ssl.keystore.type=PEM
ssl.keystore.location=%[5]s
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_%[6]s="%[7]s";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
`, b.Plain, b.SASLSSL, b.controller, filepath.Join(b.Dir, "data"), filepath.Join(b.Dir, "server.pem"), User, b.Password)
	if err := os.WriteFile(b.props(), []byte(props), 0o600); err != nil {
		return err
	}
	// A Kafka Uuid, as kafka-storage random-uuid makes one: never with a
	// leading '-', which the tool's argument parser reads as an option.
	var clusterID string
	for clusterID == "" || clusterID[0] == '-' {
		var id [16]byte
		_, _ = rand.Read(id[:])
		clusterID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	out, err := exec.Command("java", "-cp", b.classpath(), "kafka.tools.StorageTool", "format", "-t", clusterID, "-c", b.props(),
		"--add-scram", fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s]", User, b.Password),
		"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", User, b.Password)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("realkafka: format storage: %w\n%s", err, out)
	}
	return nil
}

func (b *Broker) props() string     { return filepath.Join(b.Dir, "server.properties") }
func (b *Broker) classpath() string { return filepath.Join(b.jars, "*") }

// launch starts the JVM and waits until the broker answers metadata
// requests on its PLAINTEXT listener.
func (b *Broker) launch() error {
	log, err := os.OpenFile(filepath.Join(b.Dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	b.cmd = exec.Command("java", "-Xms256m", "-Xmx512m", "-cp", b.classpath(), "kafka.Kafka", b.props())
	b.cmd.Stdout, b.cmd.Stderr = log, log
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the tests
	if err := b.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("realkafka: start java: %w", err)
	}
	b.exited = make(chan struct{})
	go func() {
		_ = b.cmd.Wait()
		log.Close()
		close(b.exited)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(b.Plain) && transactionsReady(b.Plain) {
			return nil
		}
		select {
		case <-b.exited:
			return fmt.Errorf("realkafka: the broker exited while starting:\n%s", b.logTail())
		case <-ctx.Done():
			b.Kill()
			return fmt.Errorf("realkafka: the broker did not answer within %s:\n%s", startTimeout, b.logTail())
		case <-tick.C:
		}
	}
}

// ready reports whether the broker at addr answers a metadata request
// listing itself.
func ready(addr string) bool {
	c := sarama.NewConfig()
	c.Net.DialTimeout = time.Second
	c.Metadata.Retry.Max = 0
	cl, err := sarama.NewClient([]string{addr}, c)
	if err != nil {
		return false
	}
	defer cl.Close()
	_, err = cl.Controller()
	return err == nil && len(cl.Brokers()) > 0
}

// transactionsReady reports whether the broker's transaction coordinator
// gives out a transactional producer id. A fresh broker creates and loads
// __transaction_state at the first request and answers
// COORDINATOR_LOAD_IN_PROGRESS until then, which tests would otherwise
// meet as a transient failure of their first commit.
func transactionsReady(addr string) bool {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.Net.DialTimeout = time.Second
	c.Producer.Idempotent, c.Producer.RequiredAcks, c.Net.MaxOpenRequests = true, sarama.WaitForAll, 1
	c.Producer.Return.Successes = true
	c.Producer.Transaction.ID = "realkafka-warmup"
	p, err := sarama.NewSyncProducer([]string{addr}, c)
	if err != nil {
		return false
	}
	_ = p.Close()
	return true
}

// logTail is the end of broker.log, for errors.
func (b *Broker) logTail() string {
	out, _ := os.ReadFile(filepath.Join(b.Dir, "broker.log"))
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return string(bytes.TrimSpace(out))
}

// Relaunch starts a killed broker again on the same ports and data and
// waits until it serves transactions.
func (b *Broker) Relaunch() error { return b.launch() }

// Pid is the broker's process id (0 before it started), for measuring
// its CPU time.
func (b *Broker) Pid() int {
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Kill kills the broker (SIGKILL: no clean shutdown) and waits for it to
// exit; its ports refuse connections until Relaunch.
func (b *Broker) Kill() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// Stop stops the broker and removes its folder.
func (b *Broker) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(15 * time.Second):
			b.Kill()
		}
	}
	os.RemoveAll(b.Dir)
}

// freePorts returns n loopback addresses with free ports.
func freePorts(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// Env names the file describing a broker that cmd/withkafka started for
// the whole run.
const Env = "QUIVER_KAFKA_BROKER"

// WriteState writes b's description to path, for Env.
func (b *Broker) WriteState(path string) error {
	out, err := json.Marshal(b)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

var shared struct {
	once  sync.Once
	b     *Broker
	owned bool
	err   error
}

// Shared returns the broker of the run: the one $QUIVER_KAFKA_BROKER
// describes, or one this process starts at its first call (Main stops it).
func Shared() (*Broker, error) {
	shared.once.Do(func() {
		if path := os.Getenv(Env); path != "" {
			var b Broker
			raw, err := os.ReadFile(path)
			if err == nil {
				err = json.Unmarshal(raw, &b)
			}
			if err != nil {
				shared.err = fmt.Errorf("realkafka: %s=%s: %w", Env, path, err)
			}
			shared.b = &b
			return
		}
		shared.b, shared.err = Start()
		shared.owned = shared.err == nil
	})
	return shared.b, shared.err
}

// Runner is what TestMain runs (*testing.M).
type Runner interface{ Run() int }

type mainRunner struct{ m Runner }

func (r mainRunner) Run() int {
	code := r.m.Run()
	StopShared()
	return code
}

// StopShared stops the broker Shared started, if it started one.
func StopShared() {
	if shared.owned {
		shared.b.Stop()
	}
}

// Main wraps a test binary's *testing.M so that a broker Shared started
// is stopped when the tests end: goleak.VerifyTestMain(realkafka.Main(m)).
func Main(m Runner) Runner { return mainRunner{m} }
