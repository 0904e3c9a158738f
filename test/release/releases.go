package release

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/dolphin-operator/dolphin/test/oci"
)

// Release is a published version and the commit its bundle and images were built from.
type Release struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// ReadReleases reads config/catalog/releases.yaml.
func ReadReleases(root string) ([]Release, error) {
	p := filepath.Join(root, "config", "catalog", "releases.yaml")
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("while reading the releases: %w", err)
	}
	var f struct {
		Releases []Release `json:"releases"`
	}
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	for i, r := range f.Releases {
		if r.Version == "" || len(r.Commit) != 40 {
			return nil, fmt.Errorf("%s: releases[%d] needs a version and a full 40-hex commit", p, i)
		}
	}
	return f.Releases, nil
}

// BuildRelease makes the image specs of an earlier release from its commit, in dir (kept
// between runs: a commit never changes): the commit's tree (git archive), its manager and
// scorecard tests built from that tree as its Dockerfiles' builder stages do, and its
// operator, bundle and scorecard-tests images from its own Dockerfiles. The tree's bundle
// must be the frozen config/catalog/bundles/<version>/.
func BuildRelease(ctx context.Context, root string, r Release, dir string) ([]oci.Spec, error) {
	tree := filepath.Join(dir, "tree")
	if _, err := os.Stat(filepath.Join(tree, ".complete")); err != nil {
		if err := exportTree(ctx, root, r.Commit, tree); err != nil {
			return nil, fmt.Errorf("release %s: %w", r.Version, err)
		}
	}
	if err := sameBundle(filepath.Join(tree, "bundle"), filepath.Join(root, "config", "catalog", "bundles", r.Version)); err != nil {
		return nil, fmt.Errorf("release %s (commit %s): %w", r.Version, r.Commit, err)
	}
	ldflags := fmt.Sprintf("-s -w -X github.com/dolphin-operator/dolphin/internal/version.Version=%s "+
		"-X github.com/dolphin-operator/dolphin/internal/version.GitCommit=%s", r.Version, r.Commit[:7])
	manager := filepath.Join(dir, "manager")
	if err := goBuild(ctx, tree, manager, "./cmd/manager", ldflags); err != nil {
		return nil, fmt.Errorf("release %s: %w", r.Version, err)
	}
	tag := ":v" + r.Version
	op, err := Operator(tree, manager, OperatorRepo+tag)
	if err != nil {
		return nil, err
	}
	bundle, err := Bundle(tree, BundleRepo+tag)
	if err != nil {
		return nil, err
	}
	specs := []oci.Spec{op, bundle}
	if _, err := os.Stat(filepath.Join(tree, "scorecard", "Dockerfile")); err == nil {
		tests := filepath.Join(dir, "dolphin-scorecard-tests")
		if err := goBuild(ctx, tree, tests, "./scorecard/cmd/dolphin-scorecard-tests", "-s -w"); err != nil {
			return nil, fmt.Errorf("release %s: %w", r.Version, err)
		}
		st, err := ScorecardTests(tree, tests, ScorecardTestsRepo+tag)
		if err != nil {
			return nil, err
		}
		specs = append(specs, st)
	}
	return specs, nil
}

// BuildOperatorAt makes the operator image of any commit of this repository (a build, not
// a release: no bundle is checked), named name: the commit's tree and its manager, built
// in dir (kept between runs: a commit never changes), and the image from the tree's own
// Dockerfile. The upgrade tests run it as "the previous build".
func BuildOperatorAt(ctx context.Context, root, commit, version, dir, name string) (oci.Spec, error) {
	tree := filepath.Join(dir, "tree")
	if _, err := os.Stat(filepath.Join(tree, ".complete")); err != nil {
		if err := exportTree(ctx, root, commit, tree); err != nil {
			return oci.Spec{}, fmt.Errorf("build %s: %w", commit, err)
		}
	}
	ldflags := fmt.Sprintf("-s -w -X github.com/dolphin-operator/dolphin/internal/version.Version=%s "+
		"-X github.com/dolphin-operator/dolphin/internal/version.GitCommit=%s", version, commit[:7])
	manager := filepath.Join(dir, "manager")
	if err := goBuild(ctx, tree, manager, "./cmd/manager", ldflags); err != nil {
		return oci.Spec{}, fmt.Errorf("build %s: %w", commit, err)
	}
	return Operator(tree, manager, name)
}

// exportTree writes the commit's tree into dir with git archive. A clone without the
// commit (a shallow one) cannot build the release, and says so.
func exportTree(ctx context.Context, root, commit, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("commit %s is not in this clone (a shallow clone? fetch its history): %w %s", commit, err, out)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w %s", commit, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("unpacking commit %s: %w %s", commit, err, stderr.String())
	}
	return os.WriteFile(filepath.Join(dir, ".complete"), []byte(commit+"\n"), 0o644)
}

// goBuild builds pkg of the tree statically into out, as the Dockerfiles' builder stages
// do; go's build cache makes a rebuild of an unchanged tree quick.
func goBuild(ctx context.Context, tree, out, pkg, ldflags string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s at %s: %w\n%s", pkg, tree, err, b)
	}
	return nil
}

// sameBundle checks that a release tree's bundle/ holds the frozen bundle's manifests and
// metadata, byte for byte.
func sameBundle(tree, frozen string) error {
	for _, sub := range []string{"manifests", "metadata"} {
		want, err := filepath.Glob(filepath.Join(frozen, sub, "*"))
		if err != nil || len(want) == 0 {
			return fmt.Errorf("the frozen bundle %s has no %s/", frozen, sub)
		}
		got, _ := filepath.Glob(filepath.Join(tree, sub, "*"))
		if len(got) != len(want) {
			return fmt.Errorf("bundle/%s has %d files at the release commit, the frozen bundle %d", sub, len(got), len(want))
		}
		for _, w := range want {
			a, err := os.ReadFile(w)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(filepath.Join(tree, sub, filepath.Base(w)))
			if err != nil || !bytes.Equal(a, b) {
				return fmt.Errorf("bundle/%s/%s at the release commit differs from the frozen bundle", sub, filepath.Base(w))
			}
		}
	}
	return nil
}

// Manifest is what release-images built: the images, and the upstream inputs the OLM tier
// builds catalog images from.
type Manifest struct {
	Images   []oci.Built `json:"images"`
	Upstream Upstream    `json:"upstream"`
}

// ReadManifest reads release-images' manifest.
func ReadManifest(p string) (*Manifest, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("release images: %w (`make release-images` writes it)", err)
	}
	m := &Manifest{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

// Pusher uploads an image's tarball under names (the ground's registry).
type Pusher interface {
	Push(ctx context.Context, tarball string, refs ...string) error
}

// PushTo pushes every image under its name.
func (m *Manifest) PushTo(ctx context.Context, p Pusher) error {
	for _, b := range m.Images {
		if err := p.Push(ctx, b.Tarball, b.Name); err != nil {
			return err
		}
	}
	return nil
}

// Image is the built image named name.
func (m *Manifest) Image(name string) (oci.Built, error) {
	for _, b := range m.Images {
		if b.Name == name {
			return b, nil
		}
	}
	var names []string
	for _, b := range m.Images {
		names = append(names, b.Name)
	}
	return oci.Built{}, fmt.Errorf("no image %s was built (built: %s)", name, strings.Join(names, ", "))
}
