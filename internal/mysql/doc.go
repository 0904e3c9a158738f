// Package mysql is everything the operator says to one mysqld, behind the small Instance
// interface: gather its state (GTID sets, replication threads and errors, read-only
// flags, semi-sync), make it a primary or a replica of another, seed it with CLONE,
// fence it, wait for it to apply a GTID set. The topology manager decides; this package
// only carries out, one instance at a time.
//
// Statement texts live in queries.go, table-tested for their exact text; their meaning is
// tested against real mysqld 9.7 servers (test/mysqld). Only the SOURCE/REPLICA forms of
// the replication statements are used: MySQL 8.4 and 9.x reject the MASTER/SLAVE ones.
package mysql
