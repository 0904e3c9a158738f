package resources

import (
	"strings"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Images are the operand images the operator runs. OLM's disconnected installs rewrite
// them through the RELATED_IMAGE_* environment variables of the operator's Deployment,
// which ImagesFromEnv reads.
type Images struct {
	// MySQL maps a supported series ("8.4") to its image.
	MySQL map[string]string
	// Exporter is mysqld_exporter's image.
	Exporter string
}

// Default operand images, used when no RELATED_IMAGE_* variable overrides them.
var defaultImages = Images{
	MySQL: map[string]string{
		"8.4": "docker.io/library/mysql:8.4.6",
		"9.7": "docker.io/library/mysql:9.7.4",
	},
	Exporter: "quay.io/prometheus/mysqld-exporter:v0.19.0",
}

// EnvName is the environment variable that overrides the image of a MySQL series:
// RELATED_IMAGE_MYSQL_8_4 for "8.4".
func EnvName(series string) string {
	return "RELATED_IMAGE_MYSQL_" + strings.ReplaceAll(series, ".", "_")
}

// EnvExporterImage overrides the exporter's image. Backups need no image of their own:
// they run mysqldump from the cluster's MySQL image, so client and server versions match.
const EnvExporterImage = "RELATED_IMAGE_EXPORTER"

// ImagesFromEnv returns the default images with every RELATED_IMAGE_* override applied.
func ImagesFromEnv(getenv func(string) string) Images {
	img := Images{MySQL: map[string]string{}, Exporter: defaultImages.Exporter}
	for series, def := range defaultImages.MySQL {
		img.MySQL[series] = def
		if v := getenv(EnvName(series)); v != "" {
			img.MySQL[series] = v
		}
	}
	if v := getenv(EnvExporterImage); v != "" {
		img.Exporter = v
	}
	return img
}

// MySQLImage is the image for the cluster: spec.mysql.image when set; for a pinned
// release, the series image's repository at that release's tag; else the series image.
func (i Images) MySQLImage(c *mysqlv1beta1.MySQLCluster) string {
	if c.Spec.MySQL.Image != "" {
		return c.Spec.MySQL.Image
	}
	v, err := mysqlv1beta1.ParseMySQLVersion(c.Spec.MySQL.Version)
	if err != nil {
		v, _ = mysqlv1beta1.ParseMySQLVersion(mysqlv1beta1.DefaultMySQLVersion)
	}
	img := i.MySQL[v.Series()]
	if v.Patch < 0 || strings.Contains(img, "@") {
		return img // a digest-pinned image (disconnected installs) is used as given
	}
	repo, _ := splitTag(img)
	return repo + ":" + v.String()
}

// splitTag splits an image reference at its tag ("" when it has none).
func splitTag(img string) (repo, tag string) {
	if k := strings.LastIndex(img, ":"); k > strings.LastIndex(img, "/") {
		return img[:k], img[k+1:]
	}
	return img, ""
}

// Release is the MySQL release the cluster's image runs: the pinned release of
// spec.mysql.version, else the release its image's tag names ("mysql:9.7.4",
// "mysql:9.7.4-oracle"). ok is false when the image names none: a digest, or a tag such
// as "latest".
func (i Images) Release(c *mysqlv1beta1.MySQLCluster) (v mysqlv1beta1.MySQLVersion, ok bool) {
	if c.Spec.MySQL.Image == "" {
		if v, err := mysqlv1beta1.ParseMySQLVersion(c.Spec.MySQL.Version); err == nil && v.Patch >= 0 {
			return v, true
		}
	}
	return ImageRelease(i.MySQLImage(c))
}

// ImageRelease is the MySQL release an image's tag names ("mysql:9.7.4",
// "mysql:9.7.4-oracle"); ok is false for a digest, a tag such as "latest", or a release of a
// series the operator does not run.
func ImageRelease(img string) (v mysqlv1beta1.MySQLVersion, ok bool) {
	if strings.Contains(img, "@") {
		return v, false
	}
	_, tag := splitTag(img)
	tag, _, _ = strings.Cut(tag, "-")
	v, err := mysqlv1beta1.ParseMySQLVersion(tag)
	if err != nil || v.Patch < 0 {
		return v, false
	}
	return v, true
}

// ExporterImage is the exporter's image: the cluster's override or the operator's.
func (i Images) ExporterImage(c *mysqlv1beta1.MySQLCluster) string {
	if c.Spec.Monitoring.Exporter.Image != "" {
		return c.Spec.Monitoring.Exporter.Image
	}
	return i.Exporter
}
