//! The embedded store's SQL, in one place so a learner can read the whole
//! storage model at once. Kine (k3s) has the same table plus a lease column
//! and the previous value; here the previous value is the row `prev_revision`
//! points to.

/// The table of revisions and the compaction point.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kine (
    id              INTEGER PRIMARY KEY, -- the revision of this write
    name            TEXT    NOT NULL,    -- the key, e.g. /registry/pods/default/web-1
    created         INTEGER NOT NULL,    -- 1: this write created the key
    deleted         INTEGER NOT NULL,    -- 1: this write deleted the key
    create_revision INTEGER NOT NULL,    -- the revision that created the key (0 on a delete)
    prev_revision   INTEGER NOT NULL,    -- the key's previous row (0: none)
    value           BLOB    NOT NULL     -- the object's JSON (empty on a delete)
);
CREATE INDEX IF NOT EXISTS kine_name_id ON kine (name, id);
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (name, value) VALUES ('compact_revision', 1);
";

pub const INSERT_ROW: &str = "INSERT INTO kine
    (id, name, created, deleted, create_revision, prev_revision, value)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// The current revision and the compaction point. The newest row is never
/// compacted away, but after a migration the revision may be past every row.
pub const REVISIONS: &str = "SELECT
    max(coalesce((SELECT max(id) FROM kine), 0), m.value), m.value
    FROM meta m WHERE m.name = 'compact_revision'";

/// The live keys in [?1, ?2) as of revision ?3, at most ?4 of them (-1: all):
/// per name, the newest row at or before ?3, unless that row is a deletion.
pub const LIST: &str = "SELECT k.name, k.value, k.create_revision, k.id FROM kine k
    JOIN (SELECT max(id) AS id FROM kine WHERE name >= ?1 AND name < ?2 AND id <= ?3 GROUP BY name) newest
    ON k.id = newest.id
    WHERE k.deleted = 0 ORDER BY k.name LIMIT ?4";

/// The changes to keys in [?3, ?4) with revisions in [?1, ?2], oldest first,
/// each with the row it replaced.
pub const REPLAY: &str = "SELECT k.id, k.name, k.deleted, k.create_revision, k.value,
        p.id, p.create_revision, p.value
    FROM kine k LEFT JOIN kine p ON p.id = k.prev_revision AND k.prev_revision != 0
    WHERE k.id >= ?1 AND k.id <= ?2 AND k.name >= ?3 AND k.name < ?4
    ORDER BY k.id";

/// Compaction from ?1 to ?2: every row replaced by a write in [?1, ?2) ...
pub const COMPACT_SUPERSEDED: &str = "DELETE FROM kine WHERE id IN
    (SELECT prev_revision FROM kine WHERE id >= ?1 AND id < ?2 AND prev_revision != 0)";
/// ... and every deletion in [?1, ?2) (the rows it replaced went above).
pub const COMPACT_DELETED: &str = "DELETE FROM kine WHERE id >= ?1 AND id < ?2 AND deleted = 1";

pub const SET_COMPACTED: &str = "UPDATE meta SET value = ?1 WHERE name = 'compact_revision'";
