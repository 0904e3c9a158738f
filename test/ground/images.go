package ground

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dolphin-operator/dolphin/test/oci"
	"github.com/dolphin-operator/dolphin/test/release"
)

// Names of the local images. The operator is pointed at the MySQL image through its
// RELATED_IMAGE_MYSQL_<series> setting.
const (
	OperatorRepo = "localhost/dolphin/operator"
	MySQLRepo    = "localhost/dolphin/mysql"
	PauseImage   = "localhost/dolphin/pause:1"
	CoreDNSRepo  = "localhost/dolphin/coredns"
	// ExporterRepo is mysqld_exporter's image; the operator is pointed at it through its
	// RELATED_IMAGE_EXPORTER setting.
	ExporterRepo = "localhost/dolphin/mysqld-exporter"
	mysqlUID     = 999
	nonrootUID   = 65532
)

// PreviousOperatorImage names the operator image of an earlier commit, the build an
// upgrade test starts from (hack/previous-image).
func PreviousOperatorImage(commit string) string { return OperatorRepo + "-previous:" + commit[:12] }

// ImageInputs are the files the images are built from.
type ImageInputs struct {
	// Manager is the static manager binary; Version the operator's version (tag v<Version>).
	Manager, Version string
	// MySQLRoot is the unpacked MySQL tree and MySQLVersionFile its `mysqld --version`
	// (hack/mysql/provision.sh writes both).
	MySQLRoot, MySQLVersionFile string
	// Pause and CoreDNS are static binaries; CoreDNSVersion is CoreDNS's version.
	Pause, CoreDNS, CoreDNSVersion string
	// PrometheusRoot is the unpacked Prometheus tree, which holds mysqld_exporter, and
	// ExporterVersionFile its `mysqld_exporter --version` (hack/prometheus/provision.sh).
	PrometheusRoot, ExporterVersionFile string
}

// ImageSpecs are the ground's images: the operator, MySQL, mysqld_exporter, the pods'
// sandbox and CoreDNS.
func ImageSpecs(in ImageInputs) ([]oci.Spec, error) {
	for name, v := range map[string]string{"manager": in.Manager, "version": in.Version, "mysql-root": in.MySQLRoot,
		"mysql-version-file": in.MySQLVersionFile, "pause": in.Pause, "coredns": in.CoreDNS, "coredns-version": in.CoreDNSVersion,
		"prometheus-root": in.PrometheusRoot, "exporter-version-file": in.ExporterVersionFile} {
		if v == "" {
			return nil, fmt.Errorf("images: %s is required", name)
		}
	}
	raw, err := os.ReadFile(in.MySQLVersionFile)
	if err != nil {
		return nil, fmt.Errorf("MySQL version: %w (run `make mysql`)", err)
	}
	mysqlVersion, err := parseMySQLVersion(string(raw))
	if err != nil {
		return nil, err
	}
	raw, err = os.ReadFile(in.ExporterVersionFile)
	if err != nil {
		return nil, fmt.Errorf("mysqld_exporter version: %w (run `make promtool`)", err)
	}
	exporterVersion, err := parseVersion(exporterVersionRE, string(raw))
	if err != nil {
		return nil, err
	}
	operator, err := release.Operator(RepoRoot(), in.Manager, OperatorRepo+":v"+in.Version)
	if err != nil {
		return nil, err
	}
	return []oci.Spec{
		operator,
		mysqlSpec(in.MySQLRoot, mysqlVersion),
		exporterSpec(in.PrometheusRoot, exporterVersion),
		staticSpec(PauseImage, in.Pause, "/pause", nonrootUID),
		staticSpec(CoreDNSRepo+":"+in.CoreDNSVersion, in.CoreDNS, "/coredns", nonrootUID),
	}, nil
}

var (
	mysqldVersion     = regexp.MustCompile(`Ver (\d+\.\d+\.\d+)`)
	exporterVersionRE = regexp.MustCompile(`^mysqld_exporter, version (\d+\.\d+\.\d+)`)
)

// parseMySQLVersion reads "…/mysqld  Ver 9.7.4-2 for Linux …" as 9.7.4 (the Debian
// revision is not MySQL's version).
func parseMySQLVersion(s string) (string, error) { return parseVersion(mysqldVersion, s) }

func parseVersion(re *regexp.Regexp, s string) (string, error) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("no version in %q", strings.TrimSpace(s))
	}
	return m[1], nil
}

// exporterSpec is Debian's mysqld_exporter with the C library it is linked against, at
// /bin/mysqld_exporter as in the upstream image (whose entrypoint it is), run as mysql
// like the rest of the pod.
func exporterSpec(root, version string) oci.Spec {
	libs := "usr/lib/x86_64-linux-gnu"
	entries := append(release.BaseEntries(release.User{Name: "mysql", ID: mysqlUID}),
		oci.Entry{Path: "bin", Dir: true},
		oci.Entry{Path: "bin/mysqld_exporter", File: root + "/usr/bin/prometheus-mysqld-exporter", Mode: 0o755},
		oci.Entry{Path: "lib64", Dir: true},
		oci.Entry{Path: "lib64/ld-linux-x86-64.so.2", File: root + "/" + libs + "/ld-linux-x86-64.so.2", Mode: 0o755},
		oci.Entry{Path: "usr", Dir: true}, oci.Entry{Path: "usr/lib", Dir: true}, oci.Entry{Path: libs, Dir: true},
		oci.Entry{Path: libs + "/libc.so.6", File: root + "/" + libs + "/libc.so.6", Mode: 0o755},
	)
	return oci.Spec{
		Name:    ExporterRepo + ":" + version,
		Entries: entries,
		Config: v1.Config{
			User: fmt.Sprintf("%d:%d", mysqlUID, mysqlUID), WorkingDir: "/", Entrypoint: []string{"/bin/mysqld_exporter"},
			Labels: map[string]string{"org.opencontainers.image.title": "mysqld_exporter (Debian sid package)",
				"org.opencontainers.image.version": version},
			ExposedPorts: map[string]struct{}{"9104/tcp": {}},
		},
	}
}

// mysqlSpec is the MySQL tree with what the pod spec needs: the usr-merged links, users,
// and mysqld's data and run folders owned by mysql.
func mysqlSpec(root, version string) oci.Spec {
	entries := append(release.BaseEntries(release.User{Name: "mysql", ID: mysqlUID}),
		oci.Entry{Path: "bin", Link: "usr/bin"}, oci.Entry{Path: "sbin", Link: "usr/sbin"},
		oci.Entry{Path: "lib", Link: "usr/lib"}, oci.Entry{Path: "lib64", Link: "usr/lib64"},
		oci.Entry{Path: "var", Dir: true},
		oci.Entry{Path: "var/lib", Dir: true},
		oci.Entry{Path: "var/run", Dir: true},
		oci.Entry{Path: "var/lib/mysql", Dir: true, Mode: 0o750, UID: mysqlUID, GID: mysqlUID},
		oci.Entry{Path: "var/lib/mysql-files", Dir: true, Mode: 0o750, UID: mysqlUID, GID: mysqlUID},
		oci.Entry{Path: "var/run/mysqld", Dir: true, Mode: 0o755, UID: mysqlUID, GID: mysqlUID},
		oci.Entry{Path: "etc/mysql", Dir: true},
		oci.Entry{Path: "etc/mysql/conf.d", Dir: true},
	)
	return oci.Spec{
		Name:    MySQLRepo + ":" + version,
		Trees:   []oci.Tree{{Source: root}},
		Entries: entries,
		Config: v1.Config{
			User: fmt.Sprintf("%d:%d", mysqlUID, mysqlUID), WorkingDir: "/", Cmd: []string{"mysqld"},
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Labels: map[string]string{"org.opencontainers.image.title": "Oracle MySQL (Debian sid packages)",
				"org.opencontainers.image.version": version},
			ExposedPorts: map[string]struct{}{"3306/tcp": {}},
		},
	}
}

// staticSpec is one static binary as the entrypoint.
func staticSpec(name, binary, at string, uid int) oci.Spec {
	return oci.Spec{
		Name:    name,
		Entries: append(release.BaseEntries(release.User{Name: "nonroot", ID: uid}), oci.Entry{Path: at, File: binary, Mode: 0o755}),
		Config:  v1.Config{User: fmt.Sprintf("%d:%d", uid, uid), WorkingDir: "/", Entrypoint: []string{at}},
	}
}
