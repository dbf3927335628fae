package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// nonRootID is the uid and gid the image runs as (distroless' nonroot).
	nonRootID = 65532
	// binDir holds the binary, as a path inside the layer.
	binDir = "usr/local/bin"
	// pathEnv is the image's PATH.
	pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"

	labelPrefix = "org.opencontainers.image."
)

// elfMachines are the architectures an image can be built for, with the ELF
// machine their binaries must have.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// imageName is what a binary's name must look like to name a repository.
var imageName = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)

// options describe one image. Every field is explicit; main fills the
// defaults (environment, git).
type options struct {
	// Binary is the static linux binary to package.
	Binary string
	// Name of the binary inside the image and of the image repository.
	Name string
	// Registry is the repository prefix, e.g. ghcr.io/strata-dev.
	Registry string
	// Version is the image tag and the version label.
	Version string
	// Arch is the GOARCH of the binary: amd64 or arm64.
	Arch string
	// Source, Revision and License become labels, left out when empty.
	Source   string
	Revision string
	License  string
	// Created is the image's creation time and every file's modification
	// time, so that the same inputs give the same image digest.
	Created time.Time
}

// reference is the image's name: <registry>/<name>:<version>.
func (o options) reference() (name.Tag, error) {
	return name.NewTag(o.Registry+"/"+o.Name+":"+o.Version, name.StrictValidation)
}

func (o options) validate() error {
	var errs []error
	if o.Binary == "" {
		errs = append(errs, errors.New("no binary given"))
	}
	if !imageName.MatchString(o.Name) {
		errs = append(errs, fmt.Errorf("name %q: want lower-case letters, digits and separators", o.Name))
	}
	if _, ok := elfMachines[o.Arch]; !ok {
		errs = append(errs, fmt.Errorf("architecture %q: want amd64 or arm64", o.Arch))
	}
	if o.Created.IsZero() {
		errs = append(errs, errors.New("no creation time given"))
	}
	if _, err := o.reference(); err != nil {
		errs = append(errs, fmt.Errorf("image reference: %w", err))
	}
	return errors.Join(errs...)
}

// labels are the image's OCI annotations (org.opencontainers.image.*).
func (o options) labels() map[string]string {
	l := map[string]string{
		labelPrefix + "title":   o.Name,
		labelPrefix + "version": o.Version,
		labelPrefix + "created": o.Created.UTC().Format(time.RFC3339),
	}
	for key, value := range map[string]string{"source": o.Source, "revision": o.Revision, "licenses": o.License} {
		if value != "" {
			l[labelPrefix+key] = value
		}
	}
	return l
}

// checkBinary fails unless path is an ELF executable for arch that needs no
// dynamic loader: an image without a libc runs only static binaries.
func checkBinary(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a linux binary: %w", path, err)
	}
	defer f.Close()
	if want := elfMachines[arch]; f.Machine != want {
		return fmt.Errorf("%s is built for %s, not %s (%s); build it with GOOS=linux GOARCH=%s", path, f.Machine, arch, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// layerEntry is one file or directory of the image's layer.
type layerEntry struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// layerEntries are the layer's contents in the order they are written:
// /etc/passwd and /etc/group with root and nonroot, an empty home for
// nonroot, and the binary. Everything but that home is owned by root and
// read-only to the user the image runs as.
func layerEntries(binaryName string, binary []byte) []layerEntry {
	return []layerEntry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: nonRootID, gid: nonRootID, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: binDir + "/", mode: 0o755, dir: true},
		{name: binDir + "/" + binaryName, mode: 0o755, data: binary},
	}
}

// layerTar is the uncompressed layer: a tar of layerEntries with every
// modification time set to mtime.
func layerTar(entries []layerEntry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, e := range entries {
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     e.name,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			Size:     int64(len(e.data)),
			ModTime:  mtime,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// buildImage makes the image: no base, one layer, OCI media types.
func buildImage(o options) (v1.Image, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := checkBinary(o.Binary, o.Arch); err != nil {
		return nil, err
	}
	binary, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	data, err := layerTar(layerEntries(o.Name, binary), o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}

	created := v1.Time{Time: o.Created.UTC().Truncate(time.Second)}
	entrypoint := "/" + binDir + "/" + o.Name
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: o.Arch,
		OS:           "linux",
		Created:      created,
		Config: v1.Config{
			Entrypoint: []string{entrypoint},
			User:       fmt.Sprintf("%d:%d", nonRootID, nonRootID),
			WorkingDir: "/",
			Env:        []string{pathEnv},
			Labels:     o.labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "strata hack/image: " + entrypoint + ", /etc/passwd, /etc/group",
		},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

// writeTarball writes img as a docker-compatible tarball (manifest.json
// with ref as its RepoTags entry) that `docker load` and `kind load
// image-archive` accept. The file appears only once complete.
func writeTarball(path string, ref name.Tag, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// push uploads img to ref's registry with the credentials of
// authn.DefaultKeychain (~/.docker/config.json, $DOCKER_CONFIG, credential
// helpers).
func push(ctx context.Context, ref name.Tag, img v1.Image) error {
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
