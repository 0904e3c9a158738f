package resources

// mysqldScript runs mysqld ("$@" are its arguments) under a shell that stops it without
// acknowledging a commit no replica has.
//
// MySQL's shutdown (SIGTERM) ends the semi-sync wait of every commit and tells each
// waiting client its commit succeeded, although no replica acknowledged it (test/sql shows
// it). A primary cut off from its replicas holds such commits, and it is stopped exactly
// when the operator fails over from it (eviction), when its node is drained, or when a
// lost node comes back and its kubelet stops the pods it should no longer run. A client
// told "committed" by an instance that is then replaced has lost that write.
//
// So SIGTERM goes to this shell, which first fences mysqld over the local socket (the
// steps of internal/mysql's Fence, which the operator runs over the network, less turning
// semi-sync off to let the killed commits end, which the shutdown that follows does):
//  1. SET GLOBAL super_read_only = ON is sent and left running: it waits for the commits
//     in progress, and while it waits no new transaction can commit (a pending global read
//     lock holds every write back). It ends with mysqld. The next step begins once
//     super_read_only is on or the SET is seen waiting.
//  2. Every client session is killed (replication's dump threads are kept, so replicas
//     still get what was committed). A killed session's socket is closed at once, so its
//     client can no longer be told its commit succeeded, whatever mysqld does afterwards.
//     One listing suffices: a session that connects later cannot commit (step 1).
//  3. Only then mysqld gets SIGTERM and shuts down cleanly.
//
// When mysqld does not answer (hung, or its socket refuses), the sessions cannot be ended,
// and mysqld gets SIGKILL instead: a killed mysqld answers nobody, and InnoDB recovers at
// the next start. Each step is bounded (timeout), and the kubelet's SIGKILL at the end of
// the grace period ends everything regardless.
const mysqldScript = `set -u
sock=` + SocketPath + `
sql() { t=$1; shift; MYSQL_PWD="$MYSQL_ROOT_PASSWORD" timeout "$t" mysql --no-defaults --protocol=socket --socket="$sock" -uroot --connect-timeout=1 -N -B --comments "$@"; }
# sessions: "wait" until super_read_only is on or the fence's SET waits for it; then the
# KILL statement of every client session but our own, the fence's and replication's.
sessions="SET SESSION group_concat_max_len = 4194304; SELECT IF(@@global.super_read_only OR EXISTS (SELECT 1 FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SET GLOBAL super_read_only = ON /* dolphin-fence */%'), COALESCE((SELECT GROUP_CONCAT(CONCAT('KILL ', ID) SEPARATOR ';') FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND USER NOT IN ('system user', 'event_scheduler') AND COMMAND NOT IN ('Binlog Dump GTID', 'Binlog Dump', 'Killed') AND COALESCE(INFO, '') NOT LIKE '%dolphin-fence%'), ''), 'wait')"
# ended kills the sessions once the fence holds. Sessions that connect afterwards cannot
# commit (the pending SET holds their writes back); one that ended meanwhile makes its
# KILL fail, which --force goes past; "ended" shows the batch ran to its end.
ended() {
	for try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		kills=$(sql 2 -e "$sessions") || return 1
		[ "$kills" = wait ] || break
		sleep 0.05
	done
	[ "$kills" != wait ] || return 1
	out=$(sql 2 --force -e "${kills:+$kills;} SELECT 'ended'" 2>/dev/null)
	case "$out" in *ended*) return 0 ;; esac
	return 1
}
stop() {
	trap '' TERM
	t0=$(date +%s%N)
	sql 600 -e "SET GLOBAL super_read_only = ON /* dolphin-fence */" >/dev/null 2>&1 &
	if ended; then
		echo "dolphin: client sessions ended in $((($(date +%s%N) - t0) / 1000000)) ms; shutting mysqld down" >&2
		kill -TERM "$pid"
	else
		echo "dolphin: could not end mysqld's client sessions; killing it, so that no waiting commit is acknowledged" >&2
		kill -KILL "$pid"
	fi
}
trap stop TERM
mysqld "$@" &
pid=$!
while :; do
	wait "$pid"
	rc=$?
	kill -0 "$pid" 2>/dev/null || exit "$rc"
done
`
