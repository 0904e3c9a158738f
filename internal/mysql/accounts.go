package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"slices"

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

// NarrowOptions say what narrowing an account in place does (NarrowAccount).
type NarrowOptions struct {
	// Prepare run first, while the account still has its global privileges (drop an
	// account, create another and grant it what the narrowed one gives up).
	Prepare []string
	// Grants are the GRANT statements of the account's privileges afterwards.
	Grants []string
}

// qWideGrants counts the global privileges of an account that a narrowed operator account
// has not: data access (SELECT), SUPER and GRANT OPTION on *.*. USER_PRIVILEGES shows an
// account without SELECT on mysql its own rows only.
const qWideGrants = `SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES
WHERE GRANTEE = ? AND (PRIVILEGE_TYPE IN ('SELECT', 'SUPER') OR IS_GRANTABLE = 'YES')`

// Wide reports whether this connection's account has global privileges an earlier
// release gave the operator's account and this one does not (NarrowAccount).
func (i *instance) Wide(ctx context.Context) (bool, error) {
	var n int
	if err := i.db.QueryRowContext(ctx, qWideGrants, "'"+i.cfg.User+"'@'%'").Scan(&n); err != nil {
		return false, fmt.Errorf("%s: reading the privileges of %s: %w", i.cfg.Addr, i.cfg.User, err)
	}
	return n > 0, nil
}

// NarrowAccount runs o.Prepare, then takes from this connection's account (which must
// still hold what it gives away) every global privilege and GRANT OPTION on *.*, and
// grants it o.Grants; its grants on databases and tables stay. Binary-logged: it runs on
// the primary and replicates. The session keeps the global privileges it opened with
// (MySQL applies global changes to new sessions), so the grants after the revocation still
// pass; a new session in between has fewer privileges for a moment, and its caller retries
// on the next pass. Not idempotent once narrowed: callers check Wide first.
func (i *instance) NarrowAccount(ctx context.Context, o NarrowOptions) error {
	account := "'" + i.cfg.User + "'@'%'"
	stmts := append(slices.Clone(o.Prepare), "REVOKE ALL PRIVILEGES ON *.* FROM "+account, "REVOKE GRANT OPTION ON *.* FROM "+account)
	conn, err := i.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: connecting: %w", i.cfg.Addr, err)
	}
	defer conn.Close()
	// One session throughout: a new one after the revocation would lack the privileges
	// the grants need. It is thrown away afterwards, not kept with the old privileges.
	defer func() { _ = conn.Raw(func(any) error { return driver.ErrBadConn }) }()
	for _, s := range append(stmts, o.Grants...) {
		// Errors name the first four words only: a Prepare statement may hold a password.
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", i.cfg.Addr, firstWords(s), err)
		}
	}
	return nil
}
