package ground

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dolphin-operator/dolphin/test/oci"
)

// Names of the local images. The operator is pointed at the MySQL image through its
// RELATED_IMAGE_MYSQL_<series> setting.
const (
	OperatorRepo = "localhost/dolphin/operator"
	MySQLRepo    = "localhost/dolphin/mysql"
	PauseImage   = "localhost/dolphin/pause:1"
	CoreDNSRepo  = "localhost/dolphin/coredns"
	mysqlUID     = 999
	nonrootUID   = 65532
)

// ImageInputs are the files the images are built from.
type ImageInputs struct {
	// Manager is the static manager binary; Version the operator's version (tag v<Version>).
	Manager, Version string
	// MySQLRoot is the unpacked MySQL tree and MySQLVersionFile its `mysqld --version`
	// (hack/mysql/provision.sh writes both).
	MySQLRoot, MySQLVersionFile string
	// Pause and CoreDNS are static binaries; CoreDNSVersion is CoreDNS's version.
	Pause, CoreDNS, CoreDNSVersion string
}

// ImageSpecs are the ground's images: the operator, MySQL, the pods' sandbox and CoreDNS.
func ImageSpecs(in ImageInputs) ([]oci.Spec, error) {
	for name, v := range map[string]string{"manager": in.Manager, "version": in.Version, "mysql-root": in.MySQLRoot,
		"mysql-version-file": in.MySQLVersionFile, "pause": in.Pause, "coredns": in.CoreDNS, "coredns-version": in.CoreDNSVersion} {
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
	return []oci.Spec{
		OperatorSpec(in.Manager, in.Version),
		mysqlSpec(in.MySQLRoot, mysqlVersion),
		staticSpec(PauseImage, in.Pause, "/pause", nonrootUID),
		staticSpec(CoreDNSRepo+":"+in.CoreDNSVersion, in.CoreDNS, "/coredns", nonrootUID),
	}, nil
}

var mysqldVersion = regexp.MustCompile(`Ver (\d+\.\d+\.\d+)`)

// parseMySQLVersion reads "…/mysqld  Ver 9.7.4-2 for Linux …" as 9.7.4 (the Debian
// revision is not MySQL's version).
func parseMySQLVersion(s string) (string, error) {
	m := mysqldVersion.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("no MySQL version in %q", strings.TrimSpace(s))
	}
	return m[1], nil
}

// OperatorLabels are the Dockerfile's final-stage labels.
var OperatorLabels = map[string]string{
	"org.opencontainers.image.title":       "Dolphin",
	"org.opencontainers.image.description": "A MySQL operator for Kubernetes",
	"org.opencontainers.image.source":      "https://github.com/dolphin-operator/dolphin",
	"org.opencontainers.image.licenses":    "Apache-2.0",
}

// OperatorSpec is the Dockerfile's final stage: the manager at /manager on a distroless-like
// base (passwd with nonroot, /tmp), user 65532, entrypoint /manager.
func OperatorSpec(manager, version string) oci.Spec {
	return oci.Spec{
		Name: OperatorRepo + ":v" + version,
		Entries: append(baseEntries(map[string]int{"nonroot": nonrootUID}),
			oci.Entry{Path: "manager", File: manager, Mode: 0o755}),
		Config: v1.Config{
			User: fmt.Sprintf("%d:%d", nonrootUID, nonrootUID), WorkingDir: "/",
			Entrypoint: []string{"/manager"}, Labels: OperatorLabels,
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
	}
}

// mysqlSpec is the MySQL tree with what the pod spec needs: the usr-merged links, users,
// and mysqld's data and run folders owned by mysql.
func mysqlSpec(root, version string) oci.Spec {
	entries := append(baseEntries(map[string]int{"mysql": mysqlUID}),
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
		Entries: append(baseEntries(map[string]int{"nonroot": uid}), oci.Entry{Path: at, File: binary, Mode: 0o755}),
		Config:  v1.Config{User: fmt.Sprintf("%d:%d", uid, uid), WorkingDir: "/", Entrypoint: []string{at}},
	}
}

// baseEntries are /etc/passwd and /etc/group (root, nobody and the given users, each
// with a group of its own id) and a world-writable /tmp.
func baseEntries(users map[string]int) []oci.Entry {
	passwd := "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group := "root:x:0:\nnobody:x:65534:\n"
	for name, id := range users {
		passwd += fmt.Sprintf("%s:x:%d:%d:%s:/nonexistent:/usr/sbin/nologin\n", name, id, id, name)
		group += fmt.Sprintf("%s:x:%d:\n", name, id)
	}
	return []oci.Entry{
		{Path: "etc", Dir: true},
		{Path: "etc/passwd", Content: []byte(passwd)},
		{Path: "etc/group", Content: []byte(group)},
		{Path: "tmp", Dir: true, Mode: 0o1777},
	}
}
