package mysql

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// variableName is what SetGlobal accepts as a system variable's name: it is written into
// the statement (a name cannot be a placeholder), so nothing else may get there.
var variableName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Variables reads global system variables by name (lower case), as
// performance_schema.global_variables shows them; a name mysqld does not know is absent.
func (i *instance) Variables(ctx context.Context, names []string) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	args := make([]any, len(names))
	for k, n := range names {
		args[k] = n
	}
	q := "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.global_variables WHERE VARIABLE_NAME IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(names)), ",") + ")"
	rows, err := i.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: reading system variables: %w", i.cfg.Addr, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, fmt.Errorf("%s: reading system variables: %w", i.cfg.Addr, err)
		}
		out[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: reading system variables: %w", i.cfg.Addr, err)
	}
	return out, nil
}

// SetGlobal sets a global system variable on the running mysqld (SET GLOBAL, not PERSIST:
// my.cnf stays the one source of the values a restart reads). The value is sent as a
// parameter, an integer, a float or a string such as ON.
func (i *instance) SetGlobal(ctx context.Context, name string, value any) error {
	if !variableName.MatchString(name) {
		return fmt.Errorf("%q is not a system variable's name", name)
	}
	return i.Exec(ctx, "SET GLOBAL "+name+" = ?", value)
}
