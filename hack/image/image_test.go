package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// writeELF writes a stand-in for a linux binary: an ELF header for machine,
// with a PT_INTERP program header when dynamic, and a few bytes of "text".
func writeELF(t *testing.T, path string, machine elf.Machine, dynamic bool) []byte {
	t.Helper()
	var progs []elf.Prog64
	if dynamic {
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R)})
	}
	h := elf.Header64{
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(machine),
		Version:   uint32(elf.EV_CURRENT),
		Ehsize:    64,
		Phentsize: 56,
		Phnum:     uint16(len(progs)),
		Shentsize: 64,
	}
	if len(progs) > 0 {
		h.Phoff = 64
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := binary.Write(&buf, binary.LittleEndian, p); err != nil {
			t.Fatal(err)
		}
	}
	buf.WriteString("not really a program")
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// imageConfig is what the test checks of an image's configuration.
type imageConfig struct {
	Architecture string
	OS           string
	Created      time.Time
	Entrypoint   []string
	User         string
	WorkingDir   string
	Env          []string
	Labels       map[string]string
	Layers       int
}

// layerFile is one entry of a layer, its name made absolute.
type layerFile struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Content  string
}

func readLayer(t *testing.T, l v1.Layer) []layerFile {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []layerFile
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, layerFile{
			Name: "/" + h.Name, Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid,
			ModTime: h.ModTime.UTC(), Content: string(content),
		})
	}
}

func TestImage(t *testing.T) {
	const epoch = 1700000000 // 2023-11-14T22:13:20Z
	created := time.Unix(epoch, 0).UTC()
	cases := map[string]struct {
		arch     string
		machine  elf.Machine
		binary   string
		env      map[string]string
		args     []string
		wantRef  string
		wantName string
	}{
		"amd64, default registry": {
			arch:     "amd64",
			machine:  elf.EM_X86_64,
			binary:   "strata-agent",
			wantRef:  "ghcr.io/strata-dev/strata-agent:0.1.0",
			wantName: "strata-agent",
		},
		"arm64, REGISTRY from the environment": {
			arch:     "arm64",
			machine:  elf.EM_AARCH64,
			binary:   "strata-hub",
			env:      map[string]string{"REGISTRY": "registry.example.test:5000/team"},
			wantRef:  "registry.example.test:5000/team/strata-hub:0.1.0",
			wantName: "strata-hub",
		},
		"arm64, --name and --registry": {
			arch:     "arm64",
			machine:  elf.EM_AARCH64,
			binary:   "kubectl-strata.bin",
			env:      map[string]string{"REGISTRY": "ignored.example.test"},
			args:     []string{"--name", "kubectl-strata", "--registry", "localhost:5001"},
			wantRef:  "localhost:5001/kubectl-strata:0.1.0",
			wantName: "kubectl-strata",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, tc.binary)
			binData := writeELF(t, bin, tc.machine, false)
			out := filepath.Join(dir, "images", "image.tar")
			env := map[string]string{"SOURCE_DATE_EPOCH": strconv.Itoa(epoch)}
			for k, v := range tc.env {
				env[k] = v
			}
			args := append([]string{
				"--binary", bin, "--arch", tc.arch, "--version", "0.1.0", "--revision", "abc123", "--output", out,
			}, tc.args...)
			var stdout bytes.Buffer
			if err := run(context.Background(), args, func(k string) string { return env[k] }, &stdout); err != nil {
				t.Fatalf("run: %v", err)
			}
			if !strings.Contains(stdout.String(), tc.wantRef) {
				t.Errorf("output %q does not name %s", stdout.String(), tc.wantRef)
			}

			manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(out) })
			if err != nil {
				t.Fatal(err)
			}
			var gotTags [][]string
			for _, d := range manifest {
				gotTags = append(gotTags, d.RepoTags)
			}
			if diff := cmp.Diff([][]string{{tc.wantRef}}, gotTags); diff != "" {
				t.Errorf("manifest.json RepoTags (-want,+got):\n%s", diff)
			}

			img, err := tarball.ImageFromPath(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate.Image(img); err != nil {
				t.Fatalf("invalid image: %v", err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			gotConfig := imageConfig{
				Architecture: cfg.Architecture,
				OS:           cfg.OS,
				Created:      cfg.Created.UTC(),
				Entrypoint:   cfg.Config.Entrypoint,
				User:         cfg.Config.User,
				WorkingDir:   cfg.Config.WorkingDir,
				Env:          cfg.Config.Env,
				Labels:       cfg.Config.Labels,
				Layers:       len(layers),
			}
			wantConfig := imageConfig{
				Architecture: tc.arch,
				OS:           "linux",
				Created:      created,
				Entrypoint:   []string{"/usr/local/bin/" + tc.wantName},
				User:         "65532:65532",
				WorkingDir:   "/",
				Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
				Labels: map[string]string{
					"org.opencontainers.image.title":    tc.wantName,
					"org.opencontainers.image.version":  "0.1.0",
					"org.opencontainers.image.source":   "https://github.com/strata-dev/strata",
					"org.opencontainers.image.revision": "abc123",
					"org.opencontainers.image.licenses": "Apache-2.0",
					"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
				},
				Layers: 1,
			}
			if diff := cmp.Diff(wantConfig, gotConfig); diff != "" {
				t.Errorf("image config (-want,+got):\n%s", diff)
			}
			if len(layers) != 1 {
				return
			}

			wantFiles := []layerFile{
				{Name: "/etc/", Type: tar.TypeDir, Mode: 0o755},
				{Name: "/etc/group", Type: tar.TypeReg, Mode: 0o644, Content: "root:x:0:\nnonroot:x:65532:\n"},
				{Name: "/etc/passwd", Type: tar.TypeReg, Mode: 0o644, Content: "root:x:0:0:root:/root:/sbin/nologin\n" +
					"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
				{Name: "/home/", Type: tar.TypeDir, Mode: 0o755},
				{Name: "/home/nonroot/", Type: tar.TypeDir, Mode: 0o700, UID: 65532, GID: 65532},
				{Name: "/usr/", Type: tar.TypeDir, Mode: 0o755},
				{Name: "/usr/local/", Type: tar.TypeDir, Mode: 0o755},
				{Name: "/usr/local/bin/", Type: tar.TypeDir, Mode: 0o755},
				{Name: "/usr/local/bin/" + tc.wantName, Type: tar.TypeReg, Mode: 0o755, Content: string(binData)},
			}
			for i := range wantFiles {
				wantFiles[i].ModTime = created
			}
			if diff := cmp.Diff(wantFiles, readLayer(t, layers[0])); diff != "" {
				t.Errorf("layer (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestImageIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata-agent")
	writeELF(t, bin, elf.EM_X86_64, false)
	o := options{
		Binary: bin, Name: "strata-agent", Registry: defaultRegistry, Version: "0.1.0", Arch: "amd64",
		Source: defaultSource, Revision: "abc123", License: defaultLicense, Created: time.Unix(1700000000, 0),
	}
	digest := func(o options) v1.Hash {
		t.Helper()
		img, err := buildImage(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digest(o)
	if second := digest(o); first != second {
		t.Errorf("the same inputs gave %s, then %s", first, second)
	}
	later := o
	later.Created = o.Created.Add(time.Second)
	if d := digest(later); d == first {
		t.Errorf("another creation time gave the same digest %s", d)
	}
}

func TestBuildImageErrors(t *testing.T) {
	dir := t.TempDir()
	amd64 := filepath.Join(dir, "amd64")
	writeELF(t, amd64, elf.EM_X86_64, false)
	dynamic := filepath.Join(dir, "dynamic")
	writeELF(t, dynamic, elf.EM_X86_64, true)
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	valid := options{
		Binary: amd64, Name: "strata-agent", Registry: defaultRegistry, Version: "0.1.0", Arch: "amd64",
		License: defaultLicense, Created: time.Unix(1700000000, 0),
	}
	cases := map[string]struct {
		change  func(*options)
		wantErr string
	}{
		"valid": {change: func(*options) {}},
		"another architecture's binary": {
			change:  func(o *options) { o.Arch = "arm64" },
			wantErr: "not arm64",
		},
		"dynamically linked": {
			change:  func(o *options) { o.Binary = dynamic },
			wantErr: "CGO_ENABLED=0",
		},
		"not a binary": {
			change:  func(o *options) { o.Binary = script },
			wantErr: "not a linux binary",
		},
		"unsupported architecture": {
			change:  func(o *options) { o.Arch = "386" },
			wantErr: `architecture "386"`,
		},
		"bad name": {
			change:  func(o *options) { o.Name = "Strata Agent" },
			wantErr: `name "Strata Agent"`,
		},
		"bad tag": {
			change:  func(o *options) { o.Version = "0.1.0+build" },
			wantErr: "image reference",
		},
		"no creation time": {
			change:  func(o *options) { o.Created = time.Time{} },
			wantErr: "no creation time",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := valid
			tc.change(&o)
			_, err := buildImage(o)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("no error, want one with %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("error %q, want one with %q", err, tc.wantErr)
			}
		})
	}
}

func TestRunNeedsFlags(t *testing.T) {
	err := run(context.Background(), []string{"--binary", "x"}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("run without --version and --output: %v, want an error naming the required flags", err)
	}
}
