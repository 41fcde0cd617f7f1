#!/bin/sh
# acl.sh builds the ACL file Redis loads (aclfile) from deploy/redis/users.acl:
# it drops the comments and blank lines, joins each user's continued lines
# into one, and gives each named user the SHA-256 of its password, so the
# file Redis reads holds no password in the clear.
#
#   sh acl.sh [-o OUT] TEMPLATE USER=PASSWORD_FILE... [-- COMMAND...]
#
# It writes to OUT (mode 0600), or else to standard output. After `--` it
# runs COMMAND in its place, once the file is written: compose starts
# Redis so, and a password changed in its file takes effect on a restart.
# A password file holds the password alone (a trailing newline is
# ignored), the same password as in that role's redis.url.
set -eu
usage="usage: acl.sh [-o OUT] TEMPLATE USER=PASSWORD_FILE... [-- COMMAND...]"
out=
if [ "${1:-}" = "-o" ]; then
	[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
	out=$2
	shift 2
fi
if [ $# -lt 1 ]; then
	echo "$usage" >&2
	exit 2
fi
template=$1
shift
hashes=
while [ $# -gt 0 ]; do
	pair=$1
	shift
	if [ "$pair" = "--" ]; then
		break
	fi
	user=${pair%%=*}
	file=${pair#*=}
	if [ -z "$user" ] || [ "$user" = "$pair" ] || [ -z "$file" ]; then
		echo "acl.sh: want USER=PASSWORD_FILE, got $pair" >&2
		exit 2
	fi
	password=$(cat "$file")
	if [ -z "$password" ]; then
		echo "acl.sh: $file is empty: $user would have no password" >&2
		exit 1
	fi
	hashes="$hashes $user=$(printf '%s' "$password" | sha256sum | cut -d ' ' -f 1)"
done
build() {
awk -v hashes="$hashes" '
BEGIN {
	n = split(hashes, pairs, " ")
	for (i = 1; i <= n; i++) {
		eq = index(pairs[i], "=")
		hash[substr(pairs[i], 1, eq - 1)] = substr(pairs[i], eq + 1)
	}
}
function flush() {
	if (line == "") return
	split(line, f, " ")
	if (f[2] in hash) { line = line " #" hash[f[2]]; seen[f[2]] = 1 }
	print line
	line = ""
}
/^[ \t]*#/ || /^[ \t]*$/ { next }
/^[ \t]/ {
	if (line == "") { print "acl.sh: a continued line with no user above it: " $0 > "/dev/stderr"; bad = 1; exit 1 }
	sub(/^[ \t]+/, ""); line = line " " $0; next
}
$1 == "user" { flush(); line = $0; next }
{ print "acl.sh: not a user line: " $0 > "/dev/stderr"; bad = 1; exit 1 }
END {
	if (bad) exit 1
	flush()
	for (u in hash) if (!(u in seen)) { print "acl.sh: no user " u " in the template" > "/dev/stderr"; exit 1 }
}' "$template"
}
if [ -z "$out" ]; then
	build
else
	if ! (umask 077 && build > "$out.new"); then
		rm -f "$out.new"
		exit 1
	fi
	mv "$out.new" "$out"
fi
if [ $# -gt 0 ]; then
	exec "$@"
fi
