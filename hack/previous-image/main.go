// Command previous-image builds, without a container engine, the operator image of an
// earlier commit of this repository (the "previous build" the upgrade test starts from):
// the commit's tree is exported with git archive, its manager built from it and its image
// made from its own Dockerfile (test/release.BuildOperatorAt), as an OCI layout tarball.
// --manifest receives the list (name, tarball, digest) the test ground imports, in the
// form hack/images writes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/oci"
	"github.com/dolphin-operator/dolphin/test/release"
)

func main() {
	var root, commit, version, cache, out, manifest string
	flag.StringVar(&root, "repo-root", ".", "the checkout")
	flag.StringVar(&commit, "commit", "", "the full commit to build (required)")
	flag.StringVar(&version, "version", "", "the version its binary reports (required)")
	flag.StringVar(&cache, "cache", "", "folder for the commit's tree and manager, kept between runs (required)")
	flag.StringVar(&out, "out", "", "folder for the tarball (required)")
	flag.StringVar(&manifest, "manifest", "", "where to write the list of images (required)")
	flag.Parse()
	if err := run(context.Background(), root, commit, version, cache, out, manifest); err != nil {
		fmt.Fprintln(os.Stderr, "previous-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root, commit, version, cache, out, manifest string) error {
	if len(commit) != 40 || version == "" || cache == "" || out == "" || manifest == "" {
		return fmt.Errorf("--commit (40 hex digits), --version, --cache, --out and --manifest are required")
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	spec, err := release.BuildOperatorAt(ctx, root, commit, version, cache, ground.PreviousOperatorImage(commit))
	if err != nil {
		return err
	}
	b, err := oci.Build(spec, out)
	if err != nil {
		return err
	}
	fmt.Printf("%s\t%s\n", b.Name, b.Digest)
	raw, _ := json.MarshalIndent([]oci.Built{b}, "", "  ")
	if err := os.WriteFile(manifest, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("while writing %s: %w", manifest, err)
	}
	return nil
}
