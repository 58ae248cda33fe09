-- Run after anything is applied: each function runs with the search_path of
-- the schema it was installed in, so that it means the same thing whoever
-- calls it, and pg_temp last, so that a temporary table cannot shadow ours.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = current_schema()::regnamespace
           AND p.proname LIKE 'stampeded\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END $$;
