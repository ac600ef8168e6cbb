// Command releasemanifests writes the Kubernetes manifests of a release: deploy/kubernetes as
// a gzipped tar whose base/kustomization.yaml pins the release's images (cfp:VERSION,
// cfp:VERSION-shell) in place of the placeholder the repository carries. goreleaser runs it as a
// before hook and publishes the archive with the release (.goreleaser.yaml).
//
//	go run ./releasemanifests -version 1.2.3 -src ../deploy/kubernetes -out ../dist-manifests/cfp-kubernetes_1.2.3.tar.gz
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cfp-dev/cfp/tools/deploycheck"
)

func main() {
	version := flag.String("version", "", "the release `VERSION` (X.Y.Z, no leading v)")
	src := flag.String("src", "deploy/kubernetes", "the manifests' `DIR`")
	out := flag.String("out", "", "the archive to write (`FILE`.tar.gz)")
	flag.Parse()
	if *version == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "releasemanifests: -version and -out are required")
		os.Exit(2)
	}
	if err := run(*version, *src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "releasemanifests:", err)
		os.Exit(1)
	}
}

func run(version, src, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := deploycheck.WriteReleaseManifests(f, src, version); err != nil {
		_ = f.Close()
		_ = os.Remove(out)
		return err
	}
	return f.Close()
}
