// Command image builds an OCI image from one static binary, without Docker
// or a registry (scripts/image.sh, `make image`): the binary at
// /usr/local/bin/<name>, a passwd and group naming the non-root user 65532
// (what distroless's "nonroot" images hold), a writable /tmp and the user's
// home, nothing else (no shell). The image runs as 65532:65532 with the
// binary as its entrypoint and carries the OCI labels for version, revision
// and source. Every timestamp is -created, so the same inputs give the same
// digest. It writes a docker-archive tarball that `ctr images import`,
// `docker load` and `crane push` all take, and prints the image ID (the
// config's digest, which every one of them keeps) and the manifest digest
// a registry stores.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRoot is the user and group the images run as (distroless's nonroot).
const NonRoot = 65532

// Options say what goes into an image.
type Options struct {
	Binary      string    // path of the static binary
	Name        string    // its name under /usr/local/bin
	Aliases     []string  // more names for it under /usr/local/bin (symlinks)
	Arch        string    // GOARCH of the binary ("": read from it)
	Created     time.Time // every timestamp in the image
	Version     string    // org.opencontainers.image.version
	Revision    string    // org.opencontainers.image.revision
	Source      string    // org.opencontainers.image.source
	Title       string    // org.opencontainers.image.title (default Name)
	Description string    // org.opencontainers.image.description
}

// Build returns the image Options describe.
func Build(o Options) (v1.Image, error) {
	if !validName.MatchString(o.Name) {
		return nil, fmt.Errorf("name %q: want a file name (letters, digits, '.', '_', '-'; not . or ..)", o.Name)
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	arch, err := staticArch(bin)
	if err != nil {
		return nil, fmt.Errorf("binary %s: %w", o.Binary, err)
	}
	if o.Arch == "" {
		o.Arch = arch
	} else if o.Arch != arch {
		return nil, fmt.Errorf("binary %s: built for %s, not %s", o.Binary, arch, o.Arch)
	}
	if o.Created.Before(time.Unix(0, 0)) || o.Created.Year() > 9999 {
		return nil, fmt.Errorf("created %s: want a time from 1970 to 9999", o.Created)
	}
	layer, err := rootfs(o, bin)
	if err != nil {
		return nil, err
	}
	lyr, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer)), nil
	})
	if err != nil {
		return nil, err
	}
	// Docker's schema 2 media types: a docker-archive has no manifest, and
	// what reads one (crane push, docker load) makes a schema 2 manifest
	// from it; with the same types here, the manifest digest printed is the
	// one a registry stores.
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: lyr, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "tools/image: " + o.Name, Comment: "the binary alone",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
	cf.Created = v1.Time{Time: o.Created}
	title := o.Title
	if title == "" {
		title = o.Name
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   title,
		"org.opencontainers.image.created": o.Created.UTC().Format(time.RFC3339),
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.description": o.Description,
	} {
		if v != "" {
			labels[k] = v
		}
	}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		Entrypoint: []string{"/usr/local/bin/" + o.Name},
		Env:        []string{"PATH=/usr/local/bin"},
		WorkingDir: "/",
		Labels:     labels,
	}
	return mutate.ConfigFile(img, cf)
}

// validName is a file name the image may hold in /usr/local/bin.
var validName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// staticArch returns the GOARCH of a statically linked Linux ELF
// executable, or why the image could not run it: the image has no dynamic
// loader and no libraries (CGO_ENABLED=0 builds are static).
func staticArch(bin []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	switch {
	case f.Type != elf.ET_EXEC && !(f.Type == elf.ET_DYN && f.Entry != 0):
		return "", fmt.Errorf("not an executable (ELF type %s)", f.Type)
	case f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX:
		return "", fmt.Errorf("built for %s, not Linux", f.OSABI)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New("dynamically linked (it names an interpreter): the image has no loader or libraries; build it static (CGO_ENABLED=0, not -buildmode=pie)")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return "", fmt.Errorf("needs shared libraries %v: build it static (CGO_ENABLED=0)", libs)
	}
	little := f.ByteOrder == binary.LittleEndian
	is64 := f.Class == elf.ELFCLASS64
	switch {
	case f.Machine == elf.EM_X86_64 && is64:
		return "amd64", nil
	case f.Machine == elf.EM_AARCH64 && is64:
		return "arm64", nil
	case f.Machine == elf.EM_386 && !is64:
		return "386", nil
	case f.Machine == elf.EM_ARM && !is64:
		return "arm", nil
	case f.Machine == elf.EM_PPC64 && is64 && little:
		return "ppc64le", nil
	case f.Machine == elf.EM_PPC64 && is64:
		return "ppc64", nil
	case f.Machine == elf.EM_S390 && is64:
		return "s390x", nil
	case f.Machine == elf.EM_RISCV && is64:
		return "riscv64", nil
	}
	return "", fmt.Errorf("machine %s (%s): no GOARCH known for it", f.Machine, f.Class)
}

// rootfs is the image's one layer.
func rootfs(o Options, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(h *tar.Header) {
		h.ModTime, h.Format = o.Created, tar.FormatPAX
		if h.Uname == "" {
			h.Uname, h.Gname = "root", "root"
		}
	}
	dir := func(p string, mode int64, uid int) error {
		h := &tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: uid}
		if uid == NonRoot {
			h.Uname, h.Gname = "nonroot", "nonroot"
		}
		hdr(h)
		return tw.WriteHeader(h)
	}
	file := func(p string, mode int64, data []byte) error {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data))}
		hdr(h)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	link := func(p, target string) error {
		h := &tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777}
		hdr(h)
		return tw.WriteHeader(h)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot)
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, NonRoot) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/local", 0o755, 0) },
		func() error { return dir("usr/local/bin", 0o755, 0) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{o.Name: true}
	for _, a := range o.Aliases {
		if !validName.MatchString(a) || seen[a] {
			return nil, fmt.Errorf("alias %q: want a file name other than %q and the other aliases", a, o.Name)
		}
		seen[a] = true
		if err := link(path.Join("usr/local/bin", a), o.Name); err != nil {
			return nil, err
		}
	}
	if err := file(path.Join("usr/local/bin", o.Name), 0o555, bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o Options
	var refs, aliases, created string
	fs.StringVar(&o.Binary, "binary", "", "the static binary")
	fs.StringVar(&o.Name, "name", "", "its file name in /usr/local/bin (the entrypoint)")
	fs.StringVar(&aliases, "aliases", "", "comma-separated more names for it in /usr/local/bin")
	fs.StringVar(&o.Arch, "arch", "", "the binary's GOARCH (default: read from the binary; given, it must match)")
	fs.StringVar(&created, "created", "0", "every timestamp in the image, seconds since the epoch (SOURCE_DATE_EPOCH)")
	fs.StringVar(&o.Version, "version", "", "org.opencontainers.image.version")
	fs.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision")
	fs.StringVar(&o.Source, "source", "", "org.opencontainers.image.source")
	fs.StringVar(&o.Title, "title", "", "org.opencontainers.image.title (default -name)")
	fs.StringVar(&o.Description, "description", "", "org.opencontainers.image.description")
	fs.StringVar(&refs, "tags", "", "comma-separated image references the archive names")
	out := fs.String("out", "", "the docker-archive tarball to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Binary == "" || *out == "" || refs == "" {
		return errors.New("-binary, -out and -tags are required")
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created %q: want seconds since the epoch", created)
	}
	o.Created = time.Unix(secs, 0).UTC()
	if aliases != "" {
		o.Aliases = strings.Split(aliases, ",")
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	named := map[name.Reference]v1.Image{}
	for _, r := range strings.Split(refs, ",") {
		tag, err := name.NewTag(r)
		if err != nil {
			return fmt.Errorf("-tags %q: %w", r, err)
		}
		named[tag] = img
	}
	tmp := *out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, named); err != nil {
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s, image ID %s (what a node and docker report), manifest %s (what a registry stores after crane push)\n", *out, refs, id, d)
	return nil
}
