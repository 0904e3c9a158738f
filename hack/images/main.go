// Command images builds the container images the local test ground runs, without a
// container engine or a registry, from what the tool cache already holds:
//
//   - localhost/dolphin/operator:v<VERSION>  the static manager, laid out as the Dockerfile's
//     final stage (same path, user, entrypoint, labels; a test checks they agree);
//   - localhost/dolphin/mysql:<version>      Debian sid's Oracle MySQL tree that
//     hack/mysql/provision.sh unpacked (with dash and coreutils for the pod's init script and
//     probes), /etc/passwd with mysql as uid 999, and mysqld's folders owned by it; tagged
//     with the version mysqld reports, never as an upstream image it is not;
//   - localhost/dolphin/pause:1             the pods' sandbox (hack/images/pause);
//   - localhost/dolphin/coredns:<version>   CoreDNS built from the Go module proxy.
//
// Each is an OCI layout tarball under --out, cached by its inputs (test/oci); --manifest
// receives the list (name, tarball, digest) that the test ground imports into its nodes.
package main

import (
	"encoding/json"
	"flag"
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

type inputs struct {
	out, manifest                  string
	manager, version               string
	mysqlRoot, mysqlVersionFile    string
	pause, coredns, corednsVersion string
}

func main() {
	var in inputs
	flag.StringVar(&in.out, "out", "", "folder for the image tarballs (required)")
	flag.StringVar(&in.manifest, "manifest", "", "where to write the list of images built (required)")
	flag.StringVar(&in.manager, "manager", "", "the static manager binary")
	flag.StringVar(&in.version, "version", "", "the operator's version (the image's tag is v<version>)")
	flag.StringVar(&in.mysqlRoot, "mysql-root", "", "the unpacked MySQL tree (hack/mysql/provision.sh)")
	flag.StringVar(&in.mysqlVersionFile, "mysql-version-file", "", "its VERSION file (mysqld --version)")
	flag.StringVar(&in.pause, "pause", "", "the static pause binary")
	flag.StringVar(&in.coredns, "coredns", "", "the static coredns binary")
	flag.StringVar(&in.corednsVersion, "coredns-version", "", "CoreDNS's version")
	flag.Parse()
	if err := run(in); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(in inputs) error {
	if in.out == "" || in.manifest == "" {
		return fmt.Errorf("--out and --manifest are required")
	}
	specs, err := allSpecs(in)
	if err != nil {
		return err
	}
	var built []oci.Built
	for _, s := range specs {
		b, err := oci.Build(s, in.out)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\n", b.Name, b.Digest)
		built = append(built, b)
	}
	raw, _ := json.MarshalIndent(built, "", "  ")
	if err := os.WriteFile(in.manifest, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("while writing %s: %w", in.manifest, err)
	}
	return nil
}

func allSpecs(in inputs) ([]oci.Spec, error) {
	for flagName, v := range map[string]string{"manager": in.manager, "version": in.version, "mysql-root": in.mysqlRoot,
		"mysql-version-file": in.mysqlVersionFile, "pause": in.pause, "coredns": in.coredns, "coredns-version": in.corednsVersion} {
		if v == "" {
			return nil, fmt.Errorf("--%s is required", flagName)
		}
	}
	raw, err := os.ReadFile(in.mysqlVersionFile)
	if err != nil {
		return nil, fmt.Errorf("MySQL version: %w (run `make mysql`)", err)
	}
	mysqlVersion, err := parseMySQLVersion(string(raw))
	if err != nil {
		return nil, err
	}
	return []oci.Spec{
		operatorSpec(in.manager, in.version),
		mysqlSpec(in.mysqlRoot, mysqlVersion),
		staticSpec(PauseImage, in.pause, "/pause", nonrootUID),
		staticSpec(CoreDNSRepo+":"+in.corednsVersion, in.coredns, "/coredns", nonrootUID),
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

// operatorLabels are the Dockerfile's final-stage labels.
var operatorLabels = map[string]string{
	"org.opencontainers.image.title":       "Dolphin",
	"org.opencontainers.image.description": "A MySQL operator for Kubernetes",
	"org.opencontainers.image.source":      "https://github.com/dolphin-operator/dolphin",
	"org.opencontainers.image.licenses":    "Apache-2.0",
}

// operatorSpec is the Dockerfile's final stage: the manager at /manager on a distroless-like
// base (passwd with nonroot, /tmp), user 65532, entrypoint /manager.
func operatorSpec(manager, version string) oci.Spec {
	return oci.Spec{
		Name: OperatorRepo + ":v" + version,
		Entries: append(baseEntries(map[string]int{"nonroot": nonrootUID}),
			oci.Entry{Path: "manager", File: manager, Mode: 0o755}),
		Config: v1.Config{
			User: fmt.Sprintf("%d:%d", nonrootUID, nonrootUID), WorkingDir: "/",
			Entrypoint: []string{"/manager"}, Labels: operatorLabels,
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
