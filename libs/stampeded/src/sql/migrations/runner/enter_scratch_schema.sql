-- Creates the schema adoption builds its reference in, and makes it the
-- search_path's only schema, until the savepoint is rolled back. Named for
-- the backend, so that checks of two schemas at once do not wait on each
-- other's CREATE SCHEMA of one name.
DO $$
DECLARE
    scratch text := 'stampeded_seed_check_' || pg_backend_pid();
BEGIN
    EXECUTE format('CREATE SCHEMA %I', scratch);
    PERFORM set_config('search_path', quote_ident(scratch), true);
END $$;
