package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// staticBinary builds a tiny static Go program for the host's architecture.
func staticBinary(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestImage_CheckAcceptsTheBuiltImageAndRejectsRoot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds a linux binary for the host architecture")
	}
	bin := staticBinary(t)
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	when := time.Unix(0, 0).UTC()
	img, err := image(bin, []byte("certs"), nil, p, labels("v", "r", when, false), when)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkImage(img, p, false); err != nil {
		t.Fatalf("checkImage on the built image: %v", err)
	}
	other := v1.Platform{OS: "linux", Architecture: map[string]string{"amd64": "arm64"}[runtime.GOARCH]}
	if other.Architecture == "" {
		other.Architecture = "amd64"
	}
	if err := checkImage(img, other, false); err == nil {
		t.Errorf("checkImage accepted the image as %s", other.Architecture)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Config.User = "0"
	root, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkImage(root, p, false); err == nil || !strings.Contains(err.Error(), "non-root") {
		t.Errorf("checkImage on a root image: %v, want a non-root error", err)
	}
}

func TestCheckStatic_RejectsADynamicBinary(t *testing.T) {
	b, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	if err := checkStatic(b, runtime.GOARCH); err == nil {
		t.Error("checkStatic accepted /bin/sh (dynamically linked)")
	}
}

func TestImage_ShellVariantHoldsAStaticShell(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds a linux binary for the host architecture")
	}
	bin := staticBinary(t)
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	when := time.Unix(0, 0).UTC()
	scratch, err := image(bin, []byte("certs"), nil, p, labels("v", "r", when, false), when)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkImage(scratch, p, true); err == nil || !strings.Contains(err.Error(), "/bin/sh") {
		t.Errorf("checkImage -shell on the image without a shell: %v, want an error about /bin/sh", err)
	}
	// Any static executable stands in for busybox: check follows /bin/sh to it.
	shell, err := image(bin, []byte("certs"), bin, p, labels("v", "r", when, true), when)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkImage(shell, p, true); err != nil {
		t.Errorf("checkImage -shell on the shell variant: %v", err)
	}
	cf, _ := shell.ConfigFile()
	if cf.Config.Labels[variantKey] != "shell" {
		t.Errorf("label %s = %q, want shell", variantKey, cf.Config.Labels[variantKey])
	}
	dir := t.TempDir()
	if err := unpack(shell, dir); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "cat", "wget"} {
		if got, err := filepath.EvalSymlinks(filepath.Join(dir, "bin", a)); err != nil || got != filepath.Join(dir, "bin", "busybox") {
			t.Errorf("unpacked /bin/%s resolves to %q (%v), want /bin/busybox", a, got, err)
		}
	}
}
