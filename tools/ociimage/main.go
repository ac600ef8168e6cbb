// Command ociimage builds cfp's container image into an OCI image layout, without a container
// daemon or a registry, and checks one. The image is one layer over nothing (no base image):
// the static cfp binary at /usr/bin/cfp, CA certificates, and /etc/passwd and /etc/group with
// the user nonroot (65532); its config runs cfp as that user.
//
//	ociimage build -out DIR -binary linux/amd64=PATH [-binary linux/arm64=PATH] \
//	    [-version V] [-revision SHA] [-created RFC3339] [-ca-certs FILE]
//	ociimage check -layout DIR [-platform linux/amd64 ...]
//
// check fails unless every image in the layout's index runs /usr/bin/cfp as a non-root user,
// declares the platform it was built for, carries the OCI labels, and holds a statically
// linked executable of that architecture at /usr/bin/cfp.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which check asserts.
const (
	binaryPath = "/usr/bin/cfp"
	uid        = 65532
	userName   = "nonroot"
	homeDir    = "/home/nonroot"
	certsPath  = "/etc/ssl/certs/ca-certificates.crt"
	sourceURL  = "https://github.com/cfp-dev/cfp"
)

// requiredLabels are the OCI annotation keys every image config carries.
var requiredLabels = []string{
	"org.opencontainers.image.title", "org.opencontainers.image.description",
	"org.opencontainers.image.source", "org.opencontainers.image.licenses",
	"org.opencontainers.image.version", "org.opencontainers.image.revision",
	"org.opencontainers.image.created",
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ociimage build|check [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "check":
		err = runCheck(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want build or check)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	out := fs.String("out", "", "write the OCI image layout to `DIR` (replaced)")
	var binaries multiFlag
	fs.Var(&binaries, "binary", "`OS/ARCH=PATH` of a static cfp binary (repeat for each platform)")
	version := fs.String("version", "dev", "the image's version label")
	revision := fs.String("revision", "unknown", "the image's revision label (commit)")
	created := fs.String("created", "", "creation time, RFC 3339 (default: $SOURCE_DATE_EPOCH, else the Unix epoch, for reproducible images)")
	certs := fs.String("ca-certs", certsPath, "the CA certificate bundle to ship")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || len(binaries) == 0 {
		return errors.New("build needs -out and at least one -binary")
	}
	when, err := creationTime(*created)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(*certs)
	if err != nil {
		return fmt.Errorf("read CA certificates: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range binaries {
		plat, path, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("-binary %q: want OS/ARCH=PATH", b)
		}
		p, err := v1.ParsePlatform(plat)
		if err != nil {
			return fmt.Errorf("-binary %q: %w", b, err)
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := checkStatic(bin, p.Architecture); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		img, err := image(bin, ca, *p, labels(*version, *revision, when), when)
		if err != nil {
			return fmt.Errorf("image for %s: %w", plat, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	if _, err := layout.Write(*out, idx); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s (%d platform(s))\n", *out, len(binaries))
	return nil
}

func creationTime(s string) (time.Time, error) {
	if s != "" {
		return time.Parse(time.RFC3339, s)
	}
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Unix(0, 0).UTC(), nil
}

func labels(version, revision string, created time.Time) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "cfp",
		"org.opencontainers.image.description": "Azure Cosmos DB change feed processor host, lease tools, estimator and emulator",
		"org.opencontainers.image.source":      sourceURL,
		"org.opencontainers.image.url":         sourceURL,
		"org.opencontainers.image.licenses":    "MIT",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
}

// image is the one-layer image of bin for platform p.
func image(bin, ca []byte, p v1.Platform, lbl map[string]string, created time.Time) (v1.Image, error) {
	layerTar, err := rootfs(bin, ca, created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		static.NewLayer(layerTar, types.OCILayer))
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: created}
	cf.Author = sourceURL
	cf.Config = v1.Config{
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"--help"},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir: homeDir,
		Env: []string{
			"PATH=/usr/bin:/bin",
			"SSL_CERT_FILE=" + certsPath,
			"HOME=" + homeDir,
		},
		Labels:       lbl,
		ExposedPorts: map[string]struct{}{"9464/tcp": {}, "8081/tcp": {}},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, lbl).(v1.Image), nil
}

// rootfs is the layer: directories, the user database, the CA bundle and the binary, every
// entry with the same modification time so the image is reproducible.
func rootfs(bin, ca []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, owner int, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", userName, uid, uid, userName, homeDir)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)
	steps := []func() error{
		func() error { return dir("etc", 0, 0o755) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("etc/ssl", 0, 0o755) },
		func() error { return dir("etc/ssl/certs", 0, 0o755) },
		func() error { return file(strings.TrimPrefix(certsPath, "/"), 0o644, ca) },
		func() error { return dir("home", 0, 0o755) },
		func() error { return dir(strings.TrimPrefix(homeDir, "/"), uid, 0o700) },
		func() error { return dir("tmp", 0, 0o1777) },
		func() error { return dir("usr", 0, 0o755) },
		func() error { return dir("usr/bin", 0, 0o755) },
		func() error { return file(strings.TrimPrefix(binaryPath, "/"), 0o755, bin) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// elfMachines maps OCI architectures to ELF machines.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM,
	"386": elf.EM_386, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV,
}

// checkStatic fails unless bin is an ELF executable for arch without a dynamic loader (an
// image with no base has no libc).
func checkStatic(bin []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if want, ok := elfMachines[arch]; !ok || f.Machine != want {
		return fmt.Errorf("built for %s, not %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (build with CGO_ENABLED=0)")
		}
	}
	return nil
}

func runCheck(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	dir := fs.String("layout", "", "the OCI image layout `DIR`")
	var platforms multiFlag
	fs.Var(&platforms, "platform", "`OS/ARCH` the index must hold (repeat; default: any)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	idx, err := layout.ImageIndexFromPath(*dir)
	if err != nil {
		return fmt.Errorf("open layout: %w", err)
	}
	// layout.Write makes cfp's image index the layout's index.json.
	inner := idx
	im, err := inner.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) == 0 {
		return errors.New("the layout's index holds no image")
	}
	var seen []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return fmt.Errorf("manifest %s has no platform", d.Digest)
		}
		img, err := inner.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := checkImage(img, *d.Platform); err != nil {
			return fmt.Errorf("%s: %w", d.Platform, err)
		}
		seen = append(seen, d.Platform.OS+"/"+d.Platform.Architecture)
		fmt.Printf("ok %s %s: entrypoint %s, user %d, static\n", d.Platform, d.Digest, binaryPath, uid)
	}
	for _, p := range platforms {
		if !slices.Contains(seen, p) {
			return fmt.Errorf("no image for %s (have %v)", p, seen)
		}
	}
	return nil
}

// checkImage asserts the config and the binary of one image.
func checkImage(img v1.Image, p v1.Platform) error {
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	if mt != types.OCIManifestSchema1 {
		return fmt.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		return fmt.Errorf("config says %s/%s", cf.OS, cf.Architecture)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{binaryPath}) {
		return fmt.Errorf("entrypoint %q, want [%s]", cf.Config.Entrypoint, binaryPath)
	}
	user, _, _ := strings.Cut(cf.Config.User, ":")
	if n, err := strconv.Atoi(user); err != nil || n == 0 {
		return fmt.Errorf("user %q: want a numeric non-root uid", cf.Config.User)
	}
	for _, k := range requiredLabels {
		if cf.Config.Labels[k] == "" {
			return fmt.Errorf("label %s missing", k)
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return err
			}
			if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 || h.Name == "etc/passwd" {
				b, err := io.ReadAll(tr)
				if err != nil {
					rc.Close()
					return err
				}
				files["/"+h.Name] = b
			}
		}
		rc.Close()
	}
	bin, ok := files[binaryPath]
	if !ok {
		return fmt.Errorf("no executable %s in the layers", binaryPath)
	}
	if err := checkStatic(bin, p.Architecture); err != nil {
		return fmt.Errorf("%s: %w", binaryPath, err)
	}
	if !strings.Contains(string(files["/etc/passwd"]), fmt.Sprintf(":%d:%d:", uid, uid)) {
		return fmt.Errorf("/etc/passwd has no user %d", uid)
	}
	return nil
}
