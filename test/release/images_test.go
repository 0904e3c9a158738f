package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/test/oci"
)

var repoRoot = filepath.Join("..", "..")

// fakeBinary stands for a Go build: these tests check where a binary lands, not the binary.
func fakeBinary(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho "+name+"\n"), 0o755))
	return p
}

// build returns a function that builds a spec's tarball: build(t)(Bundle(...)).
func build(t *testing.T) func(oci.Spec, error) string {
	return func(s oci.Spec, err error) string {
		t.Helper()
		require.NoError(t, err)
		b, err := oci.Build(s, t.TempDir())
		require.NoError(t, err)
		return b.Tarball
	}
}

// Dolphin's images, built from its Dockerfiles, hold what OLM and the kubelet read from them,
// and agree with the Dockerfiles' text.
func TestTheReleaseImagesMatchTheirDockerfilesAndWhatOLMReads(t *testing.T) {
	manager := fakeBinary(t, "manager")
	op := build(t)(Operator(repoRoot, manager, OperatorRepo+":v0.0.0"))
	require.NoError(t, CheckAgainstDockerfile(op, filepath.Join(repoRoot, "Dockerfile"), nil))
	require.NoError(t, CheckOperator(op, manager))

	bundle := build(t)(Bundle(repoRoot, BundleRepo+":v0.0.0"))
	require.NoError(t, CheckAgainstDockerfile(bundle, filepath.Join(repoRoot, "bundle.Dockerfile"), nil))
	require.NoError(t, CheckBundle(bundle, filepath.Join(repoRoot, "bundle")))

	tests := fakeBinary(t, "dolphin-scorecard-tests")
	st := build(t)(ScorecardTests(repoRoot, tests, ScorecardTestsRepo+":v0.0.0"))
	require.NoError(t, CheckAgainstDockerfile(st, filepath.Join(repoRoot, "scorecard", "Dockerfile"), nil))
	cfg, files, err := oci.ReadImage(st)
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/bin/dolphin-scorecard-tests"}, cfg.Config.Entrypoint)
	require.NotZero(t, files["usr/local/bin/dolphin-scorecard-tests"].Mode&0o111, "the tests' binary is executable")
}

// A bundle Dockerfile that breaks what OLM reads gives an image the checks refuse, and an
// image built from an older Dockerfile no longer agrees with the current one.
func TestABrokenBundleImageIsRefused(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(repoRoot, "bundle.Dockerfile"))
	require.NoError(t, err)
	bundleDir, err := filepath.Abs(filepath.Join(repoRoot, "bundle"))
	require.NoError(t, err)
	for name, tc := range map[string]struct{ from, to, says string }{
		"a wrong mediatype label": {"bundle.mediatype.v1=registry+v1", "bundle.mediatype.v1=plain+v0",
			"label operators.operatorframework.io.bundle.mediatype.v1 is \"plain+v0\""},
		"a wrong channels label": {"bundle.channels.v1=candidate,fast,stable", "bundle.channels.v1=beta",
			"label operators.operatorframework.io.bundle.channels.v1 is \"beta\""},
		"no /metadata": {"COPY bundle/metadata /metadata/\n", "", "no /metadata/annotations.yaml"},
		"the manifests elsewhere": {"COPY bundle/manifests /manifests/", "COPY bundle/manifests /usr/share/manifests/",
			"no /manifests/dolphin-operator.clusterserviceversion.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, string(good), tc.from)
			root := t.TempDir()
			require.NoError(t, os.Symlink(bundleDir, filepath.Join(root, "bundle")))
			require.NoError(t, os.WriteFile(filepath.Join(root, "bundle.Dockerfile"),
				[]byte(strings.Replace(string(good), tc.from, tc.to, 1)), 0o644))
			broken := build(t)(Bundle(root, BundleRepo+":broken"))
			err := CheckBundle(broken, bundleDir)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.says)
			require.Error(t, CheckAgainstDockerfile(broken, filepath.Join(repoRoot, "bundle.Dockerfile"), nil),
				"the broken image disagrees with the committed Dockerfile")
		})
	}
}
