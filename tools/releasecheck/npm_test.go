package releasecheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// npmConfig is the part of .goreleaser.yaml that builds the npm packages.
type npmConfig struct {
	Builds []struct {
		Goos   []string `json:"goos"`
		Goarch []string `json:"goarch"`
		Hooks  struct {
			Post []struct {
				Cmd string `json:"cmd"`
			} `json:"post"`
		} `json:"hooks"`
	} `json:"builds"`
	Checksum struct {
		ExtraFiles []struct {
			Glob string `json:"glob"`
		} `json:"extra_files"`
	} `json:"checksum"`
	Release struct {
		ExtraFiles []struct {
			Glob string `json:"glob"`
		} `json:"extra_files"`
	} `json:"release"`
}

type npmPackage struct {
	Name  string   `json:"name"`
	OS    []string `json:"os"`
	CPU   []string `json:"cpu"`
	Files []string `json:"files"`
}

// TestRelease_EveryBuildTargetHasAnNPMPlatformPackage: each GOOS/GOARCH goreleaser builds has
// a skeleton under clients/node/npm (the names and os/cpu Node.js uses, as the library looks
// them up: @cfp-dev/cli-<process.platform>-<process.arch>), the post-build hook packs it with
// the target's binary, and the tarballs go beside the archives, with checksums.
func TestRelease_EveryBuildTargetHasAnNPMPlatformPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c npmConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	nodeOS := map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}
	nodeArch := map[string]string{"amd64": "x64", "arm64": "arm64"}
	for _, build := range c.Builds {
		hooked := slices.ContainsFunc(build.Hooks.Post, func(h struct {
			Cmd string `json:"cmd"`
		}) bool {
			return strings.Contains(h.Cmd, "clients/node/npm/build.mjs") && strings.Contains(h.Cmd, "{{ .Path }}") &&
				strings.Contains(h.Cmd, "{{ .Os }}") && strings.Contains(h.Cmd, "{{ .Arch }}") && strings.Contains(h.Cmd, "{{ .Dist }}/npm")
		})
		if !hooked {
			t.Errorf("build %v/%v: no post hook runs clients/node/npm/build.mjs with the target's binary into dist/npm", build.Goos, build.Goarch)
		}
		for _, goos := range build.Goos {
			for _, goarch := range build.Goarch {
				name := "cli-" + nodeOS[goos] + "-" + nodeArch[goarch]
				raw, err := os.ReadFile(filepath.Join(repo, "clients/node/npm", name, "package.json"))
				if err != nil {
					t.Errorf("%s/%s: no npm platform package: %v", goos, goarch, err)
					continue
				}
				var p npmPackage
				if err := json.Unmarshal(raw, &p); err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				exe := "bin/cfp"
				if goos == "windows" {
					exe = "bin/cfp.exe"
				}
				if p.Name != "@cfp-dev/"+name || !slices.Equal(p.OS, []string{nodeOS[goos]}) || !slices.Equal(p.CPU, []string{nodeArch[goarch]}) || !slices.Contains(p.Files, exe) {
					t.Errorf("%s: name %q os %q cpu %q files %q, want @cfp-dev/%s, [%s], [%s], %s", name, p.Name, p.OS, p.CPU, p.Files, name, nodeOS[goos], nodeArch[goarch], exe)
				}
			}
		}
	}
	for what, globs := range map[string][]string{
		"release.extra_files":  globsOf(c.Release.ExtraFiles),
		"checksum.extra_files": globsOf(c.Checksum.ExtraFiles),
	} {
		if !slices.Contains(globs, "./dist/npm/*.tgz") {
			t.Errorf("%s does not carry the npm tarballs (./dist/npm/*.tgz): %q", what, globs)
		}
	}
}

func globsOf(files []struct {
	Glob string `json:"glob"`
}) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Glob)
	}
	return out
}
