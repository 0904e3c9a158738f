package mysqld

import (
	"context"
	"fmt"

	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// CreateOperatorAccounts runs the operator's AccountsSQL, as an instance's init container
// does (outside the binary log), with password for every account; with the
// ApplicationGrantSQL of each of databases (the init container's for spec.application).
func (i *Instance) CreateOperatorAccounts(ctx context.Context, password string, databases ...string) error {
	in, err := mysql.Open(mysql.Config{Addr: i.Addr(), User: "root", Password: RootPassword})
	if err != nil {
		return err
	}
	defer in.Close()
	stmts, err := backup.Statements(resources.AccountsSQL, func(string) string { return password })
	if err != nil {
		return err
	}
	for _, d := range databases {
		grant, err := backup.Statements(resources.ApplicationGrantSQL, func(string) string { return d })
		if err != nil {
			return err
		}
		stmts = append(stmts, grant...)
	}
	if err := in.ExecUnlogged(ctx, stmts...); err != nil {
		return fmt.Errorf("creating the operator's accounts: %w", err)
	}
	return nil
}
