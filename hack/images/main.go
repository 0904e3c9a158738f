// Command images builds the container images the local test ground runs (test/ground's
// ImageSpecs: the operator, MySQL, mysqld_exporter, the pods' sandbox, CoreDNS), without a container engine
// or a registry, from what the tool cache already holds. Each is an OCI layout tarball
// under --out (the shared cache), cached by its inputs (test/oci), except the operator's,
// which every manager build changes: it goes to --operator-out, a folder of the checkout's,
// so that checkouts sharing the cache never remove each other's. --manifest receives the
// list (name, tarball, digest) that the test ground imports into its nodes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/oci"
)

func main() {
	var in ground.ImageInputs
	var out, operatorOut, manifest string
	flag.StringVar(&out, "out", "", "folder for the image tarballs (required)")
	flag.StringVar(&operatorOut, "operator-out", "", "folder for the operator's tarball, which changes with every build (default: --out)")
	flag.StringVar(&manifest, "manifest", "", "where to write the list of images built (required)")
	flag.StringVar(&in.Manager, "manager", "", "the static manager binary")
	flag.StringVar(&in.Version, "version", "", "the operator's version (the image's tag is v<version>)")
	flag.StringVar(&in.MySQLRoot, "mysql-root", "", "the unpacked MySQL tree (hack/mysql/provision.sh)")
	flag.StringVar(&in.MySQLVersionFile, "mysql-version-file", "", "its VERSION file (mysqld --version)")
	flag.StringVar(&in.Pause, "pause", "", "the static pause binary")
	flag.StringVar(&in.CoreDNS, "coredns", "", "the static coredns binary")
	flag.StringVar(&in.CoreDNSVersion, "coredns-version", "", "CoreDNS's version")
	flag.StringVar(&in.PrometheusRoot, "prometheus-root", "", "the unpacked Prometheus tree, with mysqld_exporter (hack/prometheus/provision.sh)")
	flag.StringVar(&in.ExporterVersionFile, "exporter-version-file", "", "its EXPORTER_VERSION file (mysqld_exporter --version)")
	flag.Parse()
	if operatorOut == "" {
		operatorOut = out
	}
	if err := run(in, out, operatorOut, manifest); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(in ground.ImageInputs, out, operatorOut, manifest string) error {
	if out == "" || manifest == "" {
		return fmt.Errorf("--out and --manifest are required")
	}
	specs, err := ground.ImageSpecs(in)
	if err != nil {
		return err
	}
	built := make([]oci.Built, 0, len(specs))
	for _, s := range specs {
		dir := out
		if strings.HasPrefix(s.Name, ground.OperatorRepo+":") {
			dir = operatorOut
		}
		b, err := oci.Build(s, dir)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\n", b.Name, b.Digest)
		built = append(built, b)
	}
	raw, _ := json.MarshalIndent(built, "", "  ")
	if err := os.WriteFile(manifest, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("while writing %s: %w", manifest, err)
	}
	return nil
}
