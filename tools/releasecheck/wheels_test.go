package releasecheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// wheelConfig is the part of .goreleaser.yaml that makes and ships the Python client's
// platform wheels.
type wheelConfig struct {
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

// Every build target gets a platform wheel of clients/python: the build hook runs
// build_wheel.py, whose platform table knows the target, and the wheels are released and
// checksummed.
func TestRelease_PythonWheelForEveryBuildTarget(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c wheelConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	script, err := os.ReadFile(filepath.Join(repo, "clients/python/build_wheel.py"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Builds) == 0 {
		t.Fatal("no builds")
	}
	for i, bld := range c.Builds {
		if !slices.ContainsFunc(bld.Hooks.Post, func(h struct {
			Cmd string `json:"cmd"`
		}) bool {
			return strings.Contains(h.Cmd, "clients/python/build_wheel.py") && strings.Contains(h.Cmd, "--out dist/python")
		}) {
			t.Errorf("build %d has no post hook running clients/python/build_wheel.py --out dist/python", i)
		}
		for _, goos := range bld.Goos {
			for _, goarch := range bld.Goarch {
				if !strings.Contains(string(script), `"`+goos+"/"+goarch+`":`) {
					t.Errorf("build_wheel.py's PLATFORMS has no wheel tag for %s/%s", goos, goarch)
				}
			}
		}
	}
	const glob = "./dist/python/*.whl"
	if !slices.ContainsFunc(c.Release.ExtraFiles, func(f struct {
		Glob string `json:"glob"`
	}) bool {
		return f.Glob == glob
	}) {
		t.Errorf("release.extra_files does not ship %s", glob)
	}
	if !slices.ContainsFunc(c.Checksum.ExtraFiles, func(f struct {
		Glob string `json:"glob"`
	}) bool {
		return f.Glob == glob
	}) {
		t.Errorf("checksum.extra_files does not cover %s", glob)
	}
}
