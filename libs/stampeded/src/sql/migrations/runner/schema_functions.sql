-- The runner's record of the SQL functions it applied: each function file's
-- checksum, so that a function whose text changed is applied again, and
-- server_version_num, the server its form was chosen for (NULL on a row
-- recorded before forms were chosen by version). Also what COMPAT made for
-- an older server (uuidv7, date_trunc), under its own name.
CREATE TABLE IF NOT EXISTS stampeded_schema_functions (
    name       text        PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    server_version_num integer
);
-- An install recorded before forms were chosen by version lacks the column.
ALTER TABLE stampeded_schema_functions ADD COLUMN IF NOT EXISTS server_version_num integer;
