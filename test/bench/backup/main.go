// Command backup measures backups and restores of one data set (--size-mb MiB of 1 KiB
// rows, 1024 by default) with real mysqld instances and a real S3 server (versitygw), through the code
// a backup pod runs (internal/backup): a logical backup (mysqldump | zstd) and a physical
// one (CLONE into a temporary server, tar | zstd), then their restores into empty servers
// (the dump replayed with the mysql client; the copy unpacked and started). Each restore
// is checked: the same row count and CHECKSUM TABLE as the source. Its last line is
//
//	backup_seconds size_mb=<data> physical=<s> logical=<s> restore=<physical restore s> logical_restore=<s> physical_mb=<stored> logical_mb=<stored>
//
// It asserts no timing; it fails when a restore differs.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
	"github.com/dolphin-operator/dolphin/test/s3server"
)

const password = "bench-backup"

func main() {
	sizeMB := flag.Int("size-mb", 1024, "size of the data set (InnoDB data, MiB)")
	flag.Parse()
	if err := run(*sizeMB); err != nil {
		fmt.Fprintln(os.Stderr, "bench-backup:", err)
		os.Exit(1)
	}
}

func run(sizeMB int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	dir, err := os.MkdirTemp("", "bench-backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	in, err := mysqld.Locate()
	if err != nil {
		return err
	}
	start := func(name string) (*mysqld.Instance, error) {
		return in.Start(ctx, mysqld.Options{Dir: filepath.Join(dir, name), ExtraArgs: []string{"--plugin-load-add=mysql_clone.so",
			"--innodb-buffer-pool-size=256M", "--innodb-redo-log-capacity=512M"}})
	}
	src, err := start("source")
	if err != nil {
		return err
	}
	defer src.Stop()
	if err := src.CreateOperatorAccounts(ctx, password); err != nil {
		return err
	}
	db, err := src.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	t0 := time.Now()
	if err := fill(ctx, db, sizeMB); err != nil {
		return err
	}
	want, err := summary(ctx, db)
	if err != nil {
		return err
	}
	fmt.Printf("data set: %s in %s\n", want, since(t0))
	srv, err := s3server.Start(filepath.Join(dir, "s3"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	st, err := srv.Store("bench", s3server.SecretAccessKey)
	if err != nil {
		return err
	}
	if err := st.CreateBucket(ctx); err != nil {
		return err
	}
	source := backup.Source{Instance: "source", Host: "127.0.0.1", Port: src.Port(), User: resources.BackupUser, Password: password}

	t0 = time.Now()
	lm, err := backup.Logical{Mysqldump: in.ClientPath("mysqldump"), Tmp: dir, Store: st, Cluster: "bench", Name: "logical",
		Key: "logical/dump.sql.zst", Source: source}.Run(ctx)
	if err != nil {
		return fmt.Errorf("logical backup: %w", err)
	}
	logical := time.Since(t0)
	fmt.Printf("logical backup: %s, %.1f MiB stored\n", since(t0), mib(lm.Size))
	t0 = time.Now()
	pm, err := backup.Physical{Mysqld: in.MysqldPath(), Work: filepath.Join(dir, "work"), Store: st, Cluster: "bench", Name: "physical",
		Key: "physical/data.tar.zst", Source: source}.Run(ctx)
	if err != nil {
		return fmt.Errorf("physical backup: %w", err)
	}
	physical := time.Since(t0)
	fmt.Printf("physical backup: %s, %.1f MiB stored\n", since(t0), mib(pm.Size))

	t0 = time.Now()
	if err := restorePhysical(ctx, in, st, pm.Key, filepath.Join(dir, "restored-physical"), want); err != nil {
		return err
	}
	physicalRestore := time.Since(t0)
	fmt.Printf("physical restore: %s\n", since(t0))
	t0 = time.Now()
	target, err := start("restored-logical")
	if err != nil {
		return err
	}
	defer target.Stop()
	if err := restoreLogical(ctx, in, st, lm.Key, target, want); err != nil {
		return err
	}
	logicalRestore := time.Since(t0)
	fmt.Printf("logical restore: %s\n", since(t0))
	fmt.Printf("backup_seconds size_mb=%d physical=%.1f logical=%.1f restore=%.1f logical_restore=%.1f physical_mb=%.1f logical_mb=%.1f\n",
		sizeMB, physical.Seconds(), logical.Seconds(), physicalRestore.Seconds(), logicalRestore.Seconds(), mib(pm.Size), mib(lm.Size))
	return nil
}

// fill writes rows of 1 KiB (half random hex: four SHA-512s of RAND(); half one repeated
// word), 8192 to a statement, until the rows hold sizeMB: zstd keeps about a quarter.
func fill(ctx context.Context, db *sql.DB, sizeMB int) error {
	stmts := []string{"CREATE DATABASE bench",
		"CREATE TABLE bench.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload VARCHAR(1024))",
		"CREATE TABLE bench.seq (i INT AUTO_INCREMENT PRIMARY KEY)", "INSERT INTO bench.seq VALUES (NULL)"}
	for range 13 { // 2^13 rows
		stmts = append(stmts, "INSERT INTO bench.seq (i) SELECT NULL FROM bench.seq")
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("filling: %s: %w", q, err)
		}
	}
	for done := 0; done < sizeMB*1024; done += 8192 {
		if _, err := db.ExecContext(ctx, "INSERT INTO bench.t (payload) "+
			"SELECT CONCAT(SHA2(RAND(), 512), SHA2(RAND(), 512), SHA2(RAND(), 512), SHA2(RAND(), 512), REPEAT('dolphin-', 64)) FROM bench.seq"); err != nil {
			return fmt.Errorf("filling: %w", err)
		}
	}
	_, err := db.ExecContext(ctx, "DROP TABLE bench.seq")
	return err
}

// summary is the table's row count and CHECKSUM TABLE: what a restore must equal.
func summary(ctx context.Context, db *sql.DB) (string, error) {
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM bench.t").Scan(&n); err != nil {
		return "", err
	}
	var name string
	var sum sql.NullInt64
	if err := db.QueryRowContext(ctx, "CHECKSUM TABLE bench.t").Scan(&name, &sum); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d rows, checksum %d", n, sum.Int64), nil
}

// fetch opens a stored object, decompressed; done closes it.
func fetch(ctx context.Context, st *objectstore.Store, key string) (io.Reader, func(), error) {
	r, err := st.Get(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	dec, err := zstd.NewReader(r)
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return dec, func() { dec.Close(); r.Close() }, nil
}

func restoreLogical(ctx context.Context, in *mysqld.Install, st *objectstore.Store, key string, target *mysqld.Instance, want string) error {
	dec, done, err := fetch(ctx, st, key)
	if err != nil {
		return err
	}
	defer done()
	cmd := exec.CommandContext(ctx, in.ClientPath("mysql"), "--no-defaults", "-h127.0.0.1", fmt.Sprintf("-P%d", target.Port()),
		"-uroot", "-p"+mysqld.RootPassword)
	cmd.Stdin = dec
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("replaying the dump: %w: %s", err, out)
	}
	return check(ctx, target, want)
}

func restorePhysical(ctx context.Context, in *mysqld.Install, st *objectstore.Store, key, dir, want string) error {
	dec, done, err := fetch(ctx, st, key)
	if err != nil {
		return err
	}
	defer done()
	if err := backup.Unpack(dec, filepath.Join(dir, "data")); err != nil {
		return err
	}
	restored, err := in.Start(ctx, mysqld.Options{Dir: dir})
	if err != nil {
		return fmt.Errorf("starting on the copy: %w", err)
	}
	defer restored.Stop()
	return check(ctx, restored, want)
}

func check(ctx context.Context, s *mysqld.Instance, want string) error {
	db, err := s.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	got, err := summary(ctx, db)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("restored %s, want %s", got, want)
	}
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
