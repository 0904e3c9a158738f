package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dolphin-operator/dolphin/test/oci"
)

// Where a release's images are published (the Makefile's IMAGE_TAG_BASE and the bundle's
// scorecard configuration), and the operator-framework's.
const (
	// Host is the registry every release image is published on.
	Host               = "quay.io"
	OperatorRepo       = Host + "/dolphin-operator/dolphin-operator"
	BundleRepo         = OperatorRepo + "-bundle"
	CatalogRepo        = OperatorRepo + "-catalog"
	ScorecardTestsRepo = Host + "/dolphin-operator/dolphin-scorecard-tests"
	OPMRepo            = Host + "/operator-framework/opm"
	OLMRepo            = Host + "/operator-framework/olm"
	ScorecardTestRepo  = Host + "/operator-framework/scorecard-test"
	ScorecardUntarRepo = Host + "/operator-framework/scorecard-untar"
)

// Operator is the Dockerfile's image of a static manager binary (its builder stage's
// /workspace/manager). root holds the Dockerfile.
func Operator(root, manager, name string) (oci.Spec, error) {
	return buildFile(filepath.Join(root, "Dockerfile"), Inputs{Name: name, Context: root,
		Bases:  map[string]oci.Spec{DistrolessNonroot: Nonroot()},
		Stages: map[string]map[string]string{"builder": {"/workspace/manager": manager}}})
}

// Bundle is bundle.Dockerfile's image; root holds the Dockerfile and bundle/ (its build
// context: a checkout, or a release's tree).
func Bundle(root, name string) (oci.Spec, error) {
	return buildFile(filepath.Join(root, "bundle.Dockerfile"), Inputs{Name: name, Context: root})
}

// ScorecardTests is scorecard/Dockerfile's image of the static dolphin-scorecard-tests binary.
func ScorecardTests(root, binary, name string) (oci.Spec, error) {
	return buildFile(filepath.Join(root, "scorecard", "Dockerfile"), Inputs{Name: name, Context: root,
		Bases:  map[string]oci.Spec{DistrolessNonroot: Nonroot()},
		Stages: map[string]map[string]string{"builder": {"/workspace/dolphin-scorecard-tests": binary}}})
}

// Catalog is catalog.Dockerfile's image of the file-based catalog in configs, on the opm
// image opm (its spec, named as the Dockerfile's FROM). The builder stage's RUN, opm's
// cache, is run here with the opm binary, its paths moved into work.
func Catalog(ctx context.Context, root, configs string, opm oci.Spec, opmBinary, work, name string) (oci.Spec, error) {
	d, err := ParseDockerfile(filepath.Join(root, "catalog.Dockerfile"))
	if err != nil {
		return oci.Spec{}, err
	}
	if len(d.Stages) != 2 || d.Stages[0].Name != "builder" || d.Stages[0].From != opm.Name {
		return oci.Spec{}, fmt.Errorf("%s: want a builder stage FROM %s, then the final stage", d.Path, opm.Name)
	}
	outputs, err := runBuilder(ctx, d.Stages[0], configs, opmBinary, work)
	if err != nil {
		return oci.Spec{}, fmt.Errorf("%s: %w", d.Path, err)
	}
	return Build(d, Inputs{Name: name, Context: root, Bases: map[string]oci.Spec{opm.Name: opm},
		Stages: map[string]map[string]string{"builder": outputs}})
}

// runBuilder carries out the catalog's builder stage: its ADD of the catalog to /configs
// and its RUN lines of /bin/opm, each path the stage wrote (/configs, /tmp/cache) a folder
// under work. It returns the stage's folders by their paths in the stage.
func runBuilder(ctx context.Context, st Stage, configs, opmBinary, work string) (map[string]string, error) {
	paths := map[string]string{}
	for _, ins := range st.Instructions {
		switch {
		case (ins.Cmd == "ADD" || ins.Cmd == "COPY") && len(ins.Args) == 2 && len(ins.Flags) == 0 && ins.Args[0] == "catalog":
			paths[ins.Args[1]] = configs
		case ins.Cmd == "RUN" && ins.Exec && len(ins.Args) > 0 && ins.Args[0] == "/bin/opm":
			args := slices.Clone(ins.Args[1:])
			for i, a := range args {
				args[i] = mapPaths(a, paths, work)
			}
			ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			out, err := exec.CommandContext(ctx, opmBinary, args...).CombinedOutput()
			cancel()
			if err != nil {
				return nil, fmt.Errorf("line %d, opm %s: %w\n%s", ins.Line, strings.Join(args, " "), err, out)
			}
		default:
			return nil, fmt.Errorf("line %d: the builder stage may only ADD catalog and RUN /bin/opm in exec form, not %s %s", ins.Line, ins.Cmd, ins.Raw)
		}
	}
	return paths, nil
}

// mapPaths rewrites an argument that is, or ends in =, an absolute stage path: a path the
// stage already has maps to its folder; a new one (an output) to a fresh folder under work.
func mapPaths(arg string, paths map[string]string, work string) string {
	prefix, p := "", arg
	if k, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(k, "-") {
		prefix, p = k+"=", v
	}
	if !strings.HasPrefix(p, "/") {
		return arg
	}
	host, ok := paths[p]
	if !ok {
		host = filepath.Join(work, strings.ReplaceAll(strings.Trim(p, "/"), "/", "_"))
		_ = os.RemoveAll(host)
		paths[p] = host
	}
	return prefix + host
}

// Upstream are the operator-framework's pieces, from the pinned modules: their folders
// (the Dockerfiles and files they copy), versions and the binaries built from them.
type Upstream struct {
	RegistryModule, OLMModule, SDKModule string
	OPMVersion, OLMVersion, SDKVersion   string
	OPM, GRPCHealthProbe                 string
	CopyContent, CPB, ScorecardTest      string
	Busybox                              Busybox
}

// OPMImage is operator-registry's own opm image (release/goreleaser.opm.Dockerfile): opm,
// grpc_health_probe (which OLM's catalog pods' probes run) and nsswitch.conf on distroless
// :debug, user 1001.
func (u Upstream) OPMImage(work string) (oci.Spec, error) {
	debug, err := Debug(u.Busybox)
	if err != nil {
		return oci.Spec{}, err
	}
	ctxDir, err := contextOf(filepath.Join(work, "opm-context"), map[string]string{
		"nsswitch.conf":   filepath.Join(u.RegistryModule, "nsswitch.conf"),
		"linux/amd64/opm": u.OPM,
	})
	if err != nil {
		return oci.Spec{}, err
	}
	return buildFile(filepath.Join(u.RegistryModule, "release", "goreleaser.opm.Dockerfile"), Inputs{
		Name: OPMRepo + ":" + u.OPMVersion, Context: ctxDir,
		Bases:     map[string]oci.Spec{DistrolessDebug: debug},
		Stages:    map[string]map[string]string{"grpc_health_probe": {"/ko-app/grpc-health-probe": u.GRPCHealthProbe}},
		BuildArgs: map[string]string{"TARGETOS": "linux", "TARGETARCH": "amd64"},
	})
}

// UtilImage is OLM's image as its bundle unpack Jobs use it: distroless :debug with
// busybox's cp linked at /bin/cp (OLM's Dockerfile's one RUN) and OLM's cpb and
// copy-content at /bin, user 1001, the Dockerfile's labels, ports and entrypoint. Not
// carried: the olm, catalog and package-server binaries the Dockerfile also copies
// (~200 MB), which the ground runs as processes (olm, catalog) or not at all
// (package-server); so the entrypoint, /bin/olm, names a file the image lacks, and the
// unpack Jobs, which give their own commands, never run it.
func (u Upstream) UtilImage() (oci.Spec, error) {
	s, err := Debug(u.Busybox)
	if err != nil {
		return oci.Spec{}, err
	}
	s.Name = OLMRepo + ":" + u.OLMVersion
	s.Entries = append(s.Entries, oci.Entry{Path: "bin", Dir: true}, oci.Entry{Path: "bin/cp", Link: "/busybox/cp"},
		oci.Entry{Path: "bin/cpb", File: u.CPB, Mode: 0o755}, oci.Entry{Path: "bin/copy-content", File: u.CopyContent, Mode: 0o755})
	s.Config.User, s.Config.WorkingDir = "1001", "/"
	s.Config.Entrypoint = []string{"/bin/olm"}
	s.Config.Labels = map[string]string{"stage": "olm"}
	s.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}, "5443/tcp": {}}
	return s, nil
}

// ScorecardTestImage is operator-sdk's scorecard-test image (images/scorecard-test/
// Dockerfile): the static binary, user 1001 with its home. Its base, UBI minimal, stands
// here as a root file system with only passwd, group and /tmp: the binary needs nothing more.
func (u Upstream) ScorecardTestImage() (oci.Spec, error) {
	const ubi = "registry.access.redhat.com/ubi9/ubi-minimal:9.7"
	base := oci.Spec{Entries: BaseEntries(), Config: v1.Config{Env: []string{distrolessPath}}}
	return buildFile(filepath.Join(u.SDKModule, "images", "scorecard-test", "Dockerfile"), Inputs{
		Name:   ScorecardTestRepo + ":" + u.SDKVersion,
		Bases:  map[string]oci.Spec{ubi: base},
		Stages: map[string]map[string]string{"builder": {"/workspace/build/scorecard-test": u.ScorecardTest}},
		Runs:   sdkUserRun("scorecard-test"),
	})
}

// ScorecardUntarImage is operator-sdk's scorecard-untar image (images/scorecard-untar/
// Dockerfile), whose tar unpacks the bundle into each scorecard test pod. Its base, UBI,
// stands here as busybox (tar with gzip, a shell) under /usr/bin. Scorecard names it by a
// digest of the published image; runs here name it by the SDK's version (--untar-image).
func (u Upstream) ScorecardUntarImage() (oci.Spec, error) {
	const ubi = "registry.access.redhat.com/ubi9/ubi:9.7"
	busybox, err := u.Busybox.entries("usr/bin")
	if err != nil {
		return oci.Spec{}, err
	}
	base := oci.Spec{Entries: append(BaseEntries(), busybox...), Config: v1.Config{Env: []string{distrolessPath}}}
	return buildFile(filepath.Join(u.SDKModule, "images", "scorecard-untar", "Dockerfile"), Inputs{
		Name:  ScorecardUntarRepo + ":" + u.SDKVersion,
		Bases: map[string]oci.Spec{ubi: base},
		Runs:  sdkUserRun("scorecard-untar"),
	})
}

// sdkUserRun is the effect of the RUN line with which operator-sdk's image Dockerfiles add
// their user (uid 1001, group 0, home /opt/<user>, from their ENV) to /etc/passwd.
func sdkUserRun(user string) map[string][]oci.Entry {
	line := fmt.Sprintf("%s:x:1001:0:%s user:/opt/%s:/sbin/nologin\n", user, user, user)
	return map[string][]oci.Entry{
		`echo "${USER_NAME}:x:${USER_UID}:0:${USER_NAME} user:${HOME}:/sbin/nologin" >> /etc/passwd`: {
			{Path: "etc/passwd", Content: []byte(basePasswd + line)}},
	}
}

func buildFile(dockerfile string, in Inputs) (oci.Spec, error) {
	d, err := ParseDockerfile(dockerfile)
	if err != nil {
		return oci.Spec{}, err
	}
	return Build(d, in)
}
