package v1beta1

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// SettingKind is how an online setting's value is written and compared.
type SettingKind int

// Kinds of online settings.
const (
	// SettingInteger: a whole number, in my.cnf style with an optional K, M or G suffix.
	SettingInteger SettingKind = iota
	// SettingBoolean: ON/OFF (also 1/0, TRUE/FALSE).
	SettingBoolean
	// SettingDecimal: a number with a fraction (seconds).
	SettingDecimal
)

// OnlineSettings are the spec.mysql.config settings the operator applies to running instances
// with SET GLOBAL: a change to them alone restarts no pod (my.cnf carries them too, for
// the next start). Every other setting takes effect when the roll restarts the instances.
// Each is a dynamic global system variable of MySQL 8.4 and 9.7 whose change affects new
// work only (sessions, queries, flushes); innodb_buffer_pool_size is left out, as a resize
// is rounded to chunks (the value read back differs) and runs in the background.
var OnlineSettings = map[string]SettingKind{
	"max_connections":               SettingInteger,
	"max_connect_errors":            SettingInteger,
	"max_allowed_packet":            SettingInteger,
	"wait_timeout":                  SettingInteger,
	"interactive_timeout":           SettingInteger,
	"net_read_timeout":              SettingInteger,
	"net_write_timeout":             SettingInteger,
	"lock_wait_timeout":             SettingInteger,
	"innodb_lock_wait_timeout":      SettingInteger,
	"innodb_io_capacity":            SettingInteger,
	"innodb_io_capacity_max":        SettingInteger,
	"table_open_cache":              SettingInteger,
	"table_definition_cache":        SettingInteger,
	"thread_cache_size":             SettingInteger,
	"sort_buffer_size":              SettingInteger,
	"join_buffer_size":              SettingInteger,
	"read_buffer_size":              SettingInteger,
	"read_rnd_buffer_size":          SettingInteger,
	"tmp_table_size":                SettingInteger,
	"max_heap_table_size":           SettingInteger,
	"binlog_expire_logs_seconds":    SettingInteger,
	"log_error_verbosity":           SettingInteger,
	"slow_query_log":                SettingBoolean,
	"general_log":                   SettingBoolean,
	"log_queries_not_using_indexes": SettingBoolean,
	"long_query_time":               SettingDecimal,
}

// SettingName is a my.cnf option name as MySQL's system variable names it (dashes are
// underscores, in lower case).
func SettingName(key string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(key), "-", "_"))
}

// SettingValue parses a value of an online setting: the value to SET and its canonical text,
// which is how performance_schema.global_variables shows it (an integer's digits, ON/OFF, a
// decimal with six places), so that a running instance's value compares with the spec's.
func SettingValue(kind SettingKind, raw string) (any, string, error) {
	v := strings.ToUpper(strings.Trim(strings.TrimSpace(raw), `"'`))
	switch kind {
	case SettingBoolean:
		switch v {
		case "ON", "1", "TRUE":
			return "ON", "ON", nil
		case "OFF", "0", "FALSE":
			return "OFF", "OFF", nil
		}
		return nil, "", fmt.Errorf("%q is not ON or OFF", raw)
	case SettingDecimal:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsInf(f, 0) {
			return nil, "", fmt.Errorf("%q is not a non-negative number", raw)
		}
		return f, strconv.FormatFloat(f, 'f', 6, 64), nil
	}
	unit := int64(1)
	for suffix, u := range map[string]int64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30} {
		if n, ok := strings.CutSuffix(v, suffix); ok {
			v, unit = n, u
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return nil, "", fmt.Errorf("%q is not a non-negative whole number (with an optional K, M or G)", raw)
	}
	return n * unit, strconv.FormatInt(n*unit, 10), nil
}
