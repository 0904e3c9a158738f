// Package mysqld runs real Oracle MySQL servers for tests.
//
// The server comes from Debian's mysql-server-core packages, unpacked into the tool cache
// by hack/mysql/provision.sh (`make mysql`) and run through the unpacked tree's own dynamic
// loader, so the host needs no MySQL and no newer glibc. This package finds that install
// (Locate), initialises one data folder per MySQL version as a template and copies it for
// every instance (a copy takes a fraction of a second; --initialize takes ~10 s), and runs
// instances under a small supervisor that restarts mysqld the way a kubelet restarts a
// container: always, or only when mysqld asks for it with exit code 16 (RESTART, and the
// automatic restart at the end of CLONE INSTANCE).
//
// It serves the SQL-level tests (test/sql), which start a few instances on free 127.0.0.1
// ports (StartN). The cluster tiers run MySQL as the operator's pods instead (test/ground).
//
// When the install is missing, Locate fails with an error that names the make target:
// tests that need MySQL fail loudly rather than skip.
package mysqld
