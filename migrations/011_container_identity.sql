-- A container is "this vmid in this cluster", not "this vmid". Proxmox
-- keeps vmids unique within a cluster only: two standalone nodes both
-- count from 100, so lxc:<vmid> named two containers at once, and an
-- action on it ran on whichever host listed it last.
--
-- Every host now names its cluster in attrs.cluster (a standalone node is
-- a cluster of one, named after the host), and a container's slug is
-- lxc:<cluster>/<vmid>. A person may still write lxc:<vmid> or the bare
-- vmid; the bot resolves it where it is unique and asks where it is not.
--
-- Existing hosts were read as one cluster's nodes only by accident: each
-- becomes standalone unless the seeds say otherwise, which a re-seed
-- with cluster: on the hosts corrects. Executions keep the slug they were
-- planned with, as the record of what was approved.

ALTER TABLE entities DROP CONSTRAINT IF EXISTS entities_slug_check;
ALTER TABLE entities ADD CONSTRAINT entities_slug_check
    CHECK (slug ~ '^[a-z][a-z0-9_]*:[A-Za-z0-9][A-Za-z0-9._-]*(/[0-9]+)?$');

UPDATE entities SET attrs = attrs || jsonb_build_object('cluster', name)
WHERE type = 'host' AND coalesce(attrs->>'cluster', '') = '';

UPDATE entities c
SET slug = 'lxc:' || (h.attrs->>'cluster') || '/' || (c.attrs->>'vmid')
FROM entities h
WHERE c.type = 'lxc' AND h.type = 'host'
  AND h.name = c.attrs->>'host'
  AND c.attrs->>'vmid' ~ '^[1-9][0-9]{2,8}$'
  AND c.slug !~ '/';

-- A service names the container it runs in, for the revert hints on its
-- cards (seeding sets it from now on).
UPDATE entities s SET attrs = s.attrs || jsonb_build_object('container', c.slug)
FROM relationships r JOIN entities c ON c.id = r.from_id
WHERE r.to_id = s.id AND r.type = 'runs' AND c.type = 'lxc' AND s.type = 'service';
