package mysql

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	gomysql "github.com/go-sql-driver/mysql"
)

// ErrNoPasswordPrivilege is what RetainPasswords and DiscardOldPasswords wrap when MySQL
// refuses the statement for want of a privilege (1227): APPLICATION_PASSWORD_ADMIN for the
// connection's own account, CREATE USER (and SYSTEM_USER for such an account) for another.
var ErrNoPasswordPrivilege = errors.New("the account lacks the privilege to manage these passwords")

// passwordErr wraps a refusal for want of a privilege with ErrNoPasswordPrivilege.
func passwordErr(err error) error {
	var me *gomysql.MySQLError
	if errors.As(err, &me) && me.Number == 1227 { // ER_SPECIFIC_ACCESS_DENIED_ERROR
		return fmt.Errorf("%w: %w", ErrNoPasswordPrivilege, err)
	}
	return err
}

// Rotation of the operator's own accounts' passwords with MySQL's dual passwords: the new
// password becomes current and the old one stays accepted as the secondary password
// (RetainPasswords) until every consumer uses the new one; replicas are pointed at their
// source with it (ConfigureReplica with ReplicaOptions.Renew); then the old one goes
// (DiscardOldPasswords). The
// statements are binary-logged: they run on the primary and replicate.

// PasswordChange is one account's new password (RetainPasswords). The account is
// User@'%', or this connection's own account when User is the connection's user.
type PasswordChange struct {
	User, Password string
}

// operatorAccount is what the rotation accepts as an account name: the operator's
// accounts' names need no quoting inside single quotes.
var operatorAccount = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// account names u for ALTER USER: CURRENT_USER() for this connection's own account (MySQL
// lets an account with APPLICATION_PASSWORD_ADMIN manage its own secondary password), else
// u@'%' (which needs CREATE USER).
func (i *instance) account(u string) (string, error) {
	if !operatorAccount.MatchString(u) {
		return "", fmt.Errorf("%s: the account %q has a name this operator does not quote", i.cfg.Addr, u)
	}
	if u == i.cfg.User {
		return "CURRENT_USER()", nil
	}
	return "'" + u + "'@'%'", nil
}

// RetainPasswords makes each change's password its account's current one and keeps the
// password it replaces as the secondary one. An account that already accepts its new
// password is left alone: running RETAIN CURRENT PASSWORD again would make the new
// password the secondary one too and drop the old one, which consumers still use. So a
// pass that failed halfway is simply run again.
func (i *instance) RetainPasswords(ctx context.Context, changes []PasswordChange) error {
	for _, c := range changes {
		account, err := i.account(c.User)
		if err != nil {
			return err
		}
		if !passwordText.MatchString(c.Password) {
			return fmt.Errorf("%s: the new password of account %q has characters this operator does not quote", i.cfg.Addr, c.User)
		}
		ok, err := i.accepts(ctx, c.User, c.Password)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		// Exec's errors name the first four words only: never the password.
		if err := i.Exec(ctx, "ALTER USER "+account+" IDENTIFIED BY '"+c.Password+"' RETAIN CURRENT PASSWORD"); err != nil {
			return passwordErr(err)
		}
	}
	return nil
}

// DiscardOldPasswords drops the secondary password of each account (idempotent).
func (i *instance) DiscardOldPasswords(ctx context.Context, users []string) error {
	for _, u := range users {
		account, err := i.account(u)
		if err != nil {
			return err
		}
		if err := i.Exec(ctx, "ALTER USER "+account+" DISCARD OLD PASSWORD"); err != nil {
			return passwordErr(err)
		}
	}
	return nil
}
