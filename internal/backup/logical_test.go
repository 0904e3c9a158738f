package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// A dump as mysqldump 9.7 writes it, cut to its header and trailer.
const header = "-- MySQL dump 10.13  Distrib 9.7.4, for Linux (x86_64)\n--\n-- Host: h    Database: \n" +
	"-- ------------------------------------------------------\n-- Server version\t9.7.4-2\n\n" +
	"SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n" +
	"8a94f357-aab4-11df-86ab-c80aa9429562:1-3';\n\n" +
	"--\n-- Position to start replication or point-in-time recovery from\n--\n\n" +
	"-- CHANGE REPLICATION SOURCE TO SOURCE_LOG_FILE='binlog.000003', SOURCE_LOG_POS=1234;\n\n" +
	"CREATE DATABASE t;\n"
const trailer = "-- Dump completed on 2026-12-02  1:00:00\n"

// fakeDump is a mysqldump that prints out and exits with code.
func fakeDump(t *testing.T, out, stderr string, code int) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "out"), []byte(out), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "err"), []byte(stderr), 0o600))
	script := fmt.Sprintf("#!/bin/sh\ncat %s\ncat %s >&2\nexit %d\n", filepath.Join(dir, "out"), filepath.Join(dir, "err"), code)
	p := filepath.Join(dir, "mysqldump")
	require.NoError(t, os.WriteFile(p, []byte(script), 0o700))
	return p
}

func run(t *testing.T, dump string) (*objectstore.Dir, Manifest, error) {
	st := &objectstore.Dir{Root: t.TempDir(), Claim: "c"}
	m, err := Logical{Mysqldump: dump, Tmp: t.TempDir(), Store: st, Cluster: "db", Name: "b1", Key: "ns/db/base/b1/dump.sql.zst",
		Source: Source{Instance: "db-1", Host: "127.0.0.1", Port: 1, User: "u", Password: "p"}}.Run(context.Background())
	return st, m, err
}

func reason(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Reason
	}
	return ""
}

func TestALogicalBackupStoresTheDumpAndItsManifest(t *testing.T) {
	st, m, err := run(t, fakeDump(t, header+"INSERT INTO x VALUES (1);\n"+trailer, "", 0))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(st.Root, "ns/db/base/b1/dump.sql.zst"))
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, hex.EncodeToString(sum[:]), m.SHA256)
	require.EqualValues(t, len(raw), m.Size)
	// A decoder for DecodeAll only (no reader): one made on a reader starts its stream
	// decoding, which may hold the decoder DecodeAll waits for (this test once hung 10 min).
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	plain, err := dec.DecodeAll(raw, nil)
	require.NoError(t, err)
	require.Equal(t, header+"INSERT INTO x VALUES (1);\n"+trailer, string(plain))
	require.Equal(t, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,8a94f357-aab4-11df-86ab-c80aa9429562:1-3", m.GTIDSet)
	require.Equal(t, "binlog.000003", m.BinlogFile)
	require.EqualValues(t, 1234, m.BinlogPosition)
	require.Equal(t, "9.7.4-2", m.MySQLVersion)
	require.Equal(t, "pvc://c/ns/db/base/b1/dump.sql.zst", m.Location)
	var stored Manifest
	raw, err = os.ReadFile(filepath.Join(st.Root, ManifestKey("ns/db/base/b1/dump.sql.zst")))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &stored))
	require.Equal(t, m, stored)
}

func TestADumpWithoutItsTrailerIsNoBackup(t *testing.T) {
	st, _, err := run(t, fakeDump(t, header+"INSERT INTO x VALUES (1);\n", "", 0))
	require.Error(t, err)
	require.Equal(t, mysqlv1beta1.ReasonDumpIncomplete, reason(err), "%v", err)
	entries, _ := filepath.Glob(filepath.Join(st.Root, "ns/db/base/b1/*"))
	require.Empty(t, entries, "nothing stored, not even a partial file")
}

func TestADumpThatFailsSaysWhy(t *testing.T) {
	for _, tc := range []struct{ stderr, reason string }{
		{"mysqldump: Got error: 2003: Can't connect to MySQL server on 'h:3306' (111) when trying to connect", mysqlv1beta1.ReasonSourceUnreachable},
		{"mysqldump: Got error: 1045: Access denied for user 'u'@'h' (using password: YES) when trying to connect", mysqlv1beta1.ReasonSourceAccessDenied},
		{"mysqldump: Error 2013: Lost connection to MySQL server during query when dumping table `noise` at row: 8", mysqlv1beta1.ReasonSourceUnreachable},
		{"mysqldump: Error 3024: Query execution was interrupted", mysqlv1beta1.ReasonDumpFailed},
	} {
		st, _, err := run(t, fakeDump(t, header, tc.stderr, 2))
		require.Error(t, err)
		require.Equal(t, tc.reason, reason(err), "%v", err)
		require.Contains(t, err.Error(), tc.stderr, "mysqldump's words are in the message")
		entries, _ := filepath.Glob(filepath.Join(st.Root, "ns/db/base/b1/*"))
		require.Empty(t, entries)
	}
}

func TestADumpWithoutAGTIDSetIsRefused(t *testing.T) {
	st, _, err := run(t, fakeDump(t, "-- Server version\t9.7.4\nCREATE DATABASE t;\n"+trailer, "", 0))
	require.Equal(t, mysqlv1beta1.ReasonDumpIncomplete, reason(err), "%v", err)
	entries, _ := filepath.Glob(filepath.Join(st.Root, "ns/db/base/b1/*"))
	require.Empty(t, entries, "the data object is removed again")
}

func TestTheResultFitsATerminationMessage(t *testing.T) {
	long := errors.New(string(bytes.Repeat([]byte("x"), 10000)))
	raw := EncodeResult(Manifest{}, Fail(mysqlv1beta1.ReasonDumpFailed, long), mysqlv1beta1.ReasonBackupPodFailed)
	require.LessOrEqual(t, len(raw), MaxResult)
	r, err := DecodeResult(string(raw))
	require.NoError(t, err)
	require.Equal(t, mysqlv1beta1.ReasonDumpFailed, r.Reason)
	_, err = DecodeResult("killed")
	require.Error(t, err)
}

func TestAnArchiveUnpacksAsItWasWritten(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "shop"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(src, "mysql.ibd"), []byte("system"), 0o640))
	require.NoError(t, os.WriteFile(filepath.Join(src, "shop", "orders.ibd"), []byte("rows"), 0o640))
	var buf bytes.Buffer
	require.NoError(t, writeTar(&buf, src))
	dst := t.TempDir()
	require.NoError(t, Unpack(&buf, dst))
	got, err := os.ReadFile(filepath.Join(dst, "shop", "orders.ibd"))
	require.NoError(t, err)
	require.Equal(t, "rows", string(got))

	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}))
	_, _ = tw.Write([]byte("x"))
	require.NoError(t, tw.Close())
	require.ErrorContains(t, Unpack(&evil, t.TempDir()), "outside the folder")
}
