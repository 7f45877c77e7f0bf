package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	buildOnce sync.Once
	builtBins = map[string]string{}
	buildErr  error
)

// goBinary is a tiny static Go program built for goarch (CGO_ENABLED=0),
// once per test run; the image is never run here (tests/cluster runs the
// real one on a node).
func goBinary(t *testing.T, goarch string) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "image-test")
		if err != nil {
			buildErr = err
			return
		}
		src := filepath.Join(dir, "main.go")
		if buildErr = os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o600); buildErr != nil {
			return
		}
		// freebsd: amd64 for FreeBSD (ELF OSABI FreeBSD).
		for _, a := range []string{"amd64", "arm64", "ppc64", "freebsd"} {
			out := filepath.Join(dir, "bin-"+a)
			cmd := exec.Command("go", "build", "-o", out, src)
			goos, goarch := "linux", a
			if a == "freebsd" {
				goos, goarch = "freebsd", "amd64"
			}
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=-mod=mod", "GO111MODULE=off")
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %w: %s", a, err, b)
				return
			}
			builtBins[a] = out
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBins[goarch]
}

func staticBin(t *testing.T) string { return goBinary(t, "amd64") }

func opts(bin string) Options {
	return Options{Binary: bin, Name: "leasetune", Arch: "amd64", Created: time.Unix(1764892800, 0).UTC(),
		Version: "0.1.0", Revision: "abc123", Source: "https://leasetune.io/leasetune"}
}

// files lists the image's filesystem: path, type, mode and owner.
func files(t *testing.T, o Options) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		p := strings.TrimSuffix(h.Name, "/")
		hdrs[p], data[p] = h, b
	}
	return hdrs, data
}

func TestImageHoldsTheBinaryAlone(t *testing.T) {
	bin := staticBin(t)
	hdrs, data := files(t, opts(bin))
	var names []string
	for p := range hdrs {
		names = append(names, p)
	}
	slices.Sort(names)
	want := []string{"etc", "etc/group", "etc/passwd", "home", "home/nonroot", "tmp", "usr", "usr/local", "usr/local/bin", "usr/local/bin/leasetune"}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v (no shell, nothing else)", names, want)
	}
	b := hdrs["usr/local/bin/leasetune"]
	content, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if b.Mode != 0o555 || b.Uid != 0 || !bytes.Equal(data["usr/local/bin/leasetune"], content) {
		t.Errorf("binary mode %o uid %d, content equal %v", b.Mode, b.Uid, bytes.Equal(data["usr/local/bin/leasetune"], content))
	}
	if h := hdrs["tmp"]; h.Mode != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", h.Mode)
	}
	if h := hdrs["home/nonroot"]; h.Uid != NonRoot || h.Gid != NonRoot {
		t.Errorf("/home/nonroot owned by %d:%d", h.Uid, h.Gid)
	}
	if !strings.Contains(string(data["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q", data["etc/passwd"])
	}
	for p, h := range hdrs {
		if !h.ModTime.Equal(opts(bin).Created) {
			t.Errorf("%s: mtime %s, want the -created time", p, h.ModTime)
		}
	}
}

func TestImageConfig(t *testing.T) {
	img, err := Build(opts(staticBin(t)))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/leasetune"}) || len(c.Cmd) != 0 {
		t.Errorf("user %q entrypoint %v cmd %v", c.User, c.Entrypoint, c.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  "0.1.0",
		"org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.source":   "https://leasetune.io/leasetune",
		"org.opencontainers.image.title":    "leasetune",
		"org.opencontainers.image.created":  "2025-12-05T00:00:00Z",
	} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.DockerManifestSchema2 || m.Config.MediaType != types.DockerConfigJSON || len(m.Layers) != 1 {
		t.Errorf("manifest %s, config %s, %d layers", m.MediaType, m.Config.MediaType, len(m.Layers))
	}
}

// The same inputs give the same digest; another binary or version another.
func TestImageIsReproducible(t *testing.T) {
	bin := staticBin(t)
	digest := func(o Options) string {
		img, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	a, b := digest(opts(bin)), digest(opts(bin))
	if a != b {
		t.Fatalf("two builds: %s and %s", a, b)
	}
	o := opts(bin)
	o.Version = "0.2.0"
	if digest(o) == a {
		t.Error("another version, same digest")
	}
}

func TestImageRefusesBadInput(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Binary: notELF, Name: "x"}, "not an ELF executable"},
		{Options{Binary: staticBin(t), Name: "a/b"}, `name "a/b"`},
		{Options{Binary: staticBin(t), Name: ".."}, `name ".."`},
		{Options{Binary: staticBin(t), Name: ""}, `name ""`},
		{Options{Binary: staticBin(t), Name: "a b"}, `name "a b"`},
		{Options{Binary: staticBin(t), Name: "x", Aliases: []string{"x"}}, `alias "x"`},
		{Options{Binary: staticBin(t), Name: "x", Aliases: []string{"y", "y"}}, `alias "y"`},
		{Options{Binary: staticBin(t), Name: "x", Aliases: []string{"."}}, `alias "."`},
		{Options{Binary: "/nonexistent", Name: "x"}, "no such file"},
		{Options{Binary: "/bin/true", Name: "x"}, "dynamically linked"},
		{Options{Binary: goBinary(t, "ppc64"), Name: "x", Arch: "ppc64le"}, "built for ppc64, not ppc64le"},
		{Options{Binary: goBinary(t, "freebsd"), Name: "x"}, "not Linux"},
		{Options{Binary: goBinary(t, "arm64"), Name: "x", Arch: "amd64"}, "built for arm64, not amd64"},
		{Options{Binary: staticBin(t), Name: "x", Created: time.Unix(-1, 0)}, "want a time from 1970"},
	} {
		if c.o.Created.IsZero() {
			c.o.Created = time.Unix(1764892800, 0) // a valid time: the case is about something else
		}
		if _, err := Build(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// The archive names every tag and loads back as the same image.
func TestArchive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img.tar")
	bin := staticBin(t)
	if err := run([]string{"-binary", bin, "-name", "pause", "-aliases", "fleetcontroller", "-created", "1764892800",
		"-tags", "leasetune.test/pause:1,leasetune.test/standin:1", "-out", out}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"leasetune.test/pause:1", "leasetune.test/standin:1"} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &tag)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil || cf.Config.Entrypoint[0] != "/usr/local/bin/pause" {
			t.Errorf("%s: %v %v", ref, err, cf)
		}
	}
	o := opts(bin)
	o.Name, o.Aliases = "pause", []string{"fleetcontroller"}
	hdrs, _ := files(t, o)
	if h := hdrs["usr/local/bin/fleetcontroller"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "pause" {
		t.Errorf("alias: %+v", h)
	}
}

// TestPushKeepsTheDigests pushes the archive, as `scripts/image.sh push`
// does (crane push: tarball.ImageFromPath, remote.Write), to a registry
// (go-containerregistry's, in memory, on loopback): the registry stores the
// manifest digest and image ID Build gives, so what run prints is what a
// user finds after the push.
func TestPushKeepsTheDigests(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	o := opts(staticBin(t))
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "img.tar")
	tag, err := name.NewTag("leasetune:0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := name.NewTag(strings.TrimPrefix(srv.URL, "http://") + "/leasetune:0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, loaded); err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(dst)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	wantID, _ := img.ConfigName()
	gotID, _ := pushed.ConfigName()
	if desc.Digest != want || gotID != wantID {
		t.Errorf("the registry stores manifest %s, image ID %s; Build gave %s, %s", desc.Digest, gotID, want, wantID)
	}
}
