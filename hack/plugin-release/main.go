// Command plugin-release builds what a release publishes of kubectl-dolphin for krew: one
// archive per platform (kubectl-dolphin_v<version>_<os>_<arch>.tar.gz holding the binary
// and LICENSE) and the krew manifest (plugins/dolphin.yaml) naming each archive's release
// download and its SHA-256.
//
// The binaries are built with -trimpath, without VCS stamps and with the release's version
// as their commit, and packed with fixed times and owners (packing the same binary twice
// gives the same bytes: a test). The release uploads the archives of the run that wrote
// the manifest.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Platform is one os/arch the release builds for.
type Platform struct{ OS, Arch string }

// Platforms are the ones released, in the manifest's order.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}

// Binary is the plugin's file name on p.
func (p Platform) Binary() string {
	if p.OS == "windows" {
		return "kubectl-dolphin.exe"
	}
	return "kubectl-dolphin"
}

// ArchiveName is p's archive for version.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("kubectl-dolphin_v%s_%s_%s.tar.gz", version, p.OS, p.Arch)
}

// DownloadBase is where a release's archives are downloaded from.
const DownloadBase = "https://github.com/dolphin-operator/dolphin/releases/download"

func main() {
	var version, out, manifest, license string
	flag.StringVar(&version, "version", "", "the release's version, without v (required)")
	flag.StringVar(&out, "out", "", "folder for the archives (required)")
	flag.StringVar(&manifest, "manifest", "plugins/dolphin.yaml", "where to write the krew manifest")
	flag.StringVar(&license, "license", "LICENSE", "the license file each archive carries")
	flag.Parse()
	if err := run(version, out, manifest, license); err != nil {
		fmt.Fprintln(os.Stderr, "plugin-release:", err)
		os.Exit(1)
	}
}

func run(version, out, manifest, license string) error {
	if version == "" || out == "" {
		return errors.New("--version and --out are required")
	}
	lic, err := os.ReadFile(license)
	if err != nil {
		return fmt.Errorf("while reading the license: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("while creating %s: %w", out, err)
	}
	sums := map[Platform]string{}
	for _, p := range Platforms {
		bin := filepath.Join(out, p.OS+"-"+p.Arch, p.Binary())
		if err := Build(".", version, p, bin); err != nil {
			return err
		}
		sum, err := PackFile(filepath.Join(out, ArchiveName(version, p)), bin, p, lic)
		if err != nil {
			return err
		}
		sums[p] = sum
		fmt.Printf("%s  %s\n", sum, ArchiveName(version, p))
	}
	raw, err := Manifest(version, sums)
	if err != nil {
		return err
	}
	if err := os.WriteFile(manifest, raw, 0o644); err != nil {
		return fmt.Errorf("while writing the manifest: %w", err)
	}
	return nil
}

// Build compiles the plugin of the checkout at root for p into path, as the release does.
func Build(root, version string, p Platform, path string) error {
	v := "github.com/dolphin-operator/dolphin/internal/version"
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -X %s.Version=%s -X %s.GitCommit=v%s", v, version, v, version),
		"-o", path, "./cmd/kubectl-dolphin")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w\n%s", p.OS, p.Arch, err, out)
	}
	return nil
}

// PackFile writes p's archive of the binary at bin and the license to path, and returns
// its SHA-256.
func PackFile(path, bin string, p Platform, license []byte) (string, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("while reading %s: %w", bin, err)
	}
	var b bytes.Buffer
	if err := Pack(&b, p, binary, license); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("while writing %s: %w", path, err)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// Pack writes the archive: the binary and LICENSE at its top, with fixed times and owners.
func Pack(w *bytes.Buffer, p Platform, binary, license []byte) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{p.Binary(), 0o755, binary}, {"LICENSE", 0o644, license}} {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0).UTC(),
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("while packing %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("while packing %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// The krew manifest's shape (krew's index.Plugin, apiVersion v1alpha2).
type (
	plugin struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       pluginSpec     `json:"spec"`
	}
	pluginSpec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Platforms        []platform `json:"platforms"`
	}
	platform struct {
		Selector map[string]map[string]string `json:"selector"`
		URI      string                       `json:"uri"`
		SHA256   string                       `json:"sha256"`
		Files    []map[string]string          `json:"files"`
		Bin      string                       `json:"bin"`
	}
)

// Manifest is the krew manifest of version's archives, whose SHA-256s sums holds.
func Manifest(version string, sums map[Platform]string) ([]byte, error) {
	m := plugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin",
		Metadata: map[string]any{"name": "dolphin"},
		Spec: pluginSpec{Version: "v" + version, Homepage: "https://github.com/dolphin-operator/dolphin",
			ShortDescription: "Drive the MySQL clusters of the Dolphin operator",
			Description: "Shows a Dolphin MySQL cluster as each instance reports it over SQL (role, GTID set,\n" +
				"replication, semi-sync), switches the primary over, pauses and resumes a cluster,\n" +
				"takes a backup, writes a restored cluster's manifest, opens the mysql client on the\n" +
				"primary and writes a support report with every Secret value redacted.\n"}}
	for _, p := range Platforms {
		sum, ok := sums[p]
		if !ok {
			return nil, fmt.Errorf("no SHA-256 for %s/%s", p.OS, p.Arch)
		}
		m.Spec.Platforms = append(m.Spec.Platforms, platform{
			Selector: map[string]map[string]string{"matchLabels": {"os": p.OS, "arch": p.Arch}},
			URI:      fmt.Sprintf("%s/v%s/%s", DownloadBase, version, ArchiveName(version, p)),
			SHA256:   sum,
			Files:    []map[string]string{{"from": p.Binary(), "to": "."}, {"from": "LICENSE", "to": "."}},
			Bin:      p.Binary(),
		})
	}
	raw, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Generated by hack/plugin-release (make plugin-release). DO NOT EDIT.\n"), raw...), nil
}

// Sums reads the SHA-256 of each platform from a manifest Manifest wrote.
func Sums(raw []byte) (version string, sums map[Platform]string, err error) {
	m := plugin{}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		return "", nil, fmt.Errorf("while reading the manifest: %w", err)
	}
	sums = map[Platform]string{}
	for _, p := range m.Spec.Platforms {
		sums[Platform{p.Selector["matchLabels"]["os"], p.Selector["matchLabels"]["arch"]}] = p.SHA256
	}
	return strings.TrimPrefix(m.Spec.Version, "v"), sums, nil
}
