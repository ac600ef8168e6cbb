package releasecheck

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const repo = "../.."

// config is the part of .goreleaser.yaml these tests read.
type config struct {
	Before struct {
		Hooks []string `json:"hooks"`
	} `json:"before"`
	Archives []struct {
		Files []string `json:"files"`
	} `json:"archives"`
	HomebrewCasks []struct {
		Manpages    []string          `json:"manpages"`
		Completions map[string]string `json:"completions"`
	} `json:"homebrew_casks"`
	Nfpms []struct {
		Formats  []string `json:"formats"`
		Contents []struct {
			Src      string `json:"src"`
			Dst      string `json:"dst"`
			Packager string `json:"packager"`
		} `json:"contents"`
	} `json:"nfpms"`
}

func load(t *testing.T) config {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c config
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	return c
}

// manPages are the pages internal/gendocs writes, relative to the repository.
func manPages(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(repo, "docs/cli/man/*.1"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no man pages in docs/cli/man (%v)", err)
	}
	var out []string
	for _, p := range m {
		out = append(out, "docs/cli/man/"+filepath.Base(p))
	}
	slices.Sort(out)
	return out
}

// matches reports whether the goreleaser source pattern src names file.
func matches(src, file string) bool {
	ok, err := path.Match(src, file)
	return err == nil && ok
}

// hookWrites reports whether a before hook writes file (the completions are generated).
func hookWrites(c config, file string) bool {
	return slices.ContainsFunc(c.Before.Hooks, func(h string) bool { return strings.Contains(h, "> "+file) })
}

var shells = []string{"bash", "zsh", "fish"}

// completionFile is the generated completion script of a shell.
var completionFile = map[string]string{"bash": "completions/cfp.bash", "zsh": "completions/_cfp", "fish": "completions/cfp.fish"}

func TestRelease_CompletionsAreGenerated(t *testing.T) {
	c := load(t)
	for _, sh := range shells {
		if !hookWrites(c, completionFile[sh]) {
			t.Errorf("no before hook writes %s", completionFile[sh])
		}
	}
}

func TestRelease_ArchivesShipManPagesAndCompletions(t *testing.T) {
	c := load(t)
	for i, a := range c.Archives {
		for _, f := range append(manPages(t), completionFile["bash"], completionFile["zsh"], completionFile["fish"]) {
			if !slices.ContainsFunc(a.Files, func(src string) bool { return matches(src, f) }) {
				t.Errorf("archive %d does not ship %s", i, f)
			}
		}
	}
}

func TestRelease_HomebrewCaskShipsEveryManPageAndCompletion(t *testing.T) {
	c := load(t)
	if len(c.HomebrewCasks) == 0 {
		t.Fatal("no homebrew_casks")
	}
	for _, cask := range c.HomebrewCasks {
		got := slices.Sorted(slices.Values(cask.Manpages))
		if want := manPages(t); !slices.Equal(got, want) {
			t.Errorf("the cask's manpages are %q, want every page of docs/cli/man: %q", got, want)
		}
		for _, sh := range shells {
			if cask.Completions[sh] != completionFile[sh] {
				t.Errorf("the cask's %s completion is %q, want %s", sh, cask.Completions[sh], completionFile[sh])
			}
		}
	}
}

func TestRelease_EveryLinuxPackageShipsManPagesAndCompletions(t *testing.T) {
	c := load(t)
	// Where each format's shells look (zsh: Debian's vendor-completions; elsewhere the default
	// fpath's site-functions).
	zshDir := map[string]string{"deb": "/usr/share/zsh/vendor-completions/", "rpm": "/usr/share/zsh/site-functions/", "apk": "/usr/share/zsh/site-functions/"}
	want := func(format string) map[string]string {
		return map[string]string{
			completionFile["bash"]: "/usr/share/bash-completion/completions/cfp",
			completionFile["zsh"]:  zshDir[format] + "_cfp",
			completionFile["fish"]: "/usr/share/fish/vendor_completions.d/cfp.fish",
		}
	}
	formats := 0
	for _, n := range c.Nfpms {
		for _, format := range n.Formats {
			formats++
			var dsts = map[string][]string{} // file -> where this format installs it
			for _, e := range n.Contents {
				if e.Packager != "" && e.Packager != format {
					continue
				}
				for _, f := range append(manPages(t), completionFile["bash"], completionFile["zsh"], completionFile["fish"]) {
					if matches(e.Src, f) {
						dst := e.Dst
						if strings.HasSuffix(dst, "/") {
							dst += path.Base(f)
						}
						dsts[f] = append(dsts[f], dst)
					}
				}
			}
			for _, m := range manPages(t) {
				if !slices.Contains(dsts[m], "/usr/share/man/man1/"+path.Base(m)) {
					t.Errorf("%s: %s is not installed in /usr/share/man/man1 (%q)", format, m, dsts[m])
				}
			}
			for f, d := range want(format) {
				if !slices.Contains(dsts[f], d) {
					t.Errorf("%s: %s is not installed as %s (%q)", format, f, d, dsts[f])
				}
			}
		}
	}
	if formats < 3 {
		t.Errorf("%d package formats, want deb, rpm and apk", formats)
	}
}
