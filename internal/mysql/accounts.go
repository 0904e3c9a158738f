package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	gomysql "github.com/go-sql-driver/mysql"
)

// AccountOptions are an application account and its database (EnsureAccount).
type AccountOptions struct {
	Database, User, Password string
	// Previous is the password a rotation replaces, still to be accepted as the account's
	// secondary password; "" when none is (any secondary password is then discarded).
	Previous string
}

// identifier is what EnsureAccount accepts as a database or account name, and a password's
// alphabet: nothing that needs quoting in SQL (the API's validation allows no more).
var (
	identifier   = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
	passwordText = regexp.MustCompile(`^[A-Za-z0-9]{8,128}$`)
)

// EnsureAccount creates the database if it is missing and the account if it is missing,
// sets the account's password, and grants it every privilege on the database. The
// statements are binary-logged: they run on the primary and replicate. Idempotent.
func (i *instance) EnsureAccount(ctx context.Context, o AccountOptions) error {
	if !identifier.MatchString(o.Database) || !identifier.MatchString(o.User) || len(o.User) > 32 {
		return fmt.Errorf("%s: the account %q or database %q has a name this operator does not quote", i.cfg.Addr, o.User, o.Database)
	}
	if !passwordText.MatchString(o.Password) {
		return fmt.Errorf("%s: the password of account %q has characters this operator does not quote", i.cfg.Addr, o.User)
	}
	if o.Previous != "" && !passwordText.MatchString(o.Previous) {
		return fmt.Errorf("%s: the previous password of account %q has characters this operator does not quote", i.cfg.Addr, o.User)
	}
	account := "'" + o.User + "'@'%'"
	stmts := []string{
		"CREATE DATABASE IF NOT EXISTS `" + o.Database + "`",
		"CREATE USER IF NOT EXISTS " + account + " IDENTIFIED BY '" + o.Password + "'",
	}
	if o.Previous == "" {
		// The password as the Secret has it now (an account that existed: restored data,
		// a Secret made anew), and no secondary one: a rotation's retention is over.
		stmts = append(stmts, "ALTER USER "+account+" IDENTIFIED BY '"+o.Password+"'",
			"ALTER USER "+account+" DISCARD OLD PASSWORD")
	} else {
		// RETAIN makes the current password the secondary one: run again once the new one
		// is current, it would drop the previous password that clients may still use.
		ok, err := i.accepts(ctx, o.User, o.Password)
		if err != nil {
			return err
		}
		if !ok {
			stmts = append(stmts, "ALTER USER "+account+" IDENTIFIED BY '"+o.Password+"' RETAIN CURRENT PASSWORD")
		}
	}
	stmts = append(stmts, "GRANT ALL PRIVILEGES ON `"+o.Database+"`.* TO "+account)
	for _, stmt := range stmts {
		// Exec's errors name the first four words only: never the password.
		if err := i.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// accepts reports whether the instance lets user log in with password, by logging in
// (over TLS when the operator's own connection uses it) within ctx.
func (i *instance) accepts(ctx context.Context, user, password string) (bool, error) {
	cfg := i.cfg
	cfg.User, cfg.Password = user, password
	conn, err := gomysql.NewConnector(driverConfig(cfg))
	if err != nil {
		return false, fmt.Errorf("%s: %w", i.cfg.Addr, err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	err = db.PingContext(ctx)
	var me *gomysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &me) && me.Number == 1045: // ER_ACCESS_DENIED_ERROR
		return false, nil
	}
	return false, fmt.Errorf("%s: logging in as %s: %w", i.cfg.Addr, user, err)
}
