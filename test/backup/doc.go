// Package backup holds tests only: they take backups the way a backup Job's pod does
// (internal/backup with the real mysqldump) from real mysqld instances into a real S3
// server (versitygw), check what was stored, restore it into another instance, and make
// the runs fail the ways they fail in production.
package backup
