package olm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
	"github.com/dolphin-operator/dolphin/test/oci"
	"github.com/dolphin-operator/dolphin/test/release"
)

// Images are the release images (`make release-images`) pushed to the ground's registry
// under the names releases publish them as, and what catalog images are built from.
type Images struct {
	reg      *localcluster.Registry
	manifest *release.Manifest
	opm      oci.Spec
	work     string
}

// PushImages pushes every image release-images built (its manifest at manifestPath,
// default $DOLPHIN_RELEASE_IMAGES) to reg; work is a folder for catalog builds.
func PushImages(ctx context.Context, reg *localcluster.Registry, manifestPath, work string) (*Images, error) {
	if reg == nil {
		return nil, fmt.Errorf("olm: the ground runs no registry (start it with Mirrors: %s)", release.Host)
	}
	if manifestPath == "" {
		manifestPath = os.Getenv("DOLPHIN_RELEASE_IMAGES")
	}
	m, err := release.ReadManifest(manifestPath)
	if err != nil {
		return nil, err
	}
	if err := m.PushTo(ctx, reg); err != nil {
		return nil, err
	}
	opm, err := m.Upstream.OPMImage(filepath.Join(work, "upstream"))
	if err != nil {
		return nil, err
	}
	return &Images{reg: reg, manifest: m, opm: opm, work: work}, nil
}

// OPM is opm's image, which the catalog operator's unpack Jobs extract bundles with.
func (i *Images) OPM() string { return i.opm.Name }

// Util is OLM's image, whose cpb the unpack Jobs copy into the bundle's container.
func (i *Images) Util() string { return release.OLMRepo + ":" + i.manifest.Upstream.OLMVersion }

// PublishCatalog builds catalog.Dockerfile's image of the file-based catalog in configs
// (opm's cache made as its builder stage makes it), tagged tag, and pushes it. It returns
// the image's reference and how long building and pushing took.
func (i *Images) PublishCatalog(ctx context.Context, configs, tag string) (string, time.Duration, error) {
	start := time.Now()
	name := release.CatalogRepo + ":" + tag
	work := filepath.Join(i.work, "catalog-"+tag)
	spec, err := release.Catalog(ctx, ground.RepoRoot(), configs, i.opm, i.manifest.Upstream.OPM, work, name)
	if err != nil {
		return "", 0, err
	}
	b, err := oci.Build(spec, filepath.Join(work, "image"))
	if err != nil {
		return "", 0, err
	}
	// What OLM's registry pod needs of it, and what catalog.Dockerfile says.
	if err := release.CheckCatalog(b.Tarball, configs); err != nil {
		return "", 0, fmt.Errorf("catalog image %s: %w", name, err)
	}
	if err := release.CheckAgainstDockerfile(b.Tarball, filepath.Join(ground.RepoRoot(), "catalog.Dockerfile"), nil); err != nil {
		return "", 0, fmt.Errorf("catalog image %s: %w", name, err)
	}
	if err := i.reg.Push(ctx, b.Tarball, name); err != nil {
		return "", 0, err
	}
	return name, time.Since(start), nil
}
