package deploycheck

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// TestRelease_ManifestsRunTheReleasedImages: the manifests a release publishes (the archive of
// WriteReleaseManifests, unpacked) run the release's images in every kustomization: cfp:V for
// the estimator, cfp:V-shell for the process host's --exec delegate; none keeps the
// repository's placeholder tag.
func TestRelease_ManifestsRunTheReleasedImages(t *testing.T) {
	t.Parallel()
	placeholder := placeholderTag(t)
	const version = "7.8.9"
	var archive bytes.Buffer
	if err := WriteReleaseManifests(&archive, root, version); err != nil {
		t.Fatal(err)
	}
	fsys := filesys.MakeFsInMemory()
	files := untar(t, bytes.NewReader(archive.Bytes()), fsys)
	if !files["cfp-kubernetes/base/kustomization.yaml"] || !files["cfp-kubernetes/base/delegate/deliver.sh"] {
		t.Fatalf("the archive lacks the manifests: %v", files)
	}
	for _, dir := range kustomizations {
		for name, d := range buildFS(t, fsys, "cfp-kubernetes", dir).deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				_, tag, _ := strings.Cut(c.Image, ":")
				if tag != version && tag != version+"-shell" || strings.Contains(c.Image, placeholder) {
					t.Errorf("%s: %s runs %q, want ghcr.io/cfp-dev/cfp:%s or :%s-shell", dir, name, c.Image, version, version)
				}
				if _, exec := flagValue(c.Args, "exec"); exec && tag != version+"-shell" {
					t.Errorf("%s: %s runs --exec in %q, want the -shell image", dir, name, c.Image)
				}
			}
		}
	}
	// Twice the same archive: a release is reproducible.
	var again bytes.Buffer
	if err := WriteReleaseManifests(&again, root, version); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(archive.Bytes(), again.Bytes()) {
		t.Error("two archives of the same tree and version differ")
	}
}

// placeholderTag is the cfp image's tag in the repository's base kustomization.
func placeholderTag(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "base", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct{ Name, NewTag string } `json:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	for _, img := range k.Images {
		if img.Name == "cfp" {
			return ":" + img.NewTag
		}
	}
	t.Fatal("no image cfp in base/kustomization.yaml")
	return ""
}

func untar(t *testing.T, r io.Reader, fsys filesys.FileSystem) map[string]bool {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			if err := fsys.MkdirAll(h.Name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile(h.Name, b); err != nil {
			t.Fatal(err)
		}
		files[h.Name] = true
	}
}

func TestSetReleaseImages(t *testing.T) {
	t.Parallel()
	in := `# keep me
images:
  - name: cfp
    newName: ghcr.io/cfp-dev/cfp
    newTag: "0.1.0"
  - name: cfp-shell
    newName: ghcr.io/cfp-dev/cfp
    digest: sha256:0000000000000000000000000000000000000000000000000000000000000000
  - name: other
    newTag: "9"
`
	out, err := SetReleaseImages([]byte(in), "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct{ Name, NewTag, Digest string } `json:"images"`
	}
	if err := yaml.Unmarshal(out, &k); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, img := range k.Images {
		got[img.Name] = img.NewTag + "@" + img.Digest
	}
	if got["cfp"] != "1.2.3@" || got["cfp-shell"] != "1.2.3-shell@" || got["other"] != "9@" {
		t.Errorf("images = %v", got)
	}
	if !strings.HasPrefix(string(out), "# keep me\n") {
		t.Errorf("the comment is gone:\n%s", out)
	}
	for _, bad := range []string{"v1.2.3", "latest", "", "1.2"} {
		if _, err := SetReleaseImages([]byte(in), bad); err == nil {
			t.Errorf("version %q accepted", bad)
		}
	}
	if _, err := SetReleaseImages([]byte("images: []\n"), "1.2.3"); err == nil {
		t.Error("a kustomization without the images accepted")
	}
}

// TestRelease_GoreleaserPublishesThePinnedManifests: the release runs releasemanifests with its
// version before it starts and publishes (and checksums) the archive it writes.
func TestRelease_GoreleaserPublishesThePinnedManifests(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Before struct {
			Hooks []string `json:"hooks"`
		} `json:"before"`
		Release struct {
			ExtraFiles []struct{ Glob string } `json:"extra_files"`
		} `json:"release"`
		Checksum struct {
			ExtraFiles []struct{ Glob string } `json:"extra_files"`
		} `json:"checksum"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	const out = "dist-manifests/cfp-kubernetes_{{ .Version }}.tar.gz"
	hook := false
	for _, cmd := range cfg.Before.Hooks {
		if strings.Contains(cmd, "cd tools && go run ./releasemanifests") &&
			strings.Contains(cmd, "-version {{ .Version }}") && strings.Contains(cmd, "-src ../deploy/kubernetes") &&
			strings.Contains(cmd, "-out ../"+out) {
			hook = true
		}
	}
	if !hook {
		t.Errorf("no before hook runs releasemanifests -version {{ .Version }} -out ../%s in tools", out)
	}
	published := func(globs []struct{ Glob string }) bool {
		for _, g := range globs {
			if g.Glob == "./dist-manifests/cfp-kubernetes_*.tar.gz" {
				return true
			}
		}
		return false
	}
	if !published(cfg.Release.ExtraFiles) || !published(cfg.Checksum.ExtraFiles) {
		t.Errorf("the release's or the checksum's extra_files lack ./dist-manifests/cfp-kubernetes_*.tar.gz")
	}
}
