package emulator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// TestHelperCrashWriter is not a test: run by TestDurability_KillNine in a child process, it
// upserts documents forever and prints the id of each acknowledged write.
func TestHelperCrashWriter(t *testing.T) {
	dir := os.Getenv("CFP_EMULATOR_CRASH_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	e, err := emulator.Open(emulator.Options{Dir: dir})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "crash")
	for i := 0; ; i++ {
		pk := fmt.Sprintf("p%d", i%5)
		b, _ := json.Marshal(doc{ID: fmt.Sprintf("d%d", i), PK: pk, V: i})
		if _, err := cc.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), b, nil); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("acked d%d\n", i)
	}
}

// TestDurability_KillNine kills a writing process with SIGKILL and checks that every write it
// acknowledged is in the reopened data directory.
func TestDurability_KillNine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CFP_EMULATOR_CRASH_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() && len(acked) < 60 && time.Now().Before(deadline) {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "acked "); ok {
			acked[id] = true
		} else if strings.HasPrefix(line, "error:") {
			t.Fatalf("helper: %s", line)
		}
	}
	_ = cmd.Process.Kill() // SIGKILL
	// Writes acknowledged while we were killing it count too.
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			acked[id] = true
		}
	}
	_ = cmd.Wait()
	if len(acked) < 60 {
		t.Fatalf("helper acknowledged only %d writes", len(acked))
	}

	e := openEmu(t, emulator.Options{Dir: dir})
	c := newClient(t, e, "")
	cc, _ := c.NewContainer("db", "crash")
	got, _ := drainAll(t, cc)
	have := map[string]bool{}
	for _, d := range got {
		have[d.ID] = true
	}
	for id := range acked {
		if !have[id] {
			t.Errorf("acknowledged write %s lost after kill -9", id)
		}
	}
}
