package releasecheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestShellVariant_SameToolsEverywhere: the shell variant holds the same busybox links whether
// tools/ociimage (CI), Dockerfile --target shell or the release's Dockerfile.goreleaser-shell
// builds it.
func TestShellVariant_SameToolsEverywhere(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repo, "tools/ociimage/main.go"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)var busyboxApplets = \[\]string\{(.*?)\n\}`).FindSubmatch(src)
	if block == nil {
		t.Fatal("tools/ociimage/main.go has no busyboxApplets")
	}
	var want []string
	for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllSubmatch(block[1], -1) {
		want = append(want, string(m[1]))
	}
	slices.Sort(want)
	if !slices.Contains(want, "sh") {
		t.Fatalf("busyboxApplets %q has no sh", want)
	}
	for _, f := range []string{"Dockerfile", "Dockerfile.goreleaser-shell"} {
		b, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`for a in ([^;]+); do ln -s busybox`).FindSubmatch(b)
		if m == nil {
			t.Errorf("%s makes no busybox links", f)
			continue
		}
		var got []string
		for _, a := range strings.Fields(string(m[1])) {
			got = append(got, strings.Trim(a, `'"`))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s links %q, tools/ociimage %q", f, got, want)
		}
	}
}
