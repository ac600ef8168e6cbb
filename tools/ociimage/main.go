// Command ociimage builds cfp's container image into an OCI image layout, without a container
// daemon or a registry, and checks one. The image is one layer over nothing (no base image):
// the static cfp binary at /usr/bin/cfp, CA certificates, and /etc/passwd and /etc/group with
// the user nonroot (65532); its config runs cfp as that user.
//
// With -shell, the image is the shell variant for `cfp process --exec` and `--exec-lines`, which
// run their command with sh -c: the same layer plus a static busybox at /bin/busybox and links
// to it for sh and common tools (busyboxApplets), e.g. from Debian's busybox-static package.
//
//	ociimage build -out DIR -binary linux/amd64=PATH [-binary linux/arm64=PATH] \
//	    [-shell linux/amd64=BUSYBOX ...] [-version V] [-revision SHA] [-created RFC3339] [-ca-certs FILE]
//	ociimage check -layout DIR [-platform linux/amd64 ...] [-shell] [-delegate]
//
// check fails unless every image in the layout's index runs /usr/bin/cfp as a non-root user,
// declares the platform it was built for, carries the OCI labels, and holds a statically
// linked executable of that architecture at /usr/bin/cfp. With -shell, every image must also
// hold /bin/sh, a static executable of its architecture. With -delegate, the image of the
// host's platform is unpacked into a directory and its own cfp replays three changes into
// `--exec 'cat'` with only the image's /bin and /usr/bin on PATH: the image's sh and cat run as
// cfp's delegate (outside a container: no daemon is needed, and none is used).
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
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
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
	busyboxBin = "/bin/busybox"
	shellPath  = "/bin/sh"
	variantKey = "dev.cfp.image.variant"
)

// busyboxApplets are the commands the shell variant links to /bin/busybox: a shell and the tools
// a delegate script commonly needs (busybox has no jq).
var busyboxApplets = []string{
	"sh", "ash", "cat", "echo", "printf", "env", "test", "[", "true", "false", "sleep", "date",
	"wc", "head", "tail", "tee", "cut", "tr", "sort", "uniq", "grep", "sed", "awk", "xargs",
	"ls", "cp", "mv", "rm", "mkdir", "mktemp", "touch", "base64", "sha256sum", "gzip", "gunzip", "wget", "nc",
}

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
	var shells multiFlag
	fs.Var(&shells, "shell", "`OS/ARCH=PATH` of a static busybox: build the shell variant (repeat for each platform)")
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
	busybox := map[string]string{}
	for _, s := range shells {
		plat, path, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("-shell %q: want OS/ARCH=PATH", s)
		}
		busybox[plat] = path
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
		var bb []byte
		if len(shells) > 0 {
			bbPath, ok := busybox[plat]
			if !ok {
				return fmt.Errorf("-shell: no busybox for %s", plat)
			}
			if bb, err = os.ReadFile(bbPath); err != nil {
				return err
			}
			if err := checkStatic(bb, p.Architecture); err != nil {
				return fmt.Errorf("%s: %w", bbPath, err)
			}
		}
		img, err := image(bin, ca, bb, *p, labels(*version, *revision, when, bb != nil), when)
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

func labels(version, revision string, created time.Time, shell bool) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "cfp",
		"org.opencontainers.image.description": "Azure Cosmos DB change feed processor host, lease tools, estimator and emulator",
		"org.opencontainers.image.source":      sourceURL,
		"org.opencontainers.image.url":         sourceURL,
		"org.opencontainers.image.licenses":    "MIT",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	if shell {
		l[variantKey] = "shell"
	}
	return l
}

// image is the one-layer image of bin for platform p, the shell variant when busybox is not nil.
func image(bin, ca, busybox []byte, p v1.Platform, lbl map[string]string, created time.Time) (v1.Image, error) {
	layerTar, err := rootfs(bin, ca, busybox, created)
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

// rootfs is the layer: directories, the user database, the CA bundle and the binary (and
// busybox with its links, if not nil), every entry with the same modification time so the image
// is reproducible.
func rootfs(bin, ca, busybox []byte, mtime time.Time) ([]byte, error) {
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
	if busybox != nil {
		steps = append(steps,
			func() error { return dir("bin", 0, 0o755) },
			func() error { return file(strings.TrimPrefix(busyboxBin, "/"), 0o755, busybox) })
		for _, a := range busyboxApplets {
			steps = append(steps, func() error {
				// Relative, so the links also work in an unpacked copy (check -delegate).
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: mtime, Format: tar.FormatPAX})
			})
		}
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
	shell := fs.Bool("shell", false, "every image must be the shell variant: a static /bin/sh")
	delegate := fs.Bool("delegate", false, "run the host platform's cfp with --exec 'cat' on the image's own sh and cat (implies -shell)")
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
	*shell = *shell || *delegate
	var seen []string
	ran := false
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return fmt.Errorf("manifest %s has no platform", d.Digest)
		}
		img, err := inner.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := checkImage(img, *d.Platform, *shell); err != nil {
			return fmt.Errorf("%s: %w", d.Platform, err)
		}
		seen = append(seen, d.Platform.OS+"/"+d.Platform.Architecture)
		what := "static"
		if *shell {
			what += ", static " + shellPath
		}
		fmt.Printf("ok %s %s: entrypoint %s, user %d, %s\n", d.Platform, d.Digest, binaryPath, uid, what)
		if *delegate && d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH {
			out, err := runDelegate(img)
			if err != nil {
				return fmt.Errorf("%s: delegate: %w", d.Platform, err)
			}
			fmt.Printf("ok %s: %s\n", d.Platform, out)
			ran = true
		}
	}
	if *delegate && !ran {
		return fmt.Errorf("-delegate: no image for this machine's platform %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, p := range platforms {
		if !slices.Contains(seen, p) {
			return fmt.Errorf("no image for %s (have %v)", p, seen)
		}
	}
	return nil
}

// checkImage asserts the config and the binary of one image (and its shell, if shell).
func checkImage(img v1.Image, p v1.Platform, shell bool) error {
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
	links := map[string]string{}
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
			if h.Typeflag == tar.TypeSymlink {
				links["/"+h.Name] = h.Linkname
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
	if shell {
		sh := shellPath
		for i := 0; i < 8; i++ {
			t, ok := links[sh]
			if !ok {
				break
			}
			if !path.IsAbs(t) {
				t = path.Join(path.Dir(sh), t)
			}
			sh = t
		}
		b, ok := files[sh]
		if !ok {
			return fmt.Errorf("no executable %s in the layers (build the shell variant with -shell)", shellPath)
		}
		if err := checkStatic(b, p.Architecture); err != nil {
			return fmt.Errorf("%s (%s): %w", shellPath, sh, err)
		}
	}
	return nil
}

// runDelegate unpacks img into a temporary directory and runs its cfp, with only the image's
// /bin and /usr/bin on PATH, on an embedded emulator: three changes imported, then replayed into
// --exec 'cat', which cfp runs as sh -c 'cat' through PATH. It fails unless every change comes
// back on stdout.
func runDelegate(img v1.Image) (string, error) {
	dir, err := os.MkdirTemp("", "ociimage-delegate-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "rootfs")
	if err := unpack(img, root); err != nil {
		return "", err
	}
	env := []string{
		"PATH=" + filepath.Join(root, "bin") + ":" + filepath.Join(root, "usr/bin"),
		"HOME=" + dir, "CFP_LOCAL=" + filepath.Join(dir, "data"),
	}
	cfp := filepath.Join(root, binaryPath)
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(cfp, args...)
		cmd.Env, cmd.Dir, cmd.Stdin = env, dir, strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("cfp %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), nil
	}
	ids := []string{"d1", "d2", "d3"}
	var docs strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&docs, "{\"id\":%q}\n", id)
	}
	if _, err := run(docs.String(), "import", "-d", "shop", "-c", "orders", "--create"); err != nil {
		return "", err
	}
	if _, err := run("", "import", "-d", "shop", "-c", "leases", "--create"); err != nil {
		return "", err
	}
	// replay-from replays up to now, in whole seconds of the changes' timestamps.
	time.Sleep(1100 * time.Millisecond)
	out, err := run("", "replay-from", "beginning", "-d", "shop", "-c", "orders", "--exec", "cat")
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		if !strings.Contains(out, fmt.Sprintf("%q", id)) {
			return "", fmt.Errorf("change %s did not come through --exec 'cat': stdout %q", id, out)
		}
	}
	return fmt.Sprintf("cfp replay-from --exec 'cat' ran the image's %s and cat: %d changes through", shellPath, len(ids)), nil
}

// unpack writes img's layers (directories, regular files, symlinks) under root.
func unpack(img v1.Image, root string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		err = func() error {
			defer rc.Close()
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				name := filepath.Join(root, filepath.FromSlash(path.Clean("/"+h.Name)))
				switch h.Typeflag {
				case tar.TypeDir:
					if err := os.MkdirAll(name, 0o755); err != nil {
						return err
					}
				case tar.TypeReg:
					if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
						return err
					}
					b, err := io.ReadAll(tr)
					if err != nil {
						return err
					}
					if err := os.WriteFile(name, b, os.FileMode(h.Mode)&0o755|0o600); err != nil {
						return err
					}
				case tar.TypeSymlink:
					if path.IsAbs(h.Linkname) {
						return fmt.Errorf("%s: absolute link %s does not work unpacked", h.Name, h.Linkname)
					}
					if err := os.Symlink(h.Linkname, name); err != nil {
						return err
					}
				}
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}
