// Command release-images builds, without a container engine, the images a Dolphin release
// publishes and the operator-framework images OLM runs them with, as OCI layout tarballs
// (test/oci) for the OLM tier to push to the test ground's registry:
//
//   - this checkout's operator, bundle and scorecard-tests images, from its Dockerfiles;
//   - every earlier release's, from the commit it was built from (config/catalog/releases.yaml):
//     that commit's tree is exported with git archive, its manager and scorecard tests built
//     from it, its images from its own Dockerfiles; its bundle must equal the frozen
//     config/catalog/bundles/<version>/;
//   - opm's, OLM's util and operator-sdk's scorecard-test and scorecard-untar images, from
//     the pinned modules.
//
// --manifest receives the list of images (name, tarball, digest) and the inputs the OLM
// tier needs to build catalog images itself (test/release.Upstream).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dolphin-operator/dolphin/test/oci"
	"github.com/dolphin-operator/dolphin/test/release"
)

func main() {
	var o options
	flag.StringVar(&o.root, "repo-root", ".", "the checkout")
	flag.StringVar(&o.out, "out", "", "folder for the tarballs (required)")
	flag.StringVar(&o.cache, "cache", "", "folder for the earlier releases' trees and builds (required)")
	flag.StringVar(&o.manifest, "manifest", "", "where to write the manifest (required)")
	flag.StringVar(&o.version, "version", "", "this checkout's version (required)")
	flag.StringVar(&o.manager, "manager", "", "this checkout's static manager binary (required)")
	flag.StringVar(&o.scorecardTests, "scorecard-tests", "", "this checkout's static dolphin-scorecard-tests binary (required)")
	u := &o.upstream
	flag.StringVar(&u.RegistryModule, "registry-module", "", "operator-registry's module folder")
	flag.StringVar(&u.OLMModule, "olm-module", "", "OLM's module folder")
	flag.StringVar(&u.SDKModule, "sdk-module", "", "operator-sdk's module folder")
	flag.StringVar(&u.OPMVersion, "opm-version", "", "operator-registry's version")
	flag.StringVar(&u.OLMVersion, "olm-version", "", "OLM's version")
	flag.StringVar(&u.SDKVersion, "sdk-version", "", "operator-sdk's version")
	flag.StringVar(&u.OPM, "opm", "", "the opm binary")
	flag.StringVar(&u.GRPCHealthProbe, "grpc-health-probe", "", "the grpc_health_probe binary")
	flag.StringVar(&u.CPB, "cpb", "", "OLM's cpb binary")
	flag.StringVar(&u.CopyContent, "copy-content", "", "OLM's copy-content binary")
	flag.StringVar(&u.ScorecardTest, "scorecard-test", "", "operator-sdk's scorecard-test binary")
	var busybox string
	flag.StringVar(&busybox, "busybox", "", "the provisioned busybox folder (hack/busybox/provision.sh)")
	flag.Parse()
	u.Busybox = release.BusyboxIn(busybox)
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "release-images:", err)
		os.Exit(1)
	}
}

type options struct {
	root, out, cache, manifest, version, manager, scorecardTests string
	upstream                                                     release.Upstream
}

func run(ctx context.Context, o options) error {
	for flagName, v := range map[string]string{"out": o.out, "cache": o.cache, "manifest": o.manifest,
		"version": o.version, "manager": o.manager, "scorecard-tests": o.scorecardTests} {
		if v == "" {
			return fmt.Errorf("--%s is required", flagName)
		}
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	var specs []oci.Spec
	add := func(s oci.Spec, err error) error {
		if err != nil {
			return err
		}
		specs = append(specs, s)
		return nil
	}
	tag := ":v" + o.version
	if err := errorsOf(
		add(release.Operator(root, o.manager, release.OperatorRepo+tag)),
		add(release.Bundle(root, release.BundleRepo+tag)),
		add(release.ScorecardTests(root, o.scorecardTests, release.ScorecardTestsRepo+tag)),
	); err != nil {
		return err
	}
	releases, err := release.ReadReleases(root)
	if err != nil {
		return err
	}
	for _, r := range releases {
		built, err := release.BuildRelease(ctx, root, r, filepath.Join(o.cache, "v"+r.Version))
		if err != nil {
			return err
		}
		specs = append(specs, built...)
	}
	work := filepath.Join(o.cache, "upstream")
	if err := errorsOf(
		add(o.upstream.OPMImage(work)),
		add(o.upstream.UtilImage()),
		add(o.upstream.ScorecardTestImage()),
		add(o.upstream.ScorecardUntarImage()),
	); err != nil {
		return err
	}
	m := release.Manifest{Upstream: o.upstream}
	for _, s := range specs {
		b, err := oci.Build(s, o.out)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\n", b.Name, b.Digest)
		m.Images = append(m.Images, b)
	}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(o.manifest, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("while writing %s: %w", o.manifest, err)
	}
	return nil
}

// errorsOf returns the first error.
func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
