package release

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/dolphin-operator/dolphin/test/oci"
)

// CheckAgainstDockerfile compares a built image with its Dockerfile's final stage: every
// LABEL, the last USER, WORKDIR, ENTRYPOINT and CMD, and something at every COPY and ADD
// destination. It reads the Dockerfile afresh, so an image built from an older text fails.
func CheckAgainstDockerfile(tarball, dockerfile string, buildArgs map[string]string) error {
	d, err := ParseDockerfile(dockerfile)
	if err != nil {
		return err
	}
	cfg, files, err := oci.ReadImage(tarball)
	if err != nil {
		return err
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	workdir := "/"
	vars := map[string]string{}
	for _, ins := range d.Final().Instructions {
		ins, err := expand(ins, vars, buildArgs)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", dockerfile, ins.Line, err)
		}
		switch ins.Cmd {
		case "LABEL":
			kv, err := keyValues(ins)
			if err != nil {
				return err
			}
			for k, v := range kv {
				if got := cfg.Config.Labels[k]; got != v {
					bad("label %s is %q, the Dockerfile says %q", k, got, v)
				}
			}
		case "USER":
			if want := strings.Join(ins.Args, ""); cfg.Config.User != want {
				bad("user is %q, the Dockerfile says %q", cfg.Config.User, want)
			}
		case "WORKDIR":
			workdir = resolve(workdir, strings.Join(ins.Args, " "))
			if cfg.Config.WorkingDir != workdir {
				bad("working folder is %q, the Dockerfile says %q", cfg.Config.WorkingDir, workdir)
			}
		case "ENTRYPOINT":
			if want := command(ins); !slices.Equal(cfg.Config.Entrypoint, want) {
				bad("entrypoint is %q, the Dockerfile says %q", cfg.Config.Entrypoint, want)
			}
		case "CMD":
			if want := command(ins); !slices.Equal(cfg.Config.Cmd, want) {
				bad("cmd is %q, the Dockerfile says %q", cfg.Config.Cmd, want)
			}
		case "COPY", "ADD":
			dst := resolve(workdir, ins.Args[len(ins.Args)-1])
			if !hasUnder(files, strings.TrimPrefix(dst, "/")) {
				bad("nothing at %s, where line %d copies %s", dst, ins.Line, strings.Join(ins.Args[:len(ins.Args)-1], " "))
			}
		}
	}
	return errors.Join(errs...)
}

// hasUnder reports whether the image has p, or anything below it.
func hasUnder(files map[string]oci.File, p string) bool {
	if p == "" {
		return len(files) > 0
	}
	if _, ok := files[p]; ok {
		return true
	}
	for f := range files {
		if strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// CheckBundle checks a bundle image as OLM reads it: the registry+v1 labels, each equal to
// the bundle's metadata/annotations.yaml, and the bundle's manifests, metadata and scorecard
// configuration at the paths the labels name, byte for byte, with nothing else there.
func CheckBundle(tarball, bundleDir string) error {
	cfg, files, err := oci.ReadImage(tarball)
	if err != nil {
		return err
	}
	var errs []error
	raw, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		return fmt.Errorf("the bundle: %w", err)
	}
	var ann struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(raw, &ann); err != nil {
		return fmt.Errorf("the bundle's annotations.yaml: %w", err)
	}
	labels := cfg.Config.Labels
	for k, v := range ann.Annotations {
		if labels[k] != v {
			errs = append(errs, fmt.Errorf("label %s is %q, metadata/annotations.yaml says %q", k, labels[k], v))
		}
	}
	for label, want := range map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1": "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":  "metadata/",
	} {
		if labels[label] != want {
			errs = append(errs, fmt.Errorf("label %s is %q, OLM reads %q", label, labels[label], want))
		}
	}
	for _, sub := range []string{"manifests", "metadata", "tests/scorecard"} {
		if err := sameTree(files, filepath.Join(bundleDir, sub), sub); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckCatalog checks a catalog image as OLM's registry pod runs it: the configs label,
// opm serving /configs with its cache, the catalog's files byte for byte at /configs, a
// cache, and the binaries the pod's command and probes run.
func CheckCatalog(tarball, configs string) error {
	cfg, files, err := oci.ReadImage(tarball)
	if err != nil {
		return err
	}
	var errs []error
	if got := cfg.Config.Labels["operators.operatorframework.io.index.configs.v1"]; got != "/configs" {
		errs = append(errs, fmt.Errorf("label operators.operatorframework.io.index.configs.v1 is %q, want /configs", got))
	}
	if run := append(slices.Clone(cfg.Config.Entrypoint), cfg.Config.Cmd...); !slices.Equal(run,
		[]string{"/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache"}) {
		errs = append(errs, fmt.Errorf("the image runs %q, not opm serving /configs with its cache", run))
	}
	if err := sameTree(files, configs, "configs"); err != nil {
		errs = append(errs, err)
	}
	if !hasUnder(files, "tmp/cache") {
		errs = append(errs, errors.New("no opm cache at /tmp/cache"))
	}
	for _, bin := range []string{"bin/opm", "bin/grpc_health_probe"} {
		if f, ok := files[bin]; !ok || f.Mode&0o111 == 0 {
			errs = append(errs, fmt.Errorf("no executable /%s", bin))
		}
	}
	return errors.Join(errs...)
}

// CheckOperator checks the operator image: the manager binary at /manager as its
// entrypoint, run as the non-root user 65532.
func CheckOperator(tarball, manager string) error {
	cfg, files, err := oci.ReadImage(tarball)
	if err != nil {
		return err
	}
	var errs []error
	want, err := fileSHA(manager)
	if err != nil {
		return err
	}
	if f := files["manager"]; f.SHA256 != want || f.Mode&0o111 == 0 {
		errs = append(errs, errors.New("/manager is not the manager binary, executable"))
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) {
		errs = append(errs, fmt.Errorf("entrypoint %q, want /manager", cfg.Config.Entrypoint))
	}
	if cfg.Config.User != "65532:65532" {
		errs = append(errs, fmt.Errorf("user %q, want 65532:65532", cfg.Config.User))
	}
	if !strings.Contains(string(files["etc/passwd"].Content), ":65532:65532:") {
		errs = append(errs, errors.New("/etc/passwd has no user 65532"))
	}
	return errors.Join(errs...)
}

// sameTree checks that the image holds, under at, exactly the regular files of the host
// folder dir, with the same content.
func sameTree(files map[string]oci.File, dir, at string) error {
	want := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum, err := fileSHA(p)
		want[path.Join(at, filepath.ToSlash(rel))] = sum
		return err
	})
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	var errs []error
	for p, sum := range want {
		if f, ok := files[p]; !ok {
			errs = append(errs, fmt.Errorf("no /%s", p))
		} else if f.SHA256 != sum {
			errs = append(errs, fmt.Errorf("/%s differs from %s", p, filepath.Join(dir, strings.TrimPrefix(p, at+"/"))))
		}
	}
	for p, f := range files {
		if strings.HasPrefix(p, at+"/") && !f.Dir && want[p] == "" {
			errs = append(errs, fmt.Errorf("/%s is not in %s", p, dir))
		}
	}
	return errors.Join(errs...)
}

func fileSHA(p string) (string, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(raw)
	return hex.EncodeToString(s[:]), nil
}
