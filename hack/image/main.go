// Command image packages one of Strata's static linux binaries as an OCI
// image, without a container engine: no base image, one layer with the
// binary at /usr/local/bin/<name> and /etc/passwd and /etc/group for the
// user nonroot (65532:65532) it runs as. It writes the image as a tarball
// for `docker load` and `kind load image-archive`, and with --push also
// uploads it. `make images` runs it for the three binaries; see
// docs/images.md.
//
//	go run ./hack/image --binary bin/linux_amd64/strata-agent --version 0.1.0 \
//	  --output bin/images/strata-agent-0.1.0-amd64.tar
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	defaultRegistry = "ghcr.io/strata-dev"
	defaultSource   = "https://github.com/strata-dev/strata"
	defaultLicense  = "Apache-2.0"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run parses the flags, fills the defaults from the environment and git,
// builds the image, writes the tarball and pushes when asked.
func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.Binary, "binary", "", "the static linux binary to package (required)")
	fs.StringVar(&o.Name, "name", "", "the image's and the binary's name (default: the binary's file name)")
	fs.StringVar(&o.Version, "version", "", "the image tag and version label, e.g. 0.1.0 (required)")
	fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "the binary's architecture: amd64 or arm64")
	fs.StringVar(&o.Registry, "registry", cmp.Or(getenv("REGISTRY"), defaultRegistry), "the repository prefix; $REGISTRY, when set, is the default")
	fs.StringVar(&o.Source, "source", defaultSource, "the org.opencontainers.image.source label")
	fs.StringVar(&o.Revision, "revision", "", "the org.opencontainers.image.revision label (default: git rev-parse HEAD)")
	fs.StringVar(&o.License, "license", defaultLicense, "the org.opencontainers.image.licenses label")
	epoch := fs.String("source-date-epoch", getenv("SOURCE_DATE_EPOCH"), "the creation time in seconds since 1970 (default: $SOURCE_DATE_EPOCH, else the commit time of HEAD)")
	output := fs.String("output", "", "the tarball to write (required)")
	doPush := fs.Bool("push", false, "also push the image to the registry with the credentials of ~/.docker/config.json")
	fs.SetOutput(out)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *output == "" || o.Version == "" || o.Binary == "" {
		return errors.New("--binary, --version and --output are required")
	}
	if o.Name == "" {
		o.Name = filepath.Base(o.Binary)
	}
	if o.Revision == "" {
		o.Revision, _ = git("rev-parse", "HEAD") // no label outside a git tree
	}
	if *epoch == "" {
		var err error
		if *epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return fmt.Errorf("no creation time: set SOURCE_DATE_EPOCH or --source-date-epoch (%w)", err)
		}
	}
	seconds, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("source date epoch %q: %w", *epoch, err)
	}
	o.Created = time.Unix(seconds, 0).UTC()

	ref, err := o.reference()
	if err != nil {
		return err
	}
	img, err := buildImage(o)
	if err != nil {
		return err
	}
	if err := writeTarball(*output, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\t%s\t%s\n", *output, ref, digest)
	if *doPush {
		if err := push(ctx, ref, img); err != nil {
			return err
		}
		fmt.Fprintf(out, "pushed %s@%s\n", ref, digest)
	}
	return nil
}

// git runs git in the current directory and returns its trimmed output.
func git(args ...string) (string, error) {
	b, err := exec.Command("git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}
