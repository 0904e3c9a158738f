package mysql

import (
	"context"
	"fmt"
	"regexp"
)

// AccountOptions are an application account and its database (EnsureAccount).
type AccountOptions struct {
	Database, User, Password string
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
	account := "'" + o.User + "'@'%'"
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS `" + o.Database + "`",
		"CREATE USER IF NOT EXISTS " + account + " IDENTIFIED BY '" + o.Password + "'",
		// The password as the Secret has it now, for an account that existed (restored
		// data, a Secret made anew).
		"ALTER USER " + account + " IDENTIFIED BY '" + o.Password + "'",
		"GRANT ALL PRIVILEGES ON `" + o.Database + "`.* TO " + account,
	} {
		// Exec's errors name the first four words only: never the password.
		if err := i.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}
