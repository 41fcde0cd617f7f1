#!/bin/sh
# restore.sh DUMP [DATABASE [OWNER]]: put a pg_dump custom-format archive of
# the Nomos database (one `nomos migrate -backup` wrote, or any
# `pg_dump -Fc nomos`) back as DATABASE (default nomos), owned by OWNER
# (default nomos). docs/operations.md, "Rolling back an upgrade", says when.
#
# Run it as a Postgres superuser with the bot and the actuator stopped; it
# connects as libpq's PG* variables say (systemd: sudo -u postgres; compose:
# docker compose exec -T postgres sh -s DUMP < scripts/restore.sh).
#
# Nothing is dropped until the dump has been restored whole: it is restored
# into DATABASE_restoring in one transaction, then the current DATABASE is
# renamed DATABASE_before_restore_<time> (kept, for you to drop once the
# restored one works) and the restored one takes its name.
set -eu
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: restore.sh DUMP [DATABASE [OWNER]]" >&2
	exit 2
fi
dump=$1
db=${2:-nomos}
owner=${3:-nomos}
restoring=${db}_restoring
kept=${db}_before_restore_$(date -u +%Y%m%dT%H%M%SZ)

# A whole, readable archive, before anything changes.
pg_restore --list "$dump" >/dev/null

dropdb --if-exists "$restoring"
createdb --owner="$owner" "$restoring"
if ! pg_restore --exit-on-error --single-transaction --no-owner --role="$owner" --dbname="$restoring" "$dump"; then
	dropdb --if-exists "$restoring"
	echo "restore.sh: $dump did not restore; $db is as it was" >&2
	exit 1
fi

# psql interpolates :'var' and :"var" only in what it reads, not in -c.
exists=$(echo "SELECT 1 FROM pg_database WHERE datname = :'db'" | psql -X -At -d postgres -v db="$db")
if [ "$exists" = 1 ]; then
	echo 'ALTER DATABASE :"db" RENAME TO :"kept"' | psql -X -q -d postgres -v ON_ERROR_STOP=1 -v db="$db" -v kept="$kept"
fi
echo 'ALTER DATABASE :"restoring" RENAME TO :"db"' | psql -X -q -d postgres -v ON_ERROR_STOP=1 -v db="$db" -v restoring="$restoring"
version=$(psql -X -At -d "$db" -c 'SELECT coalesce(max(version), 0) FROM nomos_schema_version')
echo "restored $dump as $db at schema version $version"
if [ "$exists" = 1 ]; then
	echo "the database it replaced is kept as $kept: drop it (dropdb $kept) once Nomos works"
fi
