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
	repo := img
	if k := strings.LastIndex(img, ":"); k > strings.LastIndex(img, "/") {
		repo = img[:k]
	}
	return repo + ":" + v.String()
}

// ExporterImage is the exporter's image: the cluster's override or the operator's.
func (i Images) ExporterImage(c *mysqlv1beta1.MySQLCluster) string {
	if c.Spec.Monitoring.Exporter.Image != "" {
		return c.Spec.Monitoring.Exporter.Image
	}
	return i.Exporter
}
