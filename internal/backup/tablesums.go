package backup

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// TableSum is a table's row count and CHECKSUM TABLE value, as read from a backup's own
// data: a restore of it must give the same.
type TableSum struct {
	Rows     int64 `json:"rows"`
	Checksum int64 `json:"checksum"`
}

// userTables lists the base tables outside MySQL's own schemas.
const userTables = `SELECT table_schema, table_name FROM information_schema.tables
WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema')
ORDER BY table_schema, table_name`

// tableSums reads every user table's row count and checksum, keyed "schema.table".
func tableSums(ctx context.Context, db *sql.DB) (map[string]TableSum, error) {
	rows, err := db.QueryContext(ctx, userTables)
	if err != nil {
		return nil, fmt.Errorf("listing the tables: %w", err)
	}
	var names [][2]string
	for rows.Next() {
		var n [2]string
		if err := rows.Scan(&n[0], &n[1]); err != nil {
			rows.Close()
			return nil, fmt.Errorf("listing the tables: %w", err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the tables: %w", err)
	}
	out := make(map[string]TableSum, len(names))
	for _, n := range names {
		q := quoteName(n[0]) + "." + quoteName(n[1])
		var s TableSum
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+q).Scan(&s.Rows); err != nil {
			return nil, fmt.Errorf("counting the rows of %s: %w", q, err)
		}
		var table string
		var sum sql.NullInt64
		if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+q).Scan(&table, &sum); err != nil {
			return nil, fmt.Errorf("checksumming %s: %w", q, err)
		}
		s.Checksum = sum.Int64
		out[n[0]+"."+n[1]] = s
	}
	return out, nil
}

func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// sameTables checks the restored tables against the backup's: the same tables, each
// with the same row count and checksum.
func sameTables(got, want map[string]TableSum) error {
	var diff []string
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			diff = append(diff, name+" is missing")
		case g != w:
			diff = append(diff, fmt.Sprintf("%s has %d rows with checksum %d; the backup %d rows with checksum %d", name, g.Rows, g.Checksum, w.Rows, w.Checksum))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			diff = append(diff, name+" is not in the backup")
		}
	}
	if len(diff) == 0 {
		return nil
	}
	slices.Sort(diff)
	if len(diff) > 5 {
		diff = append(diff[:5], fmt.Sprintf("and %d more", len(diff)-5))
	}
	return fmt.Errorf("the restored tables are not the backup's: %s", strings.Join(diff, "; "))
}

// ReadManifest reads the manifest stored beside the backup data at key; false when there is
// none (a backup whose manifest was removed restores without the table check).
func ReadManifest(ctx context.Context, st Reader, key string) (Manifest, bool, error) {
	rc, err := st.Get(ctx, ManifestKey(key))
	if objectstore.Reason(err) == mysqlv1beta1.ReasonBackupDataMissing {
		return Manifest{}, false, nil
	} else if err != nil {
		return Manifest{}, false, Fail(objectstore.Reason(err), fmt.Errorf("reading the backup's manifest: %w", err))
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		return Manifest{}, false, Fail(objectstore.Reason(err), fmt.Errorf("reading the backup's manifest: %w", err))
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Manifest{}, false, Fail(mysqlv1beta1.ReasonBackupCorrupted, fmt.Errorf("the backup's manifest: %w", err))
	}
	return m, true, nil
}
