-- A container stopped on purpose (onboot off, or a template) is "stopped":
-- its own health value, not "unhealthy", so nobody is paged for it and the
-- room and the status page say what it is. A container stopped with
-- onboot on is still unhealthy. store.rollUp writes it from the run state
-- and the container's attrs.onboot and attrs.template, which the
-- inventory reads from the node.

ALTER TABLE entity_status DROP CONSTRAINT entity_status_health_check;
ALTER TABLE entity_status ADD CONSTRAINT entity_status_health_check
    CHECK (health IN ('healthy', 'degraded', 'unhealthy', 'unknown', 'stale', 'stopped'));
