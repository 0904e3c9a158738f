package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// makefileVersion is the VERSION the Makefile releases.
func makefileVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(raw)
	require.NotNil(t, m, "the Makefile sets VERSION")
	return string(m[1])
}

func tool(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(os.Getenv("DOLPHIN_BIN_DIR"), name)
	_, err := os.Stat(path)
	require.NoError(t, err, "make krew builds %s into DOLPHIN_BIN_DIR", name)
	return path
}

// The committed manifest is what the generator writes for the Makefile's VERSION (its
// SHA-256s are the release run's), and krew's own validator accepts it: structure, every
// platform supported, no two selecting the same one.
func TestTheCommittedKrewManifestIsTheReleases(t *testing.T) {
	path := filepath.Join(repoRoot(t), "plugins", "dolphin.yaml")
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "make plugin-release writes it")
	version, sums, err := Sums(raw)
	require.NoError(t, err)
	require.Equal(t, makefileVersion(t), version, "make plugin-release after a version change")
	want, err := Manifest(version, sums)
	require.NoError(t, err)
	require.Equal(t, string(want), string(raw))

	out, err := exec.Command(tool(t, "validate-krew-manifest"), "-manifest", path, "-skip-install").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// An archive packs the same bytes twice, and krew installs it from its manifest (checking
// its SHA-256 and layout, the LICENSE krew's index asks for included); the installed
// plugin runs.
func TestKrewInstallsTheReleaseArchive(t *testing.T) {
	dir := t.TempDir()
	p := Platform{runtime.GOOS, runtime.GOARCH}
	version := makefileVersion(t)
	bin := filepath.Join(dir, "build", p.Binary())
	require.NoError(t, Build(repoRoot(t), version, p, bin))
	license, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE"))
	require.NoError(t, err)
	binary, err := os.ReadFile(bin)
	require.NoError(t, err)
	var a, b bytes.Buffer
	require.NoError(t, Pack(&a, p, binary, license))
	require.NoError(t, Pack(&b, p, binary, license))
	require.Equal(t, a.Bytes(), b.Bytes(), "packing is reproducible")

	archive := filepath.Join(dir, ArchiveName(version, p))
	sum, err := PackFile(archive, bin, p, license)
	require.NoError(t, err)
	sums := map[Platform]string{}
	for _, q := range Platforms {
		sums[q] = "0000000000000000000000000000000000000000000000000000000000000000"
	}
	sums[p] = sum
	manifest, err := Manifest(version, sums)
	require.NoError(t, err)
	mpath := filepath.Join(dir, "dolphin.yaml")
	require.NoError(t, os.WriteFile(mpath, manifest, 0o644))

	root := filepath.Join(dir, "krew")
	install := exec.Command(tool(t, "kubectl-krew"), "install", "--manifest", mpath, "--archive", archive)
	install.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_OS="+p.OS, "KREW_ARCH="+p.Arch)
	out, err := install.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, f := range []string{"LICENSE", p.Binary()} {
		matches, err := filepath.Glob(filepath.Join(root, "store", "dolphin", "*", f))
		require.NoError(t, err)
		require.Len(t, matches, 1, "krew installed %s", f)
	}
	out, err = exec.Command(filepath.Join(root, "bin", "kubectl-dolphin"), "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "kubectl-dolphin "+version+" (commit v"+version+")\n", string(out))

	// A wrong SHA-256 is refused.
	sums[p] = "1111111111111111111111111111111111111111111111111111111111111111"
	manifest, err = Manifest(version, sums)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mpath, manifest, 0o644))
	again := exec.Command(tool(t, "kubectl-krew"), "install", "--manifest", mpath, "--archive", archive)
	again.Env = append(os.Environ(), "KREW_ROOT="+filepath.Join(dir, "krew2"), "KREW_OS="+p.OS, "KREW_ARCH="+p.Arch)
	out, err = again.CombinedOutput()
	require.Error(t, err, "%s", out)
}
