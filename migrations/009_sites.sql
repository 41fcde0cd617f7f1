-- Sites. A deployment that outgrows one actuator splits its hosts into
-- sites: each site runs its own actuator, with its own SSH key and
-- journal, consuming only its own queues (nomos:orders:<site>,
-- nomos:probes:<site>). Every host belongs to exactly one site; a
-- container or service belongs to its host's. Existing hosts, and hosts
-- seeded without one, are in the site "default", so a deployment of one
-- site changes nothing.

CREATE TABLE sites (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO sites (name) VALUES ('default');

ALTER TABLE entities ADD COLUMN site text REFERENCES sites (name);

UPDATE entities SET site = 'default' WHERE type = 'host';

-- Only hosts carry a site; everything else takes its host's.
ALTER TABLE entities ADD CONSTRAINT entities_site_host_only CHECK (type = 'host' OR site IS NULL);
