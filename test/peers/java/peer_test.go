//go:build unix

package java

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/testproc"
)

// Names of the emulator's database and containers.
const (
	database  = "shop"
	feedName  = "orders"
	leaseName = "leases"
)

// Lease timings of every host, Java and cfp alike (milliseconds for Java).
const (
	acquireInterval = time.Second
	renewInterval   = time.Second
	leaseExpiration = 5 * time.Second
	pollInterval    = 200 * time.Millisecond
)

// jarName is what build.sh builds.
const jarName = "target/cfp-java-peer.jar"

// trustPassword protects the throwaway trust store; it guards nothing (a trust store holds only
// the emulator's public certificate), but keytool wants one.
const trustPassword = "cfp-peer"

// rig is one test's world: the cfp binary, a `cfp emulator` serving TLS on a loopback port
// with 4 partitions per container, a Java trust store of its certificate, and an account open
// on it.
type rig struct {
	t        *testing.T
	dir      string
	bin      string // the cfp binary
	java     string
	jar      string
	emu      *testproc.Emulator
	endpoint string // https://127.0.0.1:PORT/
	pem      string // the emulator's certificate
	trust    string // a PKCS12 trust store of pem
	acct     *account.Account
}

// tools finds java, keytool and the jar (building it when missing or older than its sources).
// Without java or mvn the test is skipped, or failed under CI=true.
func tools(t *testing.T) (javaBin, keytool, jar string) {
	t.Helper()
	missing := func(what string, err error) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing: %v", what, err)
		}
		t.Skipf("%s is missing (%v): the Java peers need Java 17 and Maven", what, err)
	}
	javaBin, err := exec.LookPath("java")
	if err != nil {
		missing("java", err)
	}
	keytool, err = exec.LookPath("keytool")
	if err != nil {
		missing("keytool", err)
	}
	jar, err = filepath.Abs(jarName)
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err := jarFresh(jar); err != nil {
		t.Fatal(err)
	} else if fresh {
		return javaBin, keytool, jar
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		missing("mvn", err)
	}
	start := time.Now()
	out, err := exec.Command("./build.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", jarName, time.Since(start).Round(time.Second))
	return javaBin, keytool, jar
}

// jarFresh reports whether jar exists and is newer than pom.xml and every file under src.
func jarFresh(jar string) (bool, error) {
	st, err := os.Stat(jar)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	fresh := true
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == "target" {
			return filepath.SkipDir
		}
		if d.IsDir() || !(path == "pom.xml" || strings.HasPrefix(path, "src"+string(filepath.Separator))) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.ModTime().After(st.ModTime()) {
			fresh = false
		}
		return nil
	})
	return fresh, err
}

// newRig builds cfp, serves the emulator, makes the trust store and creates the database, the
// monitored container (/pk, 4 partitions) and the lease container (/id).
func newRig(t *testing.T) *rig {
	t.Helper()
	javaBin, keytool, jar := tools(t)
	r := &rig{t: t, dir: t.TempDir(), java: javaBin, jar: jar}
	if keep := os.Getenv("CFP_PEERS_KEEP"); keep != "" {
		// The hosts' outputs and logs and the emulator's log stay for a look after the run.
		dir, err := os.MkdirTemp(keep, strings.ReplaceAll(t.Name(), "/", "_")+"-")
		if err != nil {
			t.Fatal(err)
		}
		r.dir = dir
		t.Logf("run directory %s", dir)
	}
	bin, err := testproc.Build(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	r.bin = bin
	logName := filepath.Join(r.dir, "emulator.log")
	e, err := testproc.StartEmulator(bin, testproc.EmulatorOptions{
		Data:         filepath.Join(r.dir, "data"),
		Args:         []string{"--partitions", "4", "--log-level", "debug", "--log-format", "json"},
		Log:          logName,
		StartTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.emu = e
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("emulator log, last lines:\n%s", testproc.Tail(logName, 40))
		}
	})
	r.endpoint = strings.Replace(e.Endpoint, "http://", "https://", 1)
	r.pem = filepath.Join(r.dir, "data", "emulator.pem")
	r.trust = filepath.Join(r.dir, "trust.p12")
	out, err := exec.Command(keytool, "-importcert", "-noprompt", "-alias", "cfp-emulator",
		"-file", r.pem, "-keystore", r.trust, "-storetype", "PKCS12", "-storepass", trustPassword).CombinedOutput()
	if err != nil {
		t.Fatalf("keytool: %v\n%s", err, out)
	}

	ctx := context.Background()
	acct, err := account.Open(ctx, account.Config{Endpoint: r.endpoint, Key: e.Key, CAFile: r.pem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acct.Close() })
	r.acct = acct
	if err := acct.CreateDatabaseIfNotExists(ctx, database); err != nil {
		t.Fatal(err)
	}
	if _, err := acct.CreateContainerIfNotExists(ctx, database, feedName, "/pk", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := acct.CreateContainerIfNotExists(ctx, database, leaseName, "/id", nil); err != nil {
		t.Fatal(err)
	}
	return r
}

// write upserts documents ids[from:to] ("doc-0000", ...), each in its own logical partition.
func (r *rig) write(from, to int) {
	r.t.Helper()
	c := r.acct.Container(database, feedName)
	for i := from; i < to; i++ {
		id := docID(i)
		body := fmt.Sprintf(`{"id":%q,"pk":%q,"n":%d}`, id, "pk-"+id, i)
		if err := c.UpsertItem(context.Background(), "pk-"+id, []byte(body)); err != nil {
			r.t.Fatal(err)
		}
	}
}

func docID(i int) string { return fmt.Sprintf("doc-%04d", i) }

// host is a running Java or cfp host.
type host struct {
	name  string
	kind  string // "java" or "cfp"
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string // its stdout file: one JSON line per delivered change
	log   string // its stderr file
	done  chan struct{}
	err   error
}

// startJava starts a Java host of the EPK (or "pkrange") lease family named instance, on the
// lease prefix processor.
func (r *rig) startJava(processor, instance, family string, more ...string) *host {
	r.t.Helper()
	args := append(r.javaArgs("process"),
		"--prefix", processor, "--instance", instance, "--family", family,
		"--from", "beginning",
		"--acquire", fmt.Sprint(acquireInterval.Milliseconds()),
		"--renew", fmt.Sprint(renewInterval.Milliseconds()),
		"--expiration", fmt.Sprint(leaseExpiration.Milliseconds()),
		"--poll", fmt.Sprint(pollInterval.Milliseconds()),
	)
	cmd := exec.Command(r.java, append(args, more...)...)
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
	return r.start("java", instance, cmd)
}

// startCFP starts `cfp process` named instance on processor, its changes as JSON lines.
func (r *rig) startCFP(processor, instance string, more ...string) *host {
	r.t.Helper()
	cmd := exec.Command(r.bin, append([]string{"process",
		"--endpoint", r.endpoint, "--ca-file", r.pem,
		"-d", database, "-c", feedName, "--lease-container", leaseName,
		"-p", processor, "--instance", instance,
		"--from", "beginning",
		"--lease-acquire-interval", acquireInterval.String(),
		"--lease-renew-interval", renewInterval.String(),
		"--lease-expiration", leaseExpiration.String(),
		"--poll-interval", pollInterval.String(),
		"--events", "jsonl", "--log-level", "info",
	}, more...)...)
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
	return r.start("cfp", instance, cmd)
}

func (r *rig) start(kind, name string, cmd *exec.Cmd) *host {
	r.t.Helper()
	h := &host{name: name, kind: kind, cmd: cmd, done: make(chan struct{}),
		out: filepath.Join(r.dir, kind+"-"+name+".jsonl"), log: filepath.Join(r.dir, kind+"-"+name+".log")}
	outf, err := os.Create(h.out)
	if err != nil {
		r.t.Fatal(err)
	}
	defer outf.Close()
	logf, err := os.Create(h.log)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = outf, logf
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		r.t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start %s host %s: %v", kind, name, err)
	}
	go func() {
		h.err = cmd.Wait()
		close(h.done)
	}()
	r.t.Cleanup(func() {
		h.kill()
		if r.t.Failed() {
			r.t.Logf("%s host %s log, last lines:\n%s", kind, name, testproc.Tail(h.log, 30))
		}
	})
	return h
}

// stop ends a host gracefully (the Java host on the end of its stdin, cfp on SIGINT), so that
// it releases its leases, and fails the test if it does not exit cleanly within a minute.
func (h *host) stop(t *testing.T) {
	t.Helper()
	if h.kind == "java" {
		_ = h.stdin.Close()
	} else {
		_ = h.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-h.done:
	case <-time.After(time.Minute):
		h.kill()
		t.Fatalf("%s host %s did not stop within a minute; killed\n%s", h.kind, h.name, testproc.Tail(h.log, 30))
	}
	if h.err != nil {
		t.Errorf("%s host %s: %v\n%s", h.kind, h.name, h.err, testproc.Tail(h.log, 30))
	}
}

// kill SIGKILLs the host's process group, if it still runs, and waits for it.
func (h *host) kill() {
	select {
	case <-h.done:
		return
	default:
	}
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	<-h.done
}

func (h *host) exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// delivered reads the changes the host printed: the count of deliveries of each id.
func (h *host) delivered(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(h.out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ch struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(line, &ch); err != nil || ch.ID == "" {
			// The last line may be half written while the host runs.
			continue
		}
		seen[ch.ID]++
	}
	return seen
}

// lease is what the tests read of a lease document.
type lease struct {
	ID           string `json:"id"`
	Token        string `json:"LeaseToken"`
	Owner        string `json:"Owner"`
	Continuation string `json:"ContinuationToken"`
	Version      *int   `json:"version"`
	Timestamp    string `json:"timestamp"`
}

// leases lists the lease documents ("<prefix>..<token>") of processor's set.
func (r *rig) leases(processor string) []lease {
	r.t.Helper()
	var out []lease
	err := r.acct.Container(database, leaseName).Query(context.Background(),
		"SELECT * FROM c WHERE STARTSWITH(c.id, @p)", map[string]any{"@p": processor}, func(raw []byte) error {
			var l lease
			if err := json.Unmarshal(raw, &l); err != nil {
				return err
			}
			if strings.Contains(l.ID, "..") {
				out = append(out, l)
			}
			return nil
		})
	if err != nil {
		r.t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Token < out[j].Token })
	return out
}

// owners counts the leases of processor by owner ("" for unowned).
func (r *rig) owners(processor string) map[string]int {
	n := map[string]int{}
	for _, l := range r.leases(processor) {
		n[l.Owner]++
	}
	return n
}

// waitFor polls cond every 200ms until it holds or d passes, when it fails the test with what
// describe says of the state.
func (r *rig) waitFor(d time.Duration, what string, cond func() bool, describe func() string, hosts ...*host) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		for _, h := range hosts {
			if h.exited() {
				r.t.Fatalf("%s host %s exited while waiting for %s: %v\n%s", h.kind, h.name, what, h.err, testproc.Tail(h.log, 30))
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s within %v: %s", what, d, describe())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// union merges hosts' deliveries: the count of deliveries of each id over all of them.
func union(t *testing.T, hosts ...*host) map[string]int {
	all := map[string]int{}
	for _, h := range hosts {
		for id, n := range h.delivered(t) {
			all[id] += n
		}
	}
	return all
}

// coverage counts, over ids[0:n], those delivered at least once (got), those never (lost),
// and the deliveries beyond the first (dups).
func coverage(seen map[string]int, n int) (got, lost, dups int) {
	for i := range n {
		c := seen[docID(i)]
		if c == 0 {
			lost++
			continue
		}
		got++
		dups += c - 1
	}
	return got, lost, dups
}

// javaArgs are the JVM flags of every Java run: the trust store of the emulator's certificate
// (certificate checks stay on), the SDK's warnings only, a quick start.
func (r *rig) javaArgs(mode string) []string {
	return []string{
		"-Djavax.net.ssl.trustStore=" + r.trust,
		"-Djavax.net.ssl.trustStorePassword=" + trustPassword,
		"-Djavax.net.ssl.trustStoreType=PKCS12",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", r.jar, "dev.cfp.peer.Main", mode,
		"--endpoint", r.endpoint,
		"--database", database, "--container", feedName, "--lease-container", leaseName,
	}
}

// javaState is one lease of the Java estimator's getCurrentState.
type javaState struct {
	Lease        string `json:"lease"`
	Owner        string `json:"owner"`
	Lag          int64  `json:"lag"`
	Continuation string `json:"continuation"`
}

// javaEstimate runs the Java estimator on processor's leases.
func (r *rig) javaEstimate(processor string) []javaState {
	r.t.Helper()
	args := append(r.javaArgs("estimate"), "--prefix", processor, "--family", "epk")
	cmd := exec.Command(r.java, args...)
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("java estimate: %v\n%s", err, stderr.Bytes())
	}
	var res struct {
		States []javaState `json:"states"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		r.t.Fatalf("java estimate printed %q: %v", out, err)
	}
	sort.Slice(res.States, func(i, j int) bool { return res.States[i].Lease < res.States[j].Lease })
	return res.States
}

// cfpLag is one lease of `cfp estimate -o json`.
type cfpLag struct {
	Lease    string  `json:"lease"`
	Lag      int64   `json:"lag"`
	Sentinel *string `json:"sentinel"`
	Latest   *int64  `json:"latest_lsn"`
	Check    *int64  `json:"checkpoint_lsn"`
}

// cfpEstimate runs `cfp estimate --formula formula -o json` on processor's leases.
func (r *rig) cfpEstimate(processor, formula string) []cfpLag {
	r.t.Helper()
	cmd := exec.Command(r.bin, "estimate", "--endpoint", r.endpoint, "--ca-file", r.pem,
		"-d", database, "-c", feedName, "--lease-container", leaseName, "-p", processor,
		"--formula", formula, "-o", "json")
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("cfp estimate --formula %s: %v\n%s", formula, err, stderr.Bytes())
	}
	var res struct {
		Leases []cfpLag `json:"leases"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		r.t.Fatalf("cfp estimate printed %q: %v", out, err)
	}
	sort.Slice(res.Leases, func(i, j int) bool { return res.Leases[i].Lease < res.Leases[j].Lease })
	return res.Leases
}

// leaseOf returns the lease token under which the host last delivered id ("" if it did not,
// or if its lines carry no lease).
func (h *host) leaseOf(t *testing.T, id string) string {
	t.Helper()
	b, err := os.ReadFile(h.out)
	if err != nil {
		t.Fatal(err)
	}
	lease := ""
	for line := range bytes.Lines(b) {
		var ch struct {
			Lease string `json:"lease"`
			ID    string `json:"id"`
		}
		if json.Unmarshal(line, &ch) == nil && ch.ID == id {
			lease = ch.Lease
		}
	}
	return lease
}
