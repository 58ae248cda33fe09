-- The runner's record of the numbered migrations applied to this schema,
-- one row each, by version and name (names are unique and never reused, so
-- an install recorded under an older numbering is renumbered by name).
CREATE TABLE IF NOT EXISTS stampeded_schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
