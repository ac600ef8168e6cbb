package deploycheck

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ReleaseImages are the images of base/kustomization.yaml a release pins, and the tag each
// gets for a version: cfp its version, cfp-shell the version's -shell tag.
var ReleaseImages = map[string]string{"cfp": "", "cfp-shell": "-shell"}

// versionRE is a release version as goreleaser's {{ .Version }} gives it (no leading v).
var versionRE = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// SetReleaseImages returns the kustomization with its ReleaseImages pinned to version: newTag
// set (and any digest removed, which would win over the tag), as `kustomize edit set image
// cfp=ghcr.io/cfp-dev/cfp:VERSION cfp-shell=ghcr.io/cfp-dev/cfp:VERSION-shell` does. Comments
// and the rest of the file stay as they are. An image missing from the file is an error.
func SetReleaseImages(kustomization []byte, version string) ([]byte, error) {
	if !versionRE.MatchString(version) {
		return nil, fmt.Errorf("version %q is not a release version (X.Y.Z)", version)
	}
	doc, err := yaml.Parse(string(kustomization))
	if err != nil {
		return nil, err
	}
	for name, suffix := range ReleaseImages {
		img, err := doc.Pipe(yaml.Lookup("images"), yaml.ElementMatcher{Keys: []string{"name"}, Values: []string{name}})
		if err != nil {
			return nil, err
		}
		if img == nil {
			return nil, fmt.Errorf("kustomization has no image %q to pin", name)
		}
		if err := img.PipeE(yaml.SetField("newTag", yaml.NewStringRNode(version+suffix))); err != nil {
			return nil, err
		}
		if err := img.PipeE(yaml.Clear("digest")); err != nil {
			return nil, err
		}
	}
	out, err := doc.String()
	if err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// WriteReleaseManifests writes the manifests under src (deploy/kubernetes) as a gzipped tar to
// w, under the directory cfp-kubernetes/, with base/kustomization.yaml pinned to version
// (SetReleaseImages). Entries are in lexical order with one fixed time, so the same tree and
// version give the same archive.
func WriteReleaseManifests(w io.Writer, src, version string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0).UTC()
	pinned := false
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := path.Join("cfp-kubernetes", filepath.ToSlash(rel))
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: epoch})
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.ToSlash(rel) == "base/kustomization.yaml" {
			if b, err = SetReleaseImages(b, version); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			pinned = true
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	if !pinned {
		return fmt.Errorf("%s has no base/kustomization.yaml", src)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
