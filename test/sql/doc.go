// Package sql tests internal/mysql against real mysqld servers: what the statements do,
// not only what they say.
package sql
