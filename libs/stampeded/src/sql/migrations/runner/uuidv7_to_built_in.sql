-- Once the server has its own uuidv7() (an install made before 18, on a
-- server since upgraded), the ids are drawn by it: the defaults that name
-- the install's function are pointed at pg_catalog's, and the install's
-- function goes when nothing else uses it. (The date_trunc() of an install
-- made before 16 stays: the dedup key's generated column names it, and it
-- means what the built-in one means.)
DO $$
BEGIN
    ALTER TABLE stampeded_jobs ALTER COLUMN id SET DEFAULT pg_catalog.uuidv7();
    ALTER TABLE stampeded_workers ALTER COLUMN id SET DEFAULT pg_catalog.uuidv7();
    BEGIN
        -- Qualified: unqualified, uuidv7() is pg_catalog's now.
        EXECUTE format('DROP FUNCTION %I.uuidv7()', current_schema());
    EXCEPTION WHEN dependent_objects_still_exist THEN
        NULL;  -- a table of the user's own draws from it: it stays
    END;
END $$;
